#include "rnic/wire/parser.hpp"

#include <algorithm>

#include "rnic/wire/icrc.hpp"
#include "rnic/wire/inet_checksum.hpp"

namespace rnic::wire {
namespace {

Unexpected<ParseError> fail(ParseErrc code, size_t offset) { return Unexpected{ParseError{code, offset}}; }

// Reads the extension headers the opcode table lists, in wire order, from `p`.
void read_ext_headers(const OpcodeInfo& info, const uint8_t* p, ExtHeaders& ext) {
    if (info.has(kExtDeth)) { ext.deth = Deth::read(p); p += Deth::kSize; }
    if (info.has(kExtFeth)) { ext.feth = Feth::read(p); p += Feth::kSize; }
    if (info.has(kExtReth)) { ext.reth = Reth::read(p); p += Reth::kSize; }
    if (info.has(kExtAtomicEth)) { ext.atomic_eth = AtomicEth::read(p); p += AtomicEth::kSize; }
    if (info.has(kExtAeth)) { ext.aeth = Aeth::read(p); p += Aeth::kSize; }
    if (info.has(kExtAtomicAckEth)) { ext.atomic_ack_eth = AtomicAckEth::read(p); p += AtomicAckEth::kSize; }
    if (info.has(kExtImmDt)) { ext.immdt = ImmDt::read(p); p += ImmDt::kSize; }
    if (info.has(kExtIeth)) { ext.ieth = Ieth::read(p); }
}

}  // namespace

Expected<RoceFrame, ParseError> parse_frame(std::span<const uint8_t> frame, const ParseOptions& opt) {
    const uint8_t* const f = frame.data();
    const size_t n = frame.size();
    RoceFrame r;

    // Ethernet, with at most one 802.1Q tag.
    if (n < EthernetHeader::kSize) return fail(ParseErrc::TruncatedEthernet, 0);
    std::copy_n(f, 6, r.eth.dst.begin());
    std::copy_n(f + 6, 6, r.eth.src.begin());
    size_t off = 12;
    uint16_t ethertype = load_be16(f + off);
    if (ethertype == kEtherTypeVlan) {
        if (n < EthernetHeader::kSize + EthernetHeader::kVlanTagSize)
            return fail(ParseErrc::TruncatedEthernet, off);
        r.eth.vlan_tci = load_be16(f + off + 2);
        off += EthernetHeader::kVlanTagSize;
        ethertype = load_be16(f + off);
    }
    r.eth.ethertype = ethertype;
    off += 2;
    r.l3_offset = off;

    // IP.
    size_t ip_header_length = 0;
    size_t ip_end = 0;  // frame offset one past the IP packet
    uint8_t protocol = 0;
    if (ethertype == kEtherTypeIpv4) {
        if (n - off < Ipv4Header::kSize) return fail(ParseErrc::TruncatedIp, off);
        if ((f[off] >> 4) != 4) return fail(ParseErrc::BadIpVersion, off);
        r.ip_version = 4;
        r.ipv4 = Ipv4Header::read(f + off);
        ip_header_length = size_t{r.ipv4.ihl} * 4;
        if (ip_header_length < Ipv4Header::kSize) return fail(ParseErrc::BadIpHeaderLength, off);
        if (n - off < ip_header_length) return fail(ParseErrc::TruncatedIp, off);
        if (r.ipv4.total_length < ip_header_length) return fail(ParseErrc::BadIpTotalLength, off + 2);
        if (n - off < r.ipv4.total_length) return fail(ParseErrc::TruncatedIp, off + 2);
        if (opt.verify_ip_checksum && !ipv4_header_checksum_ok(f + off, ip_header_length))
            return fail(ParseErrc::BadIpChecksum, off + 10);
        if (r.ipv4.more_fragments() || r.ipv4.fragment_offset != 0) return fail(ParseErrc::IpFragment, off + 6);
        ip_end = off + r.ipv4.total_length;
        protocol = r.ipv4.protocol;
        r.src_gid = Gid::from_ipv4(r.ipv4.src);
        r.dst_gid = Gid::from_ipv4(r.ipv4.dst);
    } else if (ethertype == kEtherTypeIpv6) {
        if (n - off < Ipv6Header::kSize) return fail(ParseErrc::TruncatedIp, off);
        if ((f[off] >> 4) != 6) return fail(ParseErrc::BadIpVersion, off);
        r.ip_version = 6;
        r.ipv6 = Ipv6Header::read(f + off);
        ip_header_length = Ipv6Header::kSize;
        if (n - off - Ipv6Header::kSize < r.ipv6.payload_length) return fail(ParseErrc::TruncatedIp, off + 4);
        ip_end = off + Ipv6Header::kSize + r.ipv6.payload_length;
        // Extension headers would sit between IPv6 and UDP; RoCEv2 senders use none.
        protocol = r.ipv6.next_header;
        r.src_gid = Gid::from_ipv6(r.ipv6.src);
        r.dst_gid = Gid::from_ipv6(r.ipv6.dst);
        // IPv4-mapped addresses never appear in IPv6 headers (RFC 4291 2.5.5.2; Linux drops
        // them); accepting one would make the GID claim an IPv4 path the frame did not take.
        if (r.src_gid.is_ipv4_mapped()) return fail(ParseErrc::MappedIpv6Address, off + 8);
        if (r.dst_gid.is_ipv4_mapped()) return fail(ParseErrc::MappedIpv6Address, off + 24);
    } else {
        return fail(ParseErrc::NotIp, off - 2);
    }
    r.frame_length = ip_end;
    r.trailer_length = n - ip_end;
    if (protocol != kIpProtoUdp) return fail(ParseErrc::NotUdp, off);

    // UDP.
    off += ip_header_length;
    r.l4_offset = off;
    const size_t ip_payload = ip_end - off;
    if (ip_payload < UdpHeader::kSize) return fail(ParseErrc::TruncatedUdp, off);
    r.udp = UdpHeader::read(f + off);
    if (r.udp.dst_port != opt.udp_port) return fail(ParseErrc::WrongPort, off + 2);
    if (r.udp.length != ip_payload) return fail(ParseErrc::BadUdpLength, off + 4);
    if (opt.verify_udp_checksum && r.udp.checksum != 0 &&
        udp_checksum(f + r.l3_offset, f + off, r.udp.length) != r.udp.checksum)
        return fail(ParseErrc::BadUdpChecksum, off + 6);

    // BTH and what the opcode table says follows it.
    off += UdpHeader::kSize;
    r.bth_offset = off;
    const size_t transport_length = ip_end - off;
    if (transport_length < Bth::kSize) return fail(ParseErrc::TruncatedBth, off);
    r.bth = Bth::read(f + off);
    if (r.bth.tver != 0) return fail(ParseErrc::BadBthVersion, off + 1);  // IBA C9-3
    const OpcodeInfo& info = opcode_info(r.bth.opcode);
    if (!info.valid()) return fail(ParseErrc::IllegalOpcode, off);
    r.info = &info;
    if (transport_length < info.header_length) return fail(ParseErrc::HeaderMissing, off + Bth::kSize);
    if (transport_length < size_t{info.header_length} + kIcrcSize) return fail(ParseErrc::MissingIcrc, off + info.header_length);
    if (transport_length % 4 != 0) return fail(ParseErrc::BadPacketLength, r.l4_offset + 4);
    read_ext_headers(info, f + off + Bth::kSize, r.ext);

    const size_t payload_and_pad = transport_length - info.header_length - kIcrcSize;
    const size_t payload_offset = off + info.header_length;
    if (!info.has_payload && payload_and_pad != 0) return fail(ParseErrc::PayloadNotAllowed, payload_offset);
    if (r.bth.pad_count > payload_and_pad) return fail(ParseErrc::BadPadCount, off + 1);  // IBA C9-9
    const size_t payload_length = payload_and_pad - r.bth.pad_count;
    r.payload = frame.subspan(payload_offset, payload_length);
    r.pad = frame.subspan(payload_offset + payload_length, r.bth.pad_count);

    const size_t icrc_offset = ip_end - kIcrcSize;
    r.icrc = load_le32(f + icrc_offset);
    if (opt.verify_icrc &&
        compute_icrc(f + r.l3_offset, ip_header_length, icrc_offset - r.l3_offset) != r.icrc)
        return fail(ParseErrc::BadIcrc, icrc_offset);
    return r;
}

FrameSpec spec_from_frame(const RoceFrame& fr) {
    FrameSpec s;
    s.dst_mac = fr.eth.dst;
    s.src_mac = fr.eth.src;
    s.vlan_tci = fr.eth.vlan_tci;
    s.src_gid = fr.src_gid;
    s.dst_gid = fr.dst_gid;
    s.dscp = fr.dscp();
    s.ecn = fr.ecn();
    if (fr.ip_version == 4) {
        s.hop_limit = fr.ipv4.ttl;
        s.ip_id = fr.ipv4.id;
        s.dont_fragment = fr.ipv4.dont_fragment();
    } else {
        s.hop_limit = fr.ipv6.hop_limit;
        s.flow_label = fr.ipv6.flow_label;
    }
    s.src_port = fr.udp.src_port;
    s.dst_port = fr.udp.dst_port;
    s.bth = fr.bth;
    s.ext = fr.ext;
    s.payload = fr.payload;
    s.pad_to_ethernet_minimum = fr.trailer_length != 0;
    return s;
}

}  // namespace rnic::wire
