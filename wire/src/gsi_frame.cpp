#include "rnic/wire/gsi_frame.hpp"

#include "rnic/wire/opcode.hpp"

namespace rnic::wire {
namespace {

constexpr uint8_t kUdSendOnly = 0x64;

FrameSpec frame_spec_of(const GsiFrameSpec& g) {
    FrameSpec s;
    s.dst_mac = g.dst_mac;
    s.src_mac = g.src_mac;
    s.vlan_tci = g.vlan_tci;
    s.src_gid = g.src_gid;
    s.dst_gid = g.dst_gid;
    s.dscp = g.dscp;
    s.ecn = g.ecn;
    s.hop_limit = g.hop_limit;
    s.ip_id = g.ip_id;
    s.flow_label = g.flow_label;
    s.src_port = g.src_port;
    s.bth.opcode = kUdSendOnly;
    s.bth.pkey = g.pkey;
    s.bth.dest_qp = g.dest_qp;
    s.bth.ack_req = g.ack_req;
    s.bth.psn = g.psn;
    s.ext.deth = Deth{g.qkey, 0, g.src_qp};
    return s;
}

}  // namespace

Expected<size_t, BuildErrc> build_gsi_frame(const GsiFrameSpec& spec, const Mad& mad, std::span<uint8_t> out) {
    const FrameSpec s = frame_spec_of(spec);
    auto plan = plan_frame(s, kMadSize);
    if (!plan) return Unexpected{plan.error()};
    if (out.size() < plan->total) return Unexpected{BuildErrc::BufferTooSmall};
    begin_frame(s, *plan, out);
    mad.write(out.data() + plan->payload_offset);
    return finish_frame(*plan, out);
}

Expected<Mad, ParseError> gsi_mad(const RoceFrame& f) {
    if (f.bth.opcode != kUdSendOnly || f.bth.dest_qp != kGsiQpn)
        return Unexpected{ParseError{ParseErrc::NotGsiSend, f.bth_offset}};
    if (f.ext.deth->qkey != kGsiQkey) return Unexpected{ParseError{ParseErrc::BadGsiQkey, f.bth_offset + Bth::kSize}};
    const size_t payload_offset = f.bth_offset + f.info->header_length;
    auto mad = parse_mad(f.payload);
    if (!mad) return Unexpected{ParseError{mad.error().code, payload_offset + mad.error().offset}};
    return mad;
}

Expected<GsiFrame, ParseError> parse_gsi_frame(std::span<const uint8_t> frame, const ParseOptions& options) {
    auto parsed = parse_frame(frame, options);
    if (!parsed) return Unexpected{parsed.error()};
    auto mad = gsi_mad(*parsed);
    if (!mad) return Unexpected{mad.error()};
    return GsiFrame{*parsed, *mad};
}

GsiFrameSpec gsi_spec_from_frame(const RoceFrame& f) {
    const FrameSpec s = spec_from_frame(f);
    GsiFrameSpec g;
    g.dst_mac = s.dst_mac;
    g.src_mac = s.src_mac;
    g.vlan_tci = s.vlan_tci;
    g.src_gid = s.src_gid;
    g.dst_gid = s.dst_gid;
    g.dscp = s.dscp;
    g.ecn = s.ecn;
    g.hop_limit = s.hop_limit;
    g.ip_id = s.ip_id;
    g.flow_label = s.flow_label;
    g.src_port = s.src_port;
    g.pkey = f.bth.pkey;
    g.psn = f.bth.psn;
    g.ack_req = f.bth.ack_req;
    g.dest_qp = f.bth.dest_qp;
    if (f.ext.deth) {
        g.src_qp = f.ext.deth->src_qp;
        g.qkey = f.ext.deth->qkey;
    }
    return g;
}

}  // namespace rnic::wire
