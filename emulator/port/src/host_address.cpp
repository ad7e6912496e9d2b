#include "rnic/port/host_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <string>

#include "rnic/wire/gid.hpp"

namespace rnic::port {

namespace {
// "/NN" after an address: the prefix length, at most `max`; an empty suffix means `max`.
std::optional<uint8_t> parse_length(std::string_view text, size_t slash, unsigned max) {
    if (slash == std::string_view::npos) return static_cast<uint8_t>(max);
    const auto digits = text.substr(slash + 1);
    unsigned len = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), len);
    if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty() || len > max) return std::nullopt;
    return static_cast<uint8_t>(len);
}
}  // namespace

bool Ipv6Prefix::contains(const Ipv6Addr& a) const noexcept {
    const size_t full = length / 8;
    if (!std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(full), addr.begin())) return false;
    if (length % 8 == 0) return true;
    const auto mask = static_cast<uint8_t>(0xff00u >> (length % 8));
    return (a[full] & mask) == (addr[full] & mask);
}

bool HostAddress::owns(const Ipv6Addr& a) const noexcept {
    return std::any_of(ipv6.begin(), ipv6.end(), [&](const Ipv6Prefix& p) { return p.addr == a; });
}

bool HostAddress::in_group(const Ipv6Addr& a) const noexcept {
    if (a == kAllNodes) return true;
    return std::any_of(ipv6.begin(), ipv6.end(), [&](const Ipv6Prefix& p) { return solicited_node(p.addr) == a; });
}

bool HostAddress::on_link(const Ipv6Addr& a) const noexcept {
    if (is_link_local(a)) return true;
    return std::any_of(ipv6.begin(), ipv6.end(), [&](const Ipv6Prefix& p) { return p.contains(a); });
}

const Ipv6Addr& HostAddress::source_for(const Ipv6Addr& peer) const noexcept {
    static const Ipv6Addr kNone{};
    if (ipv6.empty()) return kNone;
    if (!is_link_local(peer))
        for (const Ipv6Prefix& p : ipv6)
            if (!is_link_local(p.addr) && p.contains(peer)) return p.addr;
    return ipv6.front().addr;
}

Ipv6Addr link_local_from_mac(const wire::MacAddr& mac) noexcept {
    Ipv6Addr a{0xfe, 0x80};
    a[8] = mac[0] ^ 0x02;  // the universal/local bit, inverted
    a[9] = mac[1];
    a[10] = mac[2];
    a[11] = 0xff;
    a[12] = 0xfe;
    a[13] = mac[3];
    a[14] = mac[4];
    a[15] = mac[5];
    return a;
}

Ipv6Addr solicited_node(const Ipv6Addr& a) noexcept {
    Ipv6Addr g{0xff, 0x02};
    g[11] = 0x01;
    g[12] = 0xff;
    std::copy(a.begin() + 13, a.end(), g.begin() + 13);
    return g;
}

wire::MacAddr multicast_mac(const Ipv6Addr& group) noexcept {
    return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

std::vector<Ipv6Prefix> with_link_local(const wire::MacAddr& mac, const std::vector<Ipv6Prefix>& configured) {
    std::vector<Ipv6Prefix> out{{link_local_from_mac(mac), 64}};
    for (const Ipv6Prefix& p : configured)
        if (std::none_of(out.begin(), out.end(), [&](const Ipv6Prefix& q) { return q.addr == p.addr; }))
            out.push_back(p);
    return out;
}

std::vector<wire::Gid> gid_table(const HostAddress& self) {
    std::vector<wire::Gid> gids{wire::Gid::from_ipv4(self.ipv4)};
    for (const Ipv6Prefix& p : self.ipv6) gids.push_back(wire::Gid::from_ipv6(p.addr));
    return gids;
}

std::optional<Ipv6Prefix> parse_ipv6_prefix(std::string_view text) {
    const auto slash = text.find('/');
    const std::string s(text.substr(0, slash));
    Ipv6Prefix p;
    if (inet_pton(AF_INET6, s.c_str(), p.addr.data()) != 1) return std::nullopt;
    const auto len = parse_length(text, slash, 128);
    if (!len) return std::nullopt;
    p.length = *len;
    const Ipv6Addr loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (is_multicast(p.addr) || is_unspecified(p.addr) || p.addr == loopback ||
        wire::Gid::from_ipv6(p.addr).is_ipv4_mapped())
        return std::nullopt;
    return p;
}

std::string ipv6_to_string(const Ipv6Addr& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
    return buf;
}

std::optional<uint32_t> parse_ipv4(std::string_view text) {
    const std::string s(text);
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
    return ntohl(a.s_addr);
}

std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text) {
    const auto slash = text.find('/');
    const auto addr = parse_ipv4(text.substr(0, slash));
    if (!addr) return std::nullopt;
    const auto len = parse_length(text, slash, 32);
    if (!len) return std::nullopt;
    return Ipv4Prefix{*addr, *len};
}

std::optional<wire::MacAddr> parse_mac(std::string_view text) {
    wire::MacAddr mac{};
    if (text.size() != 17) return std::nullopt;
    for (size_t i = 0; i < 6; ++i) {
        if (i > 0 && text[i * 3 - 1] != ':' && text[i * 3 - 1] != '-') return std::nullopt;
        unsigned v = 0;
        const char* b = text.data() + i * 3;
        const auto [end, ec] = std::from_chars(b, b + 2, v, 16);
        if (ec != std::errc{} || end != b + 2) return std::nullopt;
        mac[i] = static_cast<uint8_t>(v);
    }
    return mac;
}

}  // namespace rnic::port
