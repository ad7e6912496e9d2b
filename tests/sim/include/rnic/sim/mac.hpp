// Just enough of Ethernet for the switch to forward a frame: the destination address.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace rnic::sim {

// Same type as rnic::wire::MacAddr, so addresses pass between the two without conversion.
using MacAddr = std::array<uint8_t, 6>;

inline constexpr size_t kEthernetHeaderSize = 14;
inline constexpr MacAddr kBroadcastMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// Destination address of an Ethernet frame; nullopt for a frame shorter than its header.
std::optional<MacAddr> destination_mac(std::span<const uint8_t> frame) noexcept;

// Broadcast and multicast: the I/G bit, the least significant bit of the first octet.
constexpr bool is_group_address(const MacAddr& mac) noexcept {
    return (mac[0] & 0x01) != 0;
}

std::string to_string(const MacAddr& mac);

}  // namespace rnic::sim
