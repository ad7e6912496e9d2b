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
        case ParseErrc::NotGsiSend: return "not_gsi_send";
        case ParseErrc::BadGsiQkey: return "bad_gsi_qkey";
        case ParseErrc::BadMadLength: return "bad_mad_length";
        case ParseErrc::BadMadBaseVersion: return "bad_mad_base_version";
        case ParseErrc::WrongMgmtClass: return "wrong_mgmt_class";
        case ParseErrc::BadClassVersion: return "bad_class_version";
        case ParseErrc::BadCmMethod: return "bad_cm_method";
        case ParseErrc::UnknownCmAttribute: return "unknown_cm_attribute";
        case ParseErrc::BadCmLength: return "bad_cm_length";
        case ParseErrc::TruncatedRdmaCmHeader: return "truncated_rdma_cm_header";
        case ParseErrc::BadRdmaCmVersion: return "bad_rdma_cm_version";
        case ParseErrc::BadRdmaCmIpVersion: return "bad_rdma_cm_ip_version";
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
        case ParseErrc::NotGsiSend: return "frame to QP 1 is not a UD SEND ONLY";
        case ParseErrc::BadGsiQkey: return "Q_Key of a frame to QP 1 is not 0x80010000";
        case ParseErrc::BadMadLength: return "MAD is not 256 bytes";
        case ParseErrc::BadMadBaseVersion: return "MAD base version is not 1";
        case ParseErrc::WrongMgmtClass: return "MAD is not of the expected management class";
        case ParseErrc::BadClassVersion: return "CM MAD class version is not 2";
        case ParseErrc::BadCmMethod: return "CM message not sent with the Send method";
        case ParseErrc::UnknownCmAttribute: return "CM attribute ID is not a decoded message";
        case ParseErrc::BadCmLength: return "REJ ARI or SIDR_REP info length exceeds 72 bytes";
        case ParseErrc::TruncatedRdmaCmHeader: return "private data shorter than the rdma_cm header";
        case ParseErrc::BadRdmaCmVersion: return "rdma_cm header version is not 0";
        case ParseErrc::BadRdmaCmIpVersion: return "rdma_cm header IP version is neither 4 nor 6";
    }
    return "unknown error";
}

}  // namespace rnic::wire
