// Why a frame is not a valid RoCEv2 packet. Each code names exactly one rule.
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
};

inline constexpr size_t kParseErrcCount = static_cast<size_t>(ParseErrc::BadIcrc) + 1;

struct ParseError {
    ParseErrc code;
    size_t offset;  // frame offset of the field or header found wrong
};

std::string_view parse_errc_name(ParseErrc code) noexcept;   // e.g. "bad_icrc"
std::string_view parse_errc_text(ParseErrc code) noexcept;   // a sentence for humans

// Not RoCEv2 at all (other traffic on the link), as opposed to a broken RoCEv2 frame.
constexpr bool is_not_rocev2(ParseErrc code) noexcept {
    return code == ParseErrc::NotIp || code == ParseErrc::NotUdp || code == ParseErrc::WrongPort;
}

}  // namespace rnic::wire
