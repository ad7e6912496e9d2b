// Why a frame is not a valid RoCEv2 packet, or the MAD it carries to QP 1 not a valid one. Each
// code names exactly one rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rnic::wire {

enum class ParseErrc : uint8_t {
    TruncatedEthernet,  // shorter than the Ethernet header (+ 802.1Q tag)
    NotIp,              // EtherType is neither IPv4 nor IPv6
    BadIpVersion,       // version nibble disagrees with the EtherType
    BadIpHeaderLength,  // IPv4 IHL < 5
    TruncatedIp,        // frame ends before the IP header or the IP length says
    BadIpTotalLength,   // IPv4 total length smaller than its header
    BadIpChecksum,
    IpFragment,         // RoCEv2 is never fragmented
    MappedIpv6Address,  // IPv6 header carrying an IPv4-mapped address (RFC 4291 2.5.5.2)
    NotUdp,
    TruncatedUdp,
    BadUdpLength,       // UDP length disagrees with the IP payload length
    WrongPort,          // UDP destination port is not 4791
    BadUdpChecksum,     // a non-zero UDP checksum that does not verify
    TruncatedBth,
    BadBthVersion,      // BTH TVer != 0
    IllegalOpcode,      // opcode not in the table (reserved, RD, manufacturer-specific)
    HeaderMissing,      // too short for the extension headers the opcode requires
    MissingIcrc,        // no room left for the 4-byte ICRC
    PayloadNotAllowed,  // payload after an opcode that carries none (ACK, READ request, atomic)
    BadPadCount,        // pad count larger than the payload, or set where there is no payload
    BadPacketLength,    // transport packet not a multiple of 4 bytes
    BadIcrc,
    // Management datagrams to QP 1 (gsi_frame.hpp, mad.hpp, cm_messages.hpp, rdma_cm_header.hpp):
    NotGsiSend,             // frame to QP 1 that is not a UD SEND ONLY
    BadGsiQkey,             // DETH Q_Key of a frame to QP 1 is not 0x80010000
    BadMadLength,           // MAD not exactly 256 bytes
    BadMadBaseVersion,      // MAD base version is not 1
    WrongMgmtClass,         // not the management class being decoded (CM: 0x07)
    BadClassVersion,        // CM class version is not 2
    BadCmMethod,            // CM message not sent with the Send method
    UnknownCmAttribute,     // attribute ID is not a CM message decoded here
    BadCmLength,            // REJ ARI or SIDR_REP info length beyond its 72-byte field
    TruncatedRdmaCmHeader,  // private data shorter than rdma_cm's 36-byte header
    BadRdmaCmVersion,       // rdma_cm header version is not 0
    BadRdmaCmIpVersion,     // rdma_cm header IP version is neither 4 nor 6
};

inline constexpr size_t kParseErrcCount = static_cast<size_t>(ParseErrc::BadRdmaCmIpVersion) + 1;

struct ParseError {
    ParseErrc code;
    size_t offset;  // offset of the field or header found wrong, in the buffer given to the parser
};

std::string_view parse_errc_name(ParseErrc code) noexcept;   // e.g. "bad_icrc"
std::string_view parse_errc_text(ParseErrc code) noexcept;   // a sentence for humans

// Not RoCEv2 at all (other traffic on the link), as opposed to a broken RoCEv2 frame.
constexpr bool is_not_rocev2(ParseErrc code) noexcept {
    return code == ParseErrc::NotIp || code == ParseErrc::NotUdp || code == ParseErrc::WrongPort;
}

}  // namespace rnic::wire
