#include "rnic/wire/parse_error.hpp"

namespace rnic::wire {

std::string_view parse_errc_name(ParseErrc code) noexcept {
    switch (code) {
        case ParseErrc::TruncatedEthernet: return "truncated_ethernet";
        case ParseErrc::NotIp: return "not_ip";
        case ParseErrc::BadIpVersion: return "bad_ip_version";
        case ParseErrc::BadIpHeaderLength: return "bad_ip_header_length";
        case ParseErrc::TruncatedIp: return "truncated_ip";
        case ParseErrc::BadIpTotalLength: return "bad_ip_total_length";
        case ParseErrc::BadIpChecksum: return "bad_ip_checksum";
        case ParseErrc::IpFragment: return "ip_fragment";
        case ParseErrc::MappedIpv6Address: return "mapped_ipv6_address";
        case ParseErrc::NotUdp: return "not_udp";
        case ParseErrc::TruncatedUdp: return "truncated_udp";
        case ParseErrc::BadUdpLength: return "bad_udp_length";
        case ParseErrc::WrongPort: return "wrong_port";
        case ParseErrc::BadUdpChecksum: return "bad_udp_checksum";
        case ParseErrc::TruncatedBth: return "truncated_bth";
        case ParseErrc::BadBthVersion: return "bad_bth_version";
        case ParseErrc::IllegalOpcode: return "illegal_opcode";
        case ParseErrc::HeaderMissing: return "header_missing";
        case ParseErrc::MissingIcrc: return "missing_icrc";
        case ParseErrc::PayloadNotAllowed: return "payload_not_allowed";
        case ParseErrc::BadPadCount: return "bad_pad_count";
        case ParseErrc::BadPacketLength: return "bad_packet_length";
        case ParseErrc::BadIcrc: return "bad_icrc";
    }
    return "unknown";
}

std::string_view parse_errc_text(ParseErrc code) noexcept {
    switch (code) {
        case ParseErrc::TruncatedEthernet: return "frame shorter than its Ethernet header";
        case ParseErrc::NotIp: return "EtherType is not IPv4 or IPv6";
        case ParseErrc::BadIpVersion: return "IP version field disagrees with the EtherType";
        case ParseErrc::BadIpHeaderLength: return "IPv4 header length below 20 bytes";
        case ParseErrc::TruncatedIp: return "frame ends inside the IP packet";
        case ParseErrc::BadIpTotalLength: return "IPv4 total length smaller than its header";
        case ParseErrc::BadIpChecksum: return "IPv4 header checksum does not verify";
        case ParseErrc::IpFragment: return "IP fragment (RoCEv2 is never fragmented)";
        case ParseErrc::MappedIpv6Address: return "IPv4-mapped address in an IPv6 header";
        case ParseErrc::NotUdp: return "IP payload is not UDP";
        case ParseErrc::TruncatedUdp: return "IP payload shorter than a UDP header";
        case ParseErrc::BadUdpLength: return "UDP length disagrees with the IP payload length";
        case ParseErrc::WrongPort: return "UDP destination port is not 4791";
        case ParseErrc::BadUdpChecksum: return "non-zero UDP checksum does not verify";
        case ParseErrc::TruncatedBth: return "UDP payload shorter than a BTH";
        case ParseErrc::BadBthVersion: return "BTH transport header version is not 0";
        case ParseErrc::IllegalOpcode: return "BTH opcode is reserved or unsupported";
        case ParseErrc::HeaderMissing: return "packet too short for the headers its opcode requires";
        case ParseErrc::MissingIcrc: return "no room for the ICRC";
        case ParseErrc::PayloadNotAllowed: return "payload after an opcode that carries none";
        case ParseErrc::BadPadCount: return "pad count exceeds the payload";
        case ParseErrc::BadPacketLength: return "transport packet length not a multiple of 4";
        case ParseErrc::BadIcrc: return "ICRC does not match";
    }
    return "unknown error";
}

}  // namespace rnic::wire
