// RoCEv2 GIDs: 16-byte IPv6 addresses; IPv4 endpoints use the IPv4-mapped form ::ffff:a.b.c.d.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rnic::wire {

struct Gid {
    std::array<uint8_t, 16> raw{};

    static Gid from_ipv4(uint32_t addr_host_order) noexcept;
    static Gid from_ipv6(const std::array<uint8_t, 16>& addr) noexcept { return Gid{addr}; }
    // Accepts "10.0.0.1", "::ffff:10.0.0.1" and any IPv6 text form.
    static std::optional<Gid> parse(std::string_view text);

    bool is_ipv4_mapped() const noexcept;
    uint32_t ipv4() const noexcept;  // host order; meaningful only when is_ipv4_mapped()
    bool is_zero() const noexcept;
    // "10.0.0.1" for IPv4-mapped GIDs, else the canonical IPv6 text.
    std::string to_ip_string() const;
    // Always the IPv6 form, as `ibv_devinfo -v` and `rdma` print GIDs ("::ffff:10.0.0.1").
    std::string to_string() const;

    friend bool operator==(const Gid&, const Gid&) = default;
};

std::string ipv4_to_string(uint32_t addr_host_order);

}  // namespace rnic::wire
