#include "rnic/sim/mac.hpp"

#include <algorithm>
#include <cstdio>

namespace rnic::sim {

std::optional<MacAddr> destination_mac(std::span<const uint8_t> frame) noexcept {
    if (frame.size() < kEthernetHeaderSize) return std::nullopt;
    MacAddr mac;
    std::copy_n(frame.begin(), mac.size(), mac.begin());
    return mac;
}

std::string to_string(const MacAddr& mac) {
    char text[18];
    std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    return text;
}

}  // namespace rnic::sim
