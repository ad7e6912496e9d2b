// The port's own addresses: what frames must carry to be for us, and what we answer ARP, neighbour
// solicitations and ping with. One IPv4 address; IPv6 addresses with the link-local one first.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::port {

using Ipv6Addr = std::array<uint8_t, 16>;

struct Ipv6Prefix {
    Ipv6Addr addr{};
    uint8_t length = 128;

    bool contains(const Ipv6Addr& a) const noexcept;
};

struct HostAddress {
    wire::MacAddr mac{};
    uint32_t ipv4 = 0;  // host order
    uint8_t prefix_length = 24;
    // [0] is the link-local address derived from the MAC (with_link_local() puts it there), then
    // the configured ones. The GID table lists them in this order after the IPv4 GID.
    std::vector<Ipv6Prefix> ipv6{};

    bool on_link(uint32_t addr) const noexcept {
        const uint32_t mask = prefix_length == 0 ? 0 : ~uint32_t{0} << (32 - prefix_length);
        return (addr & mask) == (ipv4 & mask);
    }

    // One of our unicast IPv6 addresses.
    bool owns(const Ipv6Addr& a) const noexcept;
    // A multicast group we listen to: all-nodes (ff02::1) or the solicited-node group of one of
    // our addresses.
    bool in_group(const Ipv6Addr& a) const noexcept;
    // Link-local, or inside one of our prefixes: reachable without a router (there is no routing).
    bool on_link(const Ipv6Addr& a) const noexcept;
    // The address we speak from to `peer`: the one whose prefix holds it, else link-local.
    const Ipv6Addr& source_for(const Ipv6Addr& peer) const noexcept;
};

inline constexpr wire::MacAddr kBroadcastMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
inline constexpr Ipv6Addr kAllNodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// fe80::/64 with the modified EUI-64 interface identifier of `mac` (RFC 4291 appendix A: ff:fe
// in the middle, the universal/local bit flipped).
Ipv6Addr link_local_from_mac(const wire::MacAddr& mac) noexcept;
// ff02::1:ffXX:XXXX, the group a neighbour solicitation for `a` goes to (RFC 4291 2.7.1).
Ipv6Addr solicited_node(const Ipv6Addr& a) noexcept;
// 33:33 and the group's low 32 bits (RFC 2464 7).
wire::MacAddr multicast_mac(const Ipv6Addr& group) noexcept;
inline bool is_multicast(const Ipv6Addr& a) noexcept {
    return a[0] == 0xff;
}
inline bool is_unspecified(const Ipv6Addr& a) noexcept {
    return a == Ipv6Addr{};
}
inline bool is_link_local(const Ipv6Addr& a) noexcept {
    return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}
// The addresses a HostAddress needs: link-local first, then `configured` (duplicates of it dropped).
std::vector<Ipv6Prefix> with_link_local(const wire::MacAddr& mac, const std::vector<Ipv6Prefix>& configured);

// The port's GID table, all RoCE v2: index 0 the IPv4-mapped ::ffff:a.b.c.d (what perftest's
// `-x 0` and every IPv4 peer use), then the IPv6 addresses in order (link-local first).
std::vector<wire::Gid> gid_table(const HostAddress& self);

// "10.0.0.1/24" -> address and prefix; nullopt on anything else.
struct Ipv4Prefix {
    uint32_t addr = 0;
    uint8_t length = 32;
};
std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);
std::optional<uint32_t> parse_ipv4(std::string_view text);
// "fd77::1/64"; without "/LEN" the length is 128. Multicast, unspecified, loopback and
// IPv4-mapped addresses are refused: none can be a host's own address.
std::optional<Ipv6Prefix> parse_ipv6_prefix(std::string_view text);
std::optional<wire::MacAddr> parse_mac(std::string_view text);
std::string ipv6_to_string(const Ipv6Addr& a);

}  // namespace rnic::port
