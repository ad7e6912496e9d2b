// What a received frame is, decided from its first bytes only, so the poll loop can hand it to
// the ARP agent, the ICMP responder or the engine, or count it and drop it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "rnic/port/host_address.hpp"

namespace rnic::port {

enum class FrameClass : uint8_t {
    Arp,             // any ARP frame (requests for others still teach us neighbours)
    IcmpForUs,       // IPv4 ICMP addressed to our IP
    RoceForUs,       // IPv4 UDP to port 4791 addressed to our MAC and IP
    NotForUs,        // another MAC or another IP: the port sees the whole segment
    OtherForUs,      // ours, but a protocol we do not serve (TCP, other UDP ports, fragments)
    Ipv6,            // not served yet: no neighbour discovery
    Malformed,       // too short or inconsistent headers
};
inline constexpr size_t kFrameClassCount = 7;

std::string_view to_string(FrameClass c) noexcept;

inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint8_t kIpProtoIcmp = 1;

FrameClass classify(std::span<const uint8_t> frame, const HostAddress& self) noexcept;

}  // namespace rnic::port
