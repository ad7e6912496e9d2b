#include "rnic/wire/builder.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "rnic/wire/icrc.hpp"
#include "rnic/wire/inet_checksum.hpp"

namespace rnic::wire {
namespace {

// The opcode's header set must be exactly the one the spec carries.
std::optional<BuildErrc> check_headers(const OpcodeInfo& info, const ExtHeaders& e) {
    const std::pair<ExtMask, bool> have[] = {
        {kExtDeth, e.deth.has_value()},
        {kExtReth, e.reth.has_value()},
        {kExtAtomicEth, e.atomic_eth.has_value()},
        {kExtAeth, e.aeth.has_value()},
        {kExtAtomicAckEth, e.atomic_ack_eth.has_value()},
        {kExtImmDt, e.immdt.has_value()},
        {kExtIeth, e.ieth.has_value()},
        {kExtFeth, e.feth.has_value()},
    };
    for (const auto& [mask, present] : have) {
        if (info.has(mask) && !present) return BuildErrc::HeaderMissing;
        if (!info.has(mask) && present) return BuildErrc::UnexpectedHeader;
    }
    return std::nullopt;
}

Expected<FrameInProgress, BuildErrc> layout_of(const FrameSpec& s, size_t payload_length) {
    const OpcodeInfo& info = opcode_info(s.bth.opcode);
    if (!info.valid()) return Unexpected{BuildErrc::IllegalOpcode};
    if (auto err = check_headers(info, s.ext)) return Unexpected{*err};
    if (!info.has_payload && payload_length != 0) return Unexpected{BuildErrc::PayloadNotAllowed};
    const bool v4 = s.src_gid.is_ipv4_mapped();
    if (v4 != s.dst_gid.is_ipv4_mapped()) return Unexpected{BuildErrc::AddressFamilyMismatch};

    FrameInProgress l;
    l.payload_length = payload_length;
    l.ip_offset = EthernetHeader::kSize + (s.vlan_tci ? EthernetHeader::kVlanTagSize : 0);
    l.ip_header = v4 ? Ipv4Header::kSize : Ipv6Header::kSize;
    l.pad = static_cast<uint8_t>((4 - payload_length % 4) % 4);
    l.transport = info.header_length + payload_length + l.pad + kIcrcSize;
    const size_t ip_length = l.ip_header + UdpHeader::kSize + l.transport;
    if ((v4 ? ip_length : ip_length - Ipv6Header::kSize) > 0xFFFF) return Unexpected{BuildErrc::TooLong};
    l.ip_end = l.ip_offset + ip_length;
    l.total = s.pad_to_ethernet_minimum ? std::max(l.ip_end, kMinEthernetFrame) : l.ip_end;
    return l;
}

uint8_t* write_ext_headers(const OpcodeInfo& info, const ExtHeaders& e, uint8_t* p) {
    if (info.has(kExtDeth)) {
        e.deth->write(p);
        p += Deth::kSize;
    }
    if (info.has(kExtFeth)) {
        e.feth->write(p);
        p += Feth::kSize;
    }
    if (info.has(kExtReth)) {
        e.reth->write(p);
        p += Reth::kSize;
    }
    if (info.has(kExtAtomicEth)) {
        e.atomic_eth->write(p);
        p += AtomicEth::kSize;
    }
    if (info.has(kExtAeth)) {
        e.aeth->write(p);
        p += Aeth::kSize;
    }
    if (info.has(kExtAtomicAckEth)) {
        e.atomic_ack_eth->write(p);
        p += AtomicAckEth::kSize;
    }
    if (info.has(kExtImmDt)) {
        e.immdt->write(p);
        p += ImmDt::kSize;
    }
    if (info.has(kExtIeth)) {
        e.ieth->write(p);
        p += Ieth::kSize;
    }
    if (info.has(kExtCnp)) {
        std::memset(p, 0, kCnpReservedSize);
        p += kCnpReservedSize;
    }
    return p;
}

}  // namespace

std::string_view build_errc_name(BuildErrc code) noexcept {
    switch (code) {
        case BuildErrc::IllegalOpcode:
            return "illegal_opcode";
        case BuildErrc::HeaderMissing:
            return "header_missing";
        case BuildErrc::UnexpectedHeader:
            return "unexpected_header";
        case BuildErrc::PayloadNotAllowed:
            return "payload_not_allowed";
        case BuildErrc::AddressFamilyMismatch:
            return "address_family_mismatch";
        case BuildErrc::TooLong:
            return "too_long";
        case BuildErrc::BufferTooSmall:
            return "buffer_too_small";
    }
    return "unknown";
}

Expected<size_t, BuildErrc> frame_size(const FrameSpec& spec) {
    auto l = layout_of(spec, spec.payload.size());
    if (!l) return Unexpected{l.error()};
    return l->total;
}

Expected<FrameInProgress, BuildErrc> plan_frame(const FrameSpec& spec, size_t payload_length) {
    if (!spec.payload.empty()) return Unexpected{BuildErrc::UnexpectedHeader};
    return layout_of(spec, payload_length);
}

void begin_frame(const FrameSpec& s, FrameInProgress& l, std::span<uint8_t> out) {
    uint8_t* const f = out.data();
    const bool v4 = s.src_gid.is_ipv4_mapped();

    EthernetHeader eth{s.dst_mac, s.src_mac, s.vlan_tci, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6};
    eth.write(f);

    uint8_t* const ip = f + l.ip_offset;
    const size_t udp_length = UdpHeader::kSize + l.transport;
    if (v4) {
        Ipv4Header h;
        h.dscp = s.dscp;
        h.ecn = s.ecn;
        h.total_length = static_cast<uint16_t>(Ipv4Header::kSize + udp_length);
        h.id = s.ip_id;
        h.flags = s.dont_fragment ? 0x2 : 0x0;
        h.ttl = s.hop_limit;
        h.src = s.src_gid.ipv4();
        h.dst = s.dst_gid.ipv4();
        h.write(ip);
        store_be16(ip + 10, ipv4_header_checksum(ip, Ipv4Header::kSize));
    } else {
        Ipv6Header h;
        h.traffic_class = static_cast<uint8_t>((s.dscp << 2) | (s.ecn & 0x3));
        h.flow_label = s.flow_label;
        h.payload_length = static_cast<uint16_t>(udp_length);
        h.hop_limit = s.hop_limit;
        h.src = s.src_gid.raw;
        h.dst = s.dst_gid.raw;
        h.write(ip);
    }

    // RoCEv2 senders leave the UDP checksum 0; the ICRC protects the packet (annex A17.3.4).
    UdpHeader{s.src_port, s.dst_port, static_cast<uint16_t>(udp_length), 0}.write(ip + l.ip_header);

    uint8_t* p = ip + l.ip_header + UdpHeader::kSize;
    Bth bth = s.bth;
    bth.pad_count = l.pad;
    bth.write(p);
    p = write_ext_headers(opcode_info(s.bth.opcode), s.ext, p + Bth::kSize);
    l.payload_offset = static_cast<size_t>(p - f);
}

size_t finish_frame(const FrameInProgress& fp, std::span<uint8_t> out) {
    uint8_t* const f = out.data();
    uint8_t* p = f + fp.payload_offset + fp.payload_length;
    std::memset(p, 0, fp.pad);
    p += fp.pad;
    uint8_t* const ip = f + fp.ip_offset;
    store_le32(p, compute_icrc(ip, fp.ip_header, static_cast<size_t>(p - ip)));
    if (fp.total > fp.ip_end) std::memset(f + fp.ip_end, 0, fp.total - fp.ip_end);
    return fp.total;
}

Expected<size_t, BuildErrc> build_frame(const FrameSpec& s, std::span<uint8_t> out) {
    auto fp = layout_of(s, s.payload.size());
    if (!fp) return Unexpected{fp.error()};
    if (out.size() < fp->total) return Unexpected{BuildErrc::BufferTooSmall};
    begin_frame(s, *fp, out);
    if (!s.payload.empty()) std::memcpy(out.data() + fp->payload_offset, s.payload.data(), s.payload.size());
    return finish_frame(*fp, out);
}

}  // namespace rnic::wire
