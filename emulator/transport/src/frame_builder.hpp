// Turns a QP's path into the addressing part of a FrameSpec; the requester and responder fill
// in the transport headers.
#pragma once

#include "queue_pair.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/source_port.hpp"

namespace rnic::transport {

inline wire::FrameSpec path_spec(const EngineConfig& cfg, const QueuePair& qp, const AddressVector& av,
                                 uint32_t dest_qpn) {
    wire::FrameSpec s;
    s.src_mac = cfg.mac;
    s.dst_mac = av.dmac;
    s.src_gid = cfg.gids.at(av.sgid_index);
    s.dst_gid = av.dgid;
    s.dscp = static_cast<uint8_t>(av.traffic_class >> 2);
    s.ecn = static_cast<uint8_t>(av.traffic_class & 0x3);
    s.hop_limit = av.hop_limit ? av.hop_limit : 64;
    s.flow_label = av.flow_label;
    s.src_port = wire::rocev2_source_port(qp.qpn, dest_qpn, av.flow_label);
    s.bth.dest_qp = dest_qpn;
    s.bth.pkey = 0xFFFF;
    return s;
}

// Builds `spec` into sink space; false when the sink is out of room or the spec is invalid.
inline bool emit_frame(FrameSink& sink, const wire::FrameSpec& spec) {
    const auto size = wire::frame_size(spec);
    if (!size) return false;
    std::span<uint8_t> out = sink.allocate(*size);
    if (out.size() < *size) return false;
    const auto n = wire::build_frame(spec, out);
    if (!n) return false;
    sink.commit(*n);
    return true;
}

inline uint64_t ack_timeout_ns(uint8_t timeout) {
    // IBA 9.7.6.1.3: 4.096 us * 2^timeout; 0 means no timeout.
    return timeout == 0 ? 0 : 4096ull << timeout;
}

}  // namespace rnic::transport
