// What the CM parts of the host-service fuzzer share (cm_actions.cpp, cm_wire_actions.cpp,
// cm_checks.cpp): the addresses and CA GUIDs of the daemon and of the peer, and small helpers.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

#include "rnic/host/abi/cm.hpp"
#include "rnic/host/abi/control.hpp"
#include "rnic/wire/gid.hpp"
#include "test_addresses.hpp"

namespace rnic::host::fuzz::cmf {

inline constexpr abi::Op op_of(abi::CmOp o) {
    return static_cast<abi::Op>(o);
}

inline const wire::Gid kOwn4 = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
inline const wire::Gid kOwn6 = wire::Gid::from_ipv6(port::test::kSelfIp6);
inline const wire::Gid kOwnLinkLocal = wire::Gid::from_ipv6(port::test::kSelf.ipv6[0].addr);
inline const wire::Gid kPeer4 = wire::Gid::from_ipv4(port::test::kPeerIp);
inline const wire::Gid kPeer6 = wire::Gid::from_ipv6(port::test::kPeerIp6);
inline const wire::Gid kPeerLinkLocal = wire::Gid::from_ipv6(port::test::kPeerLinkLocal);
inline constexpr uint32_t kSilentIp = 0x0A4D0009;   // on the link, never answers ARP
inline constexpr uint32_t kOffLinkIp = 0xC0000201;  // 192.0.2.1: no route

// The CA GUID RoCE devices make from their MAC (EUI-64), as rnicd's CM does.
inline uint64_t eui64(const wire::MacAddr& m) {
    const uint8_t g[8] = {uint8_t(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
    uint64_t v = 0;
    for (uint8_t b : g) v = (v << 8) | b;
    return v;
}
inline const uint64_t kOwnGuid = eui64(port::test::kSelf.mac);
inline const uint64_t kPeerGuid = eui64(port::test::kPeerMac);

// Private data that says where each byte was.
inline void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

inline abi::CmAddress make_address(uint16_t family, const wire::Gid& g, uint16_t port) {
    abi::CmAddress a{};
    a.family = family;
    a.port = port;
    std::memcpy(a.addr, g.raw.data(), 16);
    return a;
}

inline bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// Reads whatever the socket holds, without waiting.
inline size_t read_all(int fd) {
    size_t n = 0;
    char buf[512];
    for (int i = 0; i < 64; ++i) {
        const ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r <= 0) break;
        n += static_cast<size_t>(r);
    }
    return n;
}

}  // namespace rnic::host::fuzz::cmf
