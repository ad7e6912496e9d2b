// rsockets are not built yet (issue 13's later step): every call fails with ENOSYS, so a program
// that links them loads and reports "Function not implemented" instead of dying at load time.
#include <rdma/rsocket.h>

#include <cerrno>

#include "export.hpp"

namespace {

int unsupported() {
    errno = ENOSYS;
    return -1;
}

}  // namespace

RNIC_EXPORT int rsocket(int, int, int) {
    return unsupported();
}
RNIC_EXPORT int rbind(int, const sockaddr*, socklen_t) {
    return unsupported();
}
RNIC_EXPORT int rlisten(int, int) {
    return unsupported();
}
RNIC_EXPORT int raccept(int, sockaddr*, socklen_t*) {
    return unsupported();
}
RNIC_EXPORT int rconnect(int, const sockaddr*, socklen_t) {
    return unsupported();
}
RNIC_EXPORT int rshutdown(int, int) {
    return unsupported();
}
RNIC_EXPORT int rclose(int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rrecv(int, void*, size_t, int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
    return unsupported();
}
RNIC_EXPORT ssize_t rrecvmsg(int, msghdr*, int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rsend(int, const void*, size_t, int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
    return unsupported();
}
RNIC_EXPORT ssize_t rsendmsg(int, const msghdr*, int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rread(int, void*, size_t) {
    return unsupported();
}
RNIC_EXPORT ssize_t rreadv(int, const iovec*, int) {
    return unsupported();
}
RNIC_EXPORT ssize_t rwrite(int, const void*, size_t) {
    return unsupported();
}
RNIC_EXPORT ssize_t rwritev(int, const iovec*, int) {
    return unsupported();
}
RNIC_EXPORT int rpoll(pollfd*, nfds_t, int) {
    return unsupported();
}
RNIC_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) {
    return unsupported();
}
RNIC_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) {
    return unsupported();
}
RNIC_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) {
    return unsupported();
}
RNIC_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) {
    return unsupported();
}
RNIC_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) {
    return unsupported();
}
RNIC_EXPORT int rfcntl(int, int, ...) {
    return unsupported();
}
RNIC_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) {
    return unsupported();
}
RNIC_EXPORT int riounmap(int, void*, size_t) {
    return unsupported();
}
// librdmacm's riowrite returns the bytes written; none, with errno, on failure.
RNIC_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
    errno = ENOSYS;
    return 0;
}
