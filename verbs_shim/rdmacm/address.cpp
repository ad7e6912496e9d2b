// Address conversions and the device choice (address.hpp).
#include "address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace rnic::rdmacm {

namespace {

constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool v4_mapped(const uint8_t* bytes) {
    return std::memcmp(bytes, kV4Mapped, sizeof kV4Mapped) == 0;
}

std::optional<DeviceAddress> parse_prefix(std::string_view text) {
    const size_t slash = text.find('/');
    if (slash == std::string_view::npos || slash + 1 >= text.size()) return std::nullopt;
    const std::string host(text.substr(0, slash));
    unsigned len = 0;
    for (char c : text.substr(slash + 1)) {
        if (c < '0' || c > '9' || len > 128) return std::nullopt;
        len = len * 10 + static_cast<unsigned>(c - '0');
    }
    DeviceAddress d;
    in_addr a4{};
    in6_addr a6{};
    if (inet_pton(AF_INET, host.c_str(), &a4) == 1 && len <= 32) {
        d.addr.family = AF_INET;
        std::memcpy(d.addr.addr, kV4Mapped, sizeof kV4Mapped);
        std::memcpy(d.addr.addr + 12, &a4, 4);
        d.prefix_bits = static_cast<uint8_t>(96 + len);
    } else if (inet_pton(AF_INET6, host.c_str(), &a6) == 1 && len <= 128) {
        d.addr.family = AF_INET6;
        std::memcpy(d.addr.addr, &a6, 16);
        d.prefix_bits = static_cast<uint8_t>(len);
    } else {
        return std::nullopt;
    }
    return d;
}

// The string values of a JSON member named `key` (one string or an array of strings) in rnicd's
// compact Stats document. Not a JSON parser: enough for the two members it is used on, whose
// values are addresses (no escapes).
std::vector<std::string_view> string_values(std::string_view json, std::string_view key) {
    std::vector<std::string_view> out;
    const std::string needle = "\"" + std::string(key) + "\":";
    const size_t at = json.find(needle);
    if (at == std::string_view::npos) return out;
    size_t i = at + needle.size();
    while (i < json.size() && json[i] == ' ') ++i;
    const bool array = i < json.size() && json[i] == '[';
    if (array) ++i;
    while (i < json.size()) {
        while (i < json.size() && (json[i] == ' ' || json[i] == ',')) ++i;
        if (i >= json.size() || json[i] != '"') break;
        const size_t end = json.find('"', i + 1);
        if (end == std::string_view::npos) break;
        out.push_back(json.substr(i + 1, end - i - 1));
        i = end + 1;
        if (!array) break;
    }
    return out;
}

}  // namespace

socklen_t address_length(const sockaddr* addr) {
    if (addr == nullptr) return 0;
    switch (addr->sa_family) {
        case AF_INET:
            return sizeof(sockaddr_in);
        case AF_INET6:
            return sizeof(sockaddr_in6);
        default:
            return 0;
    }
}

std::optional<abi::CmAddress> to_cm(const sockaddr* addr) {
    if (addr == nullptr) return std::nullopt;
    abi::CmAddress a{};
    if (addr->sa_family == AF_INET) {
        sockaddr_in in;
        std::memcpy(&in, addr, sizeof in);
        a.family = AF_INET;
        a.port = ntohs(in.sin_port);
        std::memcpy(a.addr, kV4Mapped, sizeof kV4Mapped);
        std::memcpy(a.addr + 12, &in.sin_addr, 4);
        return a;
    }
    if (addr->sa_family == AF_INET6) {
        sockaddr_in6 in6;
        std::memcpy(&in6, addr, sizeof in6);
        a.family = AF_INET6;
        a.port = ntohs(in6.sin6_port);
        a.scope_id = in6.sin6_scope_id;
        std::memcpy(a.addr, &in6.sin6_addr, 16);
        return a;
    }
    return std::nullopt;
}

void to_sockaddr(const abi::CmAddress& a, sockaddr_storage& out) {
    std::memset(&out, 0, sizeof out);
    if (a.family == AF_INET) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(a.port);
        std::memcpy(&in.sin_addr, a.addr + 12, 4);
        std::memcpy(&out, &in, sizeof in);
    } else if (a.family == AF_INET6) {
        sockaddr_in6 in6{};
        in6.sin6_family = AF_INET6;
        in6.sin6_port = htons(a.port);
        in6.sin6_scope_id = a.scope_id;
        std::memcpy(&in6.sin6_addr, a.addr, 16);
        std::memcpy(&out, &in6, sizeof in6);
    }
}

bool is_any(const abi::CmAddress& a) {
    if (a.family == AF_INET) return a.addr[12] == 0 && a.addr[13] == 0 && a.addr[14] == 0 && a.addr[15] == 0;
    return std::all_of(std::begin(a.addr), std::end(a.addr), [](uint8_t b) { return b == 0; });
}

bool is_loopback(const abi::CmAddress& a) {
    if (a.family == AF_INET) return a.addr[12] == 127;
    return std::all_of(a.addr, a.addr + 15, [](uint8_t b) { return b == 0; }) && a.addr[15] == 1;
}

bool is_link_local(const abi::CmAddress& a) {
    return a.family == AF_INET6 && a.addr[0] == 0xfe && (a.addr[1] & 0xc0) == 0x80;
}

bool same_address(const abi::CmAddress& a, const abi::CmAddress& b) {
    // An IPv4 address given as ::ffff:a.b.c.d in a sockaddr_in6 names the same address.
    const bool a4 = a.family == AF_INET || (a.family == AF_INET6 && v4_mapped(a.addr));
    const bool b4 = b.family == AF_INET || (b.family == AF_INET6 && v4_mapped(b.addr));
    return a4 == b4 && std::memcmp(a.addr, b.addr, 16) == 0;
}

abi::CmAddress gid_address(const uint8_t gid[16]) {
    abi::CmAddress a{};
    a.family = v4_mapped(gid) ? AF_INET : AF_INET6;
    std::memcpy(a.addr, gid, 16);
    return a;
}

bool in_subnet(const DeviceAddress& subnet, const abi::CmAddress& a) {
    const bool sub4 = subnet.addr.family == AF_INET;
    const bool a4 = a.family == AF_INET || (a.family == AF_INET6 && v4_mapped(a.addr));
    if (sub4 != a4) return false;
    const unsigned bits = subnet.prefix_bits;
    const unsigned whole = bits / 8;
    if (std::memcmp(subnet.addr.addr, a.addr, whole) != 0) return false;
    if (bits % 8 == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits % 8));
    return (subnet.addr.addr[whole] & mask) == (a.addr[whole] & mask);
}

std::vector<DeviceAddress> parse_stats_prefixes(std::string_view json) {
    std::vector<DeviceAddress> out;
    for (const char* key : {"ipv4", "ipv6"})
        for (std::string_view v : string_values(json, key))
            if (auto d = parse_prefix(v)) out.push_back(*d);
    return out;
}

std::vector<DeviceAddress> device_addresses(std::span<const uint8_t[16]> gids,
                                            std::span<const DeviceAddress> prefixes) {
    std::vector<DeviceAddress> out;
    for (const auto& gid : gids) {
        DeviceAddress d;
        d.addr = gid_address(gid);
        if (is_any(d.addr)) continue;
        if (is_link_local(d.addr)) d.prefix_bits = 64;
        for (const DeviceAddress& p : prefixes)
            if (same_address(p.addr, d.addr)) d.prefix_bits = p.prefix_bits;
        out.push_back(d);
    }
    return out;
}

std::optional<size_t> owner_of(std::span<const std::vector<DeviceAddress>> devices, const abi::CmAddress& a) {
    for (size_t i = 0; i < devices.size(); ++i)
        for (const DeviceAddress& d : devices[i])
            if (same_address(d.addr, a)) return i;
    return std::nullopt;
}

std::optional<size_t> route_to(std::span<const std::vector<DeviceAddress>> devices, const abi::CmAddress& dst) {
    if (auto own = owner_of(devices, dst)) return own;
    std::optional<size_t> best;
    int best_bits = -1;
    std::optional<size_t> first_of_family;
    const bool dst4 = dst.family == AF_INET || (dst.family == AF_INET6 && v4_mapped(dst.addr));
    for (size_t i = 0; i < devices.size(); ++i) {
        for (const DeviceAddress& d : devices[i]) {
            if ((d.addr.family == AF_INET) != dst4) continue;
            // A link-local destination is reached only from a link-local source, any other only
            // from a global one (a default route does not leave through fe80::).
            if (is_link_local(d.addr) != is_link_local(dst)) continue;
            if (!first_of_family) first_of_family = i;
            if (in_subnet(d, dst) && d.prefix_bits > best_bits) {
                best = i;
                best_bits = d.prefix_bits;
            }
        }
    }
    return best ? best : first_of_family;
}

}  // namespace rnic::rdmacm
