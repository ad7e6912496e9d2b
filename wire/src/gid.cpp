#include "rnic/wire/gid.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {

Gid Gid::from_ipv4(uint32_t addr) noexcept {
    Gid g;
    g.raw[10] = 0xFF;
    g.raw[11] = 0xFF;
    store_be32(g.raw.data() + 12, addr);
    return g;
}

std::optional<Gid> Gid::parse(std::string_view text) {
    const std::string s(text);
    in_addr v4{};
    if (inet_pton(AF_INET, s.c_str(), &v4) == 1) return from_ipv4(ntohl(v4.s_addr));
    Gid g;
    if (inet_pton(AF_INET6, s.c_str(), g.raw.data()) == 1) return g;
    return std::nullopt;
}

bool Gid::is_ipv4_mapped() const noexcept {
    return std::all_of(raw.begin(), raw.begin() + 10, [](uint8_t b) { return b == 0; }) &&
           raw[10] == 0xFF && raw[11] == 0xFF;
}

uint32_t Gid::ipv4() const noexcept { return load_be32(raw.data() + 12); }

bool Gid::is_zero() const noexcept {
    return std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; });
}

std::string Gid::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, raw.data(), buf, sizeof buf);
    return buf;
}

std::string Gid::to_ip_string() const {
    return is_ipv4_mapped() ? ipv4_to_string(ipv4()) : to_string();
}

std::string ipv4_to_string(uint32_t addr) {
    in_addr a{};
    a.s_addr = htonl(addr);
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

}  // namespace rnic::wire
