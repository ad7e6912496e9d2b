#include "notify_socket.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace rnic::host::server {

int make_notify_pair(NotifyPair& out) noexcept {
    int fds[2];
    // Stream, not datagram: a connected stream socket cannot be connect()ed elsewhere, so the
    // daemon's bytes always land where it made them go. No SOCK_NONBLOCK, which would mark both
    // ends: the client's end must block like any fd the application did not make non-blocking
    // itself (ibv_get_cq_event blocks unless it did).
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return errno;
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        const int e = errno;
        close(fds[0]);
        close(fds[1]);
        return e;
    }
    out.daemon = fds[0];
    out.client = fds[1];
    return 0;
}

void notify(int fd) noexcept {
    const char byte = 1;
    (void)!send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int make_kick(int& fd) noexcept {
    fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd < 0 ? errno : 0;
}

int take_kick(int fd) noexcept {
    uint64_t count = 0;
    iovec iov{&count, sizeof count};
    for (;;) {
        const ssize_t n = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
        if (n == static_cast<ssize_t>(sizeof count)) return 1;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) return -errno;
        return 0;
    }
}

bool kick_reads_never_wait() noexcept {
    // A blocking eventfd with a zero count: a read that honours RWF_NOWAIT says EAGAIN at once.
    const int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = take_kick(fd) == 0;
    close(fd);
    return ok;
}

}  // namespace rnic::host::server
