// ICMPv6 (RFC 4443) as the port's host needs it: one parse that checks lengths and the checksum
// over the pseudo-header before neighbour discovery or echo look at a message, and one builder
// for the messages the daemon originates (neighbour solicitations and advertisements).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rnic/common/frame_sink.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/wire/expected.hpp"

namespace rnic::port {

inline constexpr uint8_t kIpProtoIcmp6 = 58;
inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kIcmp6NeighborSolicitation = 135;
inline constexpr uint8_t kIcmp6NeighborAdvertisement = 136;
inline constexpr size_t kIcmp6HeaderSize = 4;  // type, code, checksum

// A checked ICMPv6 message; spans point into the received frame.
struct Icmp6Message {
    std::span<const uint8_t> frame;  // Ethernet padding excluded: ends with the IPv6 payload
    size_t l3 = 0;                   // offset of the IPv6 header (18 behind a VLAN tag)
    wire::MacAddr eth_dst{};
    wire::MacAddr eth_src{};
    Ipv6Addr src{};
    Ipv6Addr dst{};
    uint8_t hop_limit = 0;
    uint8_t type = 0;
    uint8_t code = 0;
    std::span<const uint8_t> body;  // after the 4-byte header
};

enum class Icmp6Error : uint8_t {
    Malformed,  // not IPv6 + ICMPv6, or lengths that do not fit the frame
    BadChecksum,
};

// `frame` must have been classified Icmp6ForUs (IPv6, next header 58, for us).
wire::Expected<Icmp6Message, Icmp6Error> parse_icmp6(std::span<const uint8_t> frame) noexcept;

// Ethernet + IPv6 + ICMPv6 (type, code, checksum, `body`), padded to the Ethernet minimum.
// Returns false if the sink has no room.
bool emit_icmp6(common::FrameSink& sink, const wire::MacAddr& eth_dst, const wire::MacAddr& eth_src,
                const Ipv6Addr& src, const Ipv6Addr& dst, uint8_t hop_limit, uint8_t type, uint8_t code,
                std::span<const uint8_t> body);

// The checksum field's value for the ICMPv6 message at `icmp` (its checksum bytes are counted
// as zero) of `length` bytes inside the IPv6 packet at `ip6`.
uint16_t icmp6_checksum(const uint8_t* ip6, const uint8_t* icmp, size_t length) noexcept;

}  // namespace rnic::port
