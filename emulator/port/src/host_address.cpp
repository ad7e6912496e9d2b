#include "rnic/port/host_address.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <string>

namespace rnic::port {

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
    Ipv4Prefix p{*addr, 32};
    if (slash != std::string_view::npos) {
        const auto digits = text.substr(slash + 1);
        unsigned len = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), len);
        if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty() || len > 32)
            return std::nullopt;
        p.length = static_cast<uint8_t>(len);
    }
    return p;
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
