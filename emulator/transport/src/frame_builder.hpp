// Turns a QP's path into the addressing part of a FrameSpec (the requester and responder fill in
// the transport headers), and builds frames straight into the sink's buffer: the payload is
// written in place by the caller's `fill`, so application bytes are copied once, from registered
// memory into the frame.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "engine_core.hpp"
#include "queue_pair.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/source_port.hpp"
#include "sge_copy.hpp"

namespace rnic::transport {

inline wire::FrameSpec path_spec(const EngineConfig& cfg, const QueuePair& qp, const AddressVector& av,
                                 uint32_t dest_qpn) noexcept {
    wire::FrameSpec s;
    s.src_mac = cfg.mac;
    s.dst_mac = av.dmac;
    // valid_av() checked the index when the path or AH was set; the GID table never shrinks.
    s.src_gid = av.sgid_index < cfg.gids.size() ? cfg.gids[av.sgid_index] : wire::Gid{};
    s.dst_gid = av.dgid;
    s.dscp = static_cast<uint8_t>(av.traffic_class >> 2);
    // ECN-capable as RoCE NICs with DCQCN send, unless the application chose the ECN bits:
    // only then can a switch mark instead of drop, and only a reacting sender should ask for it.
    s.ecn = static_cast<uint8_t>(av.traffic_class & 0x3);
    if (s.ecn == 0 && cfg.congestion.rp_enabled_for(cfg.priority_of_dscp(s.dscp)))
        s.ecn = static_cast<uint8_t>(cfg.congestion.ecn_ect & 0x3);
    s.hop_limit = av.hop_limit ? av.hop_limit : 64;
    s.flow_label = av.flow_label;
    s.src_port = wire::rocev2_source_port(qp.qpn, dest_qpn, av.flow_label);
    s.bth.dest_qp = dest_qpn;
    s.bth.pkey = 0xFFFF;
    return s;
}

enum class Emit : uint8_t {
    Sent,
    NoRoom,      // the sink is full: try again on a later turn (EngineCore::tx_full is set)
    FillFailed,  // `fill` refused (a key or bounds error while gathering): nothing was sent
    FillPending,  // `fill` said Pending (an on-demand page not there yet): nothing was sent, try later
    Invalid,     // the spec cannot be built (a bug or an impossible path): nothing was sent
};

// Builds `spec` with `payload_length` bytes that `fill(span)` writes in place (returning false
// or SgeCopy::Failed/Pending to abandon the frame); an allocation that is not committed is
// reused by the sink.
template <class Fill>
Emit emit_frame(EngineCore& core, FrameSink& sink, const wire::FrameSpec& spec, size_t payload_length, Fill&& fill) {
    auto frame = wire::plan_frame(spec, payload_length);
    if (!frame) return Emit::Invalid;
    std::span<uint8_t> out = sink.allocate(frame->total);
    if (out.size() < frame->total) {
        core.tx_full = true;
        return Emit::NoRoom;
    }
    wire::begin_frame(spec, *frame, out);
    if (payload_length) {
        const auto filled = fill(out.subspan(frame->payload_offset, payload_length));
        if constexpr (std::is_same_v<std::decay_t<decltype(filled)>, bool>) {
            if (!filled) return Emit::FillFailed;
        } else {
            if (filled == SgeCopy::Pending) return Emit::FillPending;
            if (filled != SgeCopy::Ok) return Emit::FillFailed;
        }
    }
    sink.commit(wire::finish_frame(*frame, out));
    return Emit::Sent;
}

inline Emit emit_frame(EngineCore& core, FrameSink& sink, const wire::FrameSpec& spec) {
    return emit_frame(core, sink, spec, 0, [](std::span<uint8_t>) { return true; });
}

inline uint64_t ack_timeout_ns(uint8_t timeout) {
    // IBA 9.7.6.1.3: 4.096 us * 2^timeout; 0 means no timeout.
    return timeout == 0 ? 0 : 4096ull << timeout;
}

}  // namespace rnic::transport
