#include "notify_socket.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

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

long drain(int fd) noexcept {
    char buf[256];
    long total = 0;
    // Bounded: a client writing as fast as we read must not keep the loop here.
    for (int i = 0; i < 16; ++i) {
        const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0) return -1;
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        total += n;
        if (static_cast<size_t>(n) < sizeof buf) break;
    }
    return total;
}

}  // namespace rnic::host::server
