// The addresses every port and host-service test uses: ours and one peer's on the same link.
// Free of Catch2, so the fuzzers share them too.
#pragma once

#include <cstdint>

#include "rnic/port/host_address.hpp"

namespace rnic::port::test {

inline const Ipv6Addr kSelfIp6{0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // fd77::1
// 10.77.0.1/24, fe80::ff:fe00:1/64 (from the MAC), fd77::1/64
inline const HostAddress kSelf{
    {0x02, 0, 0, 0, 0, 0x01}, 0x0A4D0001, 24, with_link_local({0x02, 0, 0, 0, 0, 0x01}, {{kSelfIp6, 64}})};
inline const wire::MacAddr kPeerMac{0x02, 0, 0, 0, 0, 0x02};
inline constexpr uint32_t kPeerIp = 0x0A4D0002;
inline const Ipv6Addr kPeerIp6{0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};  // fd77::2
inline const Ipv6Addr kPeerLinkLocal = link_local_from_mac(kPeerMac);

}  // namespace rnic::port::test
