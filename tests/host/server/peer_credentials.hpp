// SO_PEERCRED as the tests need it: this binary interposes getsockopt (the executable's
// definition wins over libc's) so a test can make the next SO_PEERCRED fail, or answer with
// another uid (the pid stays the real peer's). Every other call goes to libc.
#pragma once

#include <atomic>
#include <cstdint>

namespace rnic::host::test {

extern std::atomic<int> fail_next_peercred;  // an errno for the next SO_PEERCRED, 0: none
extern std::atomic<uint32_t> next_peer_uid;  // UINT32_MAX: the real one
inline constexpr uint32_t kRealPeerUid = UINT32_MAX;

}  // namespace rnic::host::test
