// What a received frame is, decided from its first bytes only, so the poll loop can hand it to
// the ARP agent, ICMP or ICMPv6 (neighbour discovery, echo) or the engine, or count it and drop it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "rnic/port/host_address.hpp"

namespace rnic::port {

enum class FrameClass : uint8_t {
    Arp,         // any ARP frame (requests for others still teach us neighbours)
    IcmpForUs,   // IPv4 ICMP addressed to our IP
    RoceForUs,   // UDP to port 4791 addressed to our MAC and one of our IPv4/IPv6 addresses
    NotForUs,    // another MAC or another IP or a group we are not in: the port sees the whole segment
    OtherForUs,  // ours, but a protocol we do not serve (TCP, other UDP ports, fragments, IPv6
                 // extension headers)
    Icmp6ForUs,  // ICMPv6 to one of our IPv6 addresses, all-nodes or our solicited-node groups
    Malformed,   // too short or inconsistent headers
    MacControl,  // EtherType 0x8808, untagged: PAUSE, PFC (the port parses it, whatever the MAC)
};
inline constexpr size_t kFrameClassCount = 8;

std::string_view to_string(FrameClass c) noexcept;

inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeMacControl = 0x8808;
inline constexpr uint8_t kIpProtoIcmp = 1;

// A frame is ours when it carries our MAC and one of our addresses, or (IPv6) a group we listen to
// under that group's own multicast MAC.
FrameClass classify(std::span<const uint8_t> frame, const HostAddress& self) noexcept;

}  // namespace rnic::port
