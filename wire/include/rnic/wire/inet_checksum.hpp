// RFC 1071 Internet checksum for the IPv4 header and, when a sender filled it, the UDP checksum;
// the pseudo-header sum is shared with ICMPv6, whose checksum covers one too (RFC 4443 2.3).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rnic::wire {

// One's-complement sum of 16-bit big-endian words, folded, not inverted.
uint32_t inet_sum(const uint8_t* data, size_t length, uint32_t sum = 0) noexcept;
uint16_t inet_fold(uint32_t sum) noexcept;

uint16_t ipv4_header_checksum(const uint8_t* header, size_t header_length) noexcept;
// A received header verifies when its words, the checksum included, sum to all ones (RFC 1071):
// both 0x0000 and 0xFFFF (one's-complement -0, which incremental updates by routers may leave,
// RFC 1624) verify a header whose other words sum to 0xFFFF, as they do in Linux.
bool ipv4_header_checksum_ok(const uint8_t* header, size_t header_length) noexcept;

// Sum of the pseudo-header (RFC 768 for IPv4, RFC 8200 8.1 for IPv6) for an upper-layer message of
// `upper_length` bytes carried in protocol `next_header`; `ip` points at the IPv4 or IPv6 header.
uint32_t pseudo_header_sum(const uint8_t* ip, uint8_t next_header, size_t upper_length) noexcept;

// UDP checksum over the pseudo-header; `ip` points at the IPv4 or IPv6 header, `udp` at a UDP
// datagram of `udp_length` bytes. Returns the value to put in the header (0 maps to 0xFFFF).
uint16_t udp_checksum(const uint8_t* ip, const uint8_t* udp, size_t udp_length) noexcept;

}  // namespace rnic::wire
