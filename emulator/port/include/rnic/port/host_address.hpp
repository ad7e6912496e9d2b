// The port's own addresses: what frames must carry to be for us, and what we answer ARP and
// ping with. IPv4 only for now (see docs/daemon.md for what IPv6 neighbour discovery needs).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "rnic/wire/headers.hpp"

namespace rnic::port {

struct HostAddress {
    wire::MacAddr mac{};
    uint32_t ipv4 = 0;  // host order
    uint8_t prefix_length = 24;

    bool on_link(uint32_t addr) const noexcept {
        const uint32_t mask = prefix_length == 0 ? 0 : ~uint32_t{0} << (32 - prefix_length);
        return (addr & mask) == (ipv4 & mask);
    }
};

inline constexpr wire::MacAddr kBroadcastMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// "10.0.0.1/24" -> address and prefix; nullopt on anything else.
struct Ipv4Prefix {
    uint32_t addr = 0;
    uint8_t length = 32;
};
std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);
std::optional<uint32_t> parse_ipv4(std::string_view text);
std::optional<wire::MacAddr> parse_mac(std::string_view text);

}  // namespace rnic::port
