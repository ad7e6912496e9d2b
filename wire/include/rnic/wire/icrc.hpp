// RoCEv2 invariant CRC (IBA annex A17.3.3). The IEEE CRC-32 (zlib's crc32, computed by ISA-L)
// over eight 0xFF bytes (standing
// in for the LRH), then the IP packet with its variant fields (IPv4 TOS/TTL/checksum; IPv6
// traffic class/flow label/hop limit; UDP checksum; BTH FECN/BECN/resv6) masked to ones, up to
// the ICRC. Sent least-significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rnic::wire {

// `ip` points at the IP header; `ip_header_length` is 20+options for IPv4, 40 for IPv6;
// `covered_length` counts from the IP header up to (not including) the ICRC and must cover
// at least the IP, UDP and BTH headers.
uint32_t compute_icrc(const uint8_t* ip, size_t ip_header_length, size_t covered_length) noexcept;

}  // namespace rnic::wire
