// Socket addresses as librdmacm's callers give them and as the CM messages carry them
// (abi::CmAddress), and the choice of the device an address belongs to or routes through.
// Pure functions: unit-tested without a daemon.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rnic/host/abi/cm.hpp"

namespace rnic::rdmacm {

namespace abi = host::abi;

// sizeof the family's sockaddr (sockaddr_in, sockaddr_in6), 0 for any other family or NULL, as
// librdmacm's ucma_addrlen answers without AF_IB support.
socklen_t address_length(const sockaddr* addr);

// The CM message's form of `addr` (AF_INET or AF_INET6; anything else: nullopt). An IPv4 address
// keeps AF_INET with its bytes as ::ffff:a.b.c.d, so 0.0.0.0 and :: stay distinct wildcards.
std::optional<abi::CmAddress> to_cm(const sockaddr* addr);
// The socket address of `a` written over `out` (zeroed first); family 0 leaves it zero.
void to_sockaddr(const abi::CmAddress& a, sockaddr_storage& out);

bool is_any(const abi::CmAddress& a);                                 // 0.0.0.0 or ::
bool is_loopback(const abi::CmAddress& a);                            // 127.0.0.0/8 or ::1
bool is_link_local(const abi::CmAddress& a);                          // fe80::/10
bool same_address(const abi::CmAddress& a, const abi::CmAddress& b);  // family and bytes, not port
// A GID of rnicd's table as an address: ::ffff:a.b.c.d is AF_INET, anything else AF_INET6.
abi::CmAddress gid_address(const uint8_t gid[16]);

// One address of a device with its prefix length in the CmAddress's 128-bit form (an IPv4 /24
// is 120 here); 128 when the prefix is unknown (the address itself only).
struct DeviceAddress {
    abi::CmAddress addr{};
    uint8_t prefix_bits = 128;
};
bool in_subnet(const DeviceAddress& subnet, const abi::CmAddress& a);

// The prefixes rnicd's Stats document lists for its device ("ipv4": "10.77.0.1/24",
// "ipv6": ["fd77::1/64"]), as DeviceAddress entries. Unparseable entries are skipped.
std::vector<DeviceAddress> parse_stats_prefixes(std::string_view json);
// The device's addresses: each GID's, with the prefix length `prefixes` gives the same address,
// link-local ones /64.
std::vector<DeviceAddress> device_addresses(std::span<const uint8_t[16]> gids, std::span<const DeviceAddress> prefixes);

// Which of `devices` (each a list of its addresses) an address belongs to, or which one reaches
// `dst` the way a routing table would: the device owning dst (a local destination), else the one
// whose subnet holds it (longest prefix), else the first one with an address of dst's family
// (its default route). nullopt when no device has an address of that family.
std::optional<size_t> owner_of(std::span<const std::vector<DeviceAddress>> devices, const abi::CmAddress& a);
std::optional<size_t> route_to(std::span<const std::vector<DeviceAddress>> devices, const abi::CmAddress& dst);

}  // namespace rnic::rdmacm
