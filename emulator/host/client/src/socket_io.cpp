#include "socket_io.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rnic/host/abi/control.hpp"

namespace rnic::host::client::detail {

int send_message(int fd, std::span<const uint8_t> bytes, std::span<const int> fds) noexcept {
    iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * abi::kMaxFdsPerMessage)] = {};
    if (!fds.empty()) {
        if (fds.size() > abi::kMaxFdsPerMessage) return EINVAL;
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    for (;;) {
        const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n >= 0) return static_cast<size_t>(n) == bytes.size() ? 0 : EPROTO;
        if (errno != EINTR) return errno;
    }
}

int receive_message(int fd, std::vector<uint8_t>& bytes, std::vector<int>& fds) {
    bytes.resize(abi::kMaxMessage);
    iovec iov{bytes.data(), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * abi::kMaxFdsPerMessage)] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int got;
            std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            fds.push_back(got);
        }
    }
    if (n == 0) {
        close_all(fds);
        return ECONNRESET;
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        close_all(fds);
        return EPROTO;
    }
    bytes.resize(static_cast<size_t>(n));
    return 0;
}

void close_all(std::vector<int>& fds) noexcept {
    for (int f : fds)
        if (f >= 0) close(f);
    fds.clear();
}

void send_byte(int fd) noexcept {
    const char byte = 1;
    (void)!send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void drain(int fd) noexcept {
    char buf[256];
    for (int i = 0; i < 64; ++i) {
        const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < static_cast<ssize_t>(sizeof buf)) return;
    }
}

}  // namespace rnic::host::client::detail
