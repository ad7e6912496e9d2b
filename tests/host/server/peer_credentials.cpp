#include "peer_credentials.hpp"

#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>

namespace rnic::host::test {
std::atomic<int> fail_next_peercred{0};
std::atomic<uint32_t> next_peer_uid{kRealPeerUid};
}  // namespace rnic::host::test

using rnic::host::test::fail_next_peercred;
using rnic::host::test::kRealPeerUid;
using rnic::host::test::next_peer_uid;

// SO_PEERCRED does not fail on a connected Unix socket and always tells the truth; the tests
// need both otherwise.
extern "C" int getsockopt(int fd, int level, int name, void* __restrict value, socklen_t* __restrict length) noexcept {
    if (level == SOL_SOCKET && name == SO_PEERCRED)
        if (const int err = fail_next_peercred.exchange(0)) {
            errno = err;
            return -1;
        }
    using Getsockopt = int (*)(int, int, int, void*, socklen_t*);
    static const auto real = reinterpret_cast<Getsockopt>(dlsym(RTLD_NEXT, "getsockopt"));
    const int rc = real(fd, level, name, value, length);
    if (rc == 0 && level == SOL_SOCKET && name == SO_PEERCRED && *length == sizeof(ucred))
        if (const uint32_t uid = next_peer_uid.exchange(kRealPeerUid); uid != kRealPeerUid)
            static_cast<ucred*>(value)->uid = uid;
    return rc;
}
