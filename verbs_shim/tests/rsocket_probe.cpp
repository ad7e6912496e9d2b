// What rstream, riostream and rcopy do not exercise of rsockets, run between two rnicd by
// check_rsockets.py: socket options and their read-back, MSG_PEEK and MSG_WAITALL, vectored
// I/O, a half-close, a nonblocking connect and accept through rpoll, a refused connect (blocking
// and not), riomap at an explicit offset, rselect beside a pipe, keepalives on an idle
// connection, a peer that dies under a blocked rrecv; and (scenario plain) the POSIX socket
// calls, which rdma-core's librspreload turns into rsockets.
//   rsocket_probe server|client ADDRESS PORT SCENARIO
// Prints "ok ..." per check and "FAIL ..." per failure; exit status: the failures (0 = all ok).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string& what, const std::string& detail = {}) {
    if (ok) {
        std::printf("ok %s\n", what.c_str());
    } else {
        ++failures;
        std::printf("FAIL %s%s%s\n", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    }
    std::fflush(stdout);
}

std::string err(int e) {
    return std::string(strerrorname_np(e) != nullptr ? strerrorname_np(e) : "?") + " (" + std::strerror(e) + ")";
}

sockaddr_storage address(const char* host, const char* port) {
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        std::printf("FAIL bad address %s port %s\n", host, port);
        std::exit(100);
    }
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return ss;
}

socklen_t length_of(const sockaddr_storage& ss) {
    return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int get_int(int s, int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    if (rgetsockopt(s, level, name, &v, &len) != 0) return -1000 - errno;
    return v;
}

bool send_all(int s, const void* buf, size_t n) {
    const auto* p = static_cast<const uint8_t*>(buf);
    while (n != 0) {
        const ssize_t k = rsend(s, p, n, 0);
        if (k <= 0) return false;
        p += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

bool recv_all(int s, void* buf, size_t n) {
    return rrecv(s, buf, n, MSG_WAITALL) == static_cast<ssize_t>(n);
}

int listen_on(const sockaddr_storage& ss, bool nonblock) {
    const int l = rsocket(ss.ss_family, SOCK_STREAM, 0);
    if (l < 0) {
        check(false, "rsocket", err(errno));
        std::exit(100);
    }
    int on = 1;
    rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (nonblock) rfcntl(l, F_SETFL, O_NONBLOCK);
    if (rbind(l, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) != 0 || rlisten(l, 4) != 0) {
        check(false, "rbind/rlisten", err(errno));
        std::exit(100);
    }
    std::printf("listening\n");
    std::fflush(stdout);
    return l;
}

int accept_one(int l) {
    const int s = raccept(l, nullptr, nullptr);
    if (s < 0) {
        check(false, "raccept", err(errno));
        std::exit(100);
    }
    return s;
}

int connect_to(const sockaddr_storage& ss) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    if (s < 0 || rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) != 0) {
        check(false, "rconnect", err(errno));
        std::exit(100);
    }
    return s;
}

// --- basic: options, peek, waitall, vectored I/O, half-close -------------------------------

void basic_options_before(int s) {
    const int buf = 100000;
    check(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) == 0, "SO_RCVBUF set");
    check(get_int(s, SOL_SOCKET, SO_RCVBUF) == 2 * buf, "SO_RCVBUF reads back doubled");
    check(rsetsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) == 0 && get_int(s, SOL_SOCKET, SO_SNDBUF) == 2 * buf,
          "SO_SNDBUF reads back doubled");
    const int sq = 100, rq = 50, inl = 32;
    check(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &sq, sizeof sq) == 0 && get_int(s, SOL_RDMA, RDMA_SQSIZE) == sq,
          "RDMA_SQSIZE");
    check(rsetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &rq, sizeof rq) == 0 && get_int(s, SOL_RDMA, RDMA_RQSIZE) == rq,
          "RDMA_RQSIZE");
    check(rsetsockopt(s, SOL_RDMA, RDMA_INLINE, &inl, sizeof inl) == 0 && get_int(s, SOL_RDMA, RDMA_INLINE) == inl,
          "RDMA_INLINE");
    const int iomap = 300;  // rounded down to what one byte of scale holds
    check(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap) == 0 &&
              get_int(s, SOL_RDMA, RDMA_IOMAPSIZE) == 256,
          "RDMA_IOMAPSIZE 300 reads back 256", std::to_string(get_int(s, SOL_RDMA, RDMA_IOMAPSIZE)));
    const int one = 1;
    check(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 && get_int(s, IPPROTO_TCP, TCP_NODELAY) == 1,
          "TCP_NODELAY");
    check(get_int(s, IPPROTO_TCP, TCP_MAXSEG) == 2048, "TCP_MAXSEG before the route: 2048");
    linger l{0, 0};
    socklen_t len = sizeof l;
    check(rgetsockopt(s, SOL_SOCKET, SO_LINGER, &l, &len) == 0 && l.l_onoff == 1, "SO_LINGER on by default");
    l = {0, 0};
    check(rsetsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l) == 0, "SO_LINGER off");
    len = sizeof l;
    check(rgetsockopt(s, SOL_SOCKET, SO_LINGER, &l, &len) == 0 && l.l_onoff == 0, "SO_LINGER reads back off");
    int v = 0;
    len = sizeof v;
    check(rgetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, &len) != 0 && errno == ENOTSUP, "unknown option: ENOTSUP");
    check(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, 1) != 0 && errno == EINVAL, "short option length: EINVAL");
}

void basic_options_after(int s, int expected_mtu) {
    const int sq = 64;
    check(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &sq, sizeof sq) != 0 && errno == EINVAL,
          "RDMA_SQSIZE once connected: EINVAL");
    check(get_int(s, IPPROTO_TCP, TCP_MAXSEG) == expected_mtu, "TCP_MAXSEG: the path MTU",
          std::to_string(get_int(s, IPPROTO_TCP, TCP_MAXSEG)));
    check(get_int(s, SOL_SOCKET, SO_ERROR) == 0, "SO_ERROR 0");
    std::vector<uint8_t> route(4 * 72);
    socklen_t len = static_cast<socklen_t>(route.size());
    check(rgetsockopt(s, SOL_RDMA, RDMA_ROUTE, route.data(), &len) == 0 && len == 72, "RDMA_ROUTE: one path record",
          std::to_string(len));
}

void basic_server(int l, int mtu) {
    const int s = accept_one(l);
    basic_options_after(s, mtu);
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof peer, sl = sizeof self;
    check(rgetpeername(s, reinterpret_cast<sockaddr*>(&peer), &pl) == 0 &&
              rgetsockname(s, reinterpret_cast<sockaddr*>(&self), &sl) == 0 && peer.ss_family == self.ss_family,
          "rgetpeername/rgetsockname");
    // MSG_PEEK leaves the data; MSG_WAITALL gathers messages.
    char peeked[6] = {}, got[11] = {};
    check(rrecv(s, peeked, 5, MSG_PEEK | MSG_WAITALL) == 5 && std::memcmp(peeked, "hello", 5) == 0, "MSG_PEEK");
    check(recv_all(s, got, 10) && std::memcmp(got, "helloworld", 10) == 0, "MSG_WAITALL across messages");
    // Vectored receive: scattered over three buffers.
    char a[3], b[4], c[5];
    iovec iov[3] = {{a, 3}, {b, 4}, {c, 5}};
    ssize_t n = 0;
    while (n < 12) {
        msghdr msg{};
        std::vector<iovec> rest;
        size_t skip = static_cast<size_t>(n);
        for (iovec v : iov) {
            if (skip >= v.iov_len) {
                skip -= v.iov_len;
                continue;
            }
            rest.push_back({static_cast<char*>(v.iov_base) + skip, v.iov_len - skip});
            skip = 0;
        }
        msg.msg_iov = rest.data();
        msg.msg_iovlen = rest.size();
        const ssize_t k = rrecvmsg(s, &msg, 0);
        if (k <= 0) break;
        n += k;
    }
    check(n == 12 && std::memcmp(a, "abc", 3) == 0 && std::memcmp(b, "defg", 4) == 0 && std::memcmp(c, "hijkl", 5) == 0,
          "rrecvmsg scatters, rwritev gathers");
    // A bulk transfer with a pattern, checked.
    std::vector<uint8_t> bulk(3 * 1024 * 1024 + 17);
    check(recv_all(s, bulk.data(), bulk.size()), "3 MiB received");
    bool pattern = true;
    for (size_t i = 0; i < bulk.size(); ++i) pattern = pattern && bulk[i] == static_cast<uint8_t>(i * 7 + 3);
    check(pattern, "3 MiB pattern intact");
    // Half-close: the client shut down its sending side; we read to the end, then answer.
    char tail[8] = {};
    check(recv_all(s, tail, 4) && std::memcmp(tail, "last", 4) == 0, "data sent before SHUT_WR arrives");
    check(rrecv(s, tail, sizeof tail, 0) == 0, "then end of stream (0)");
    check(send_all(s, "reply after half-close", 22), "the server still sends after the client's SHUT_WR");
    check(rshutdown(s, SHUT_RDWR) == 0, "rshutdown SHUT_RDWR");
    check(rclose(s) == 0, "rclose");
}

void basic_client(const sockaddr_storage& ss, int mtu) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    basic_options_before(s);
    check(rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) == 0, "blocking rconnect", err(errno));
    basic_options_after(s, mtu);
    check(send_all(s, "hello", 5) && send_all(s, "world", 5), "two sends");
    const char* parts[] = {"abcd", "efghi", "jkl"};
    iovec iov[3] = {
        {const_cast<char*>(parts[0]), 4}, {const_cast<char*>(parts[1]), 5}, {const_cast<char*>(parts[2]), 3}};
    check(rwritev(s, iov, 3) == 12, "rwritev of three pieces");
    std::vector<uint8_t> bulk(3 * 1024 * 1024 + 17);
    for (size_t i = 0; i < bulk.size(); ++i) bulk[i] = static_cast<uint8_t>(i * 7 + 3);
    check(send_all(s, bulk.data(), bulk.size()), "3 MiB sent");
    check(send_all(s, "last", 4), "last bytes");
    check(rshutdown(s, SHUT_WR) == 0, "rshutdown SHUT_WR");
    errno = 0;
    check(rsend(s, "x", 1, 0) < 0 && errno == EPIPE, "rsend after SHUT_WR: EPIPE", err(errno));
    char reply[32] = {};
    check(recv_all(s, reply, 22) && std::memcmp(reply, "reply after half-close", 22) == 0,
          "the client still receives after its SHUT_WR");
    check(rrecv(s, reply, sizeof reply, 0) == 0, "then end of stream (0)");
    check(rclose(s) == 0, "rclose");
}

// --- nonblock: connect and accept through rpoll ----------------------------------------------

void nonblock_server(int l) {
    check(raccept(l, nullptr, nullptr) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
          "nonblocking raccept before a connection: EAGAIN");
    pollfd p{l, POLLIN, 0};
    check(rpoll(&p, 1, 20000) == 1 && (p.revents & POLLIN) != 0, "rpoll: the listener readable");
    const int s = raccept(l, nullptr, nullptr);
    check(s >= 0, "raccept", err(errno));
    check((rfcntl(s, F_GETFL) & O_NONBLOCK) == 0, "an accepted socket blocks (flags not inherited)");
    rfcntl(s, F_SETFL, O_NONBLOCK);
    char buf[16];
    pollfd q{s, POLLIN, 0};
    check(rpoll(&q, 1, 20000) == 1 && (q.revents & POLLIN) != 0, "rpoll POLLIN on data");
    check(rrecv(s, buf, sizeof buf, 0) == 5 && std::memcmp(buf, "async", 5) == 0, "nonblocking rrecv");
    check(rrecv(s, buf, sizeof buf, 0) < 0 && errno == EAGAIN, "nonblocking rrecv without data: EAGAIN");
    check(rsend(s, "done", 4, 0) == 4, "nonblocking rsend");
    q = {s, POLLIN, 0};
    check(rpoll(&q, 1, 20000) == 1 && (q.revents & (POLLIN | POLLHUP)) != 0, "rpoll: the client's close seen");
    check(rrecv(s, buf, sizeof buf, 0) == 0, "end of stream after the client closed");
    rclose(s);
}

void nonblock_client(const sockaddr_storage& ss) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    check(rfcntl(s, F_SETFL, O_NONBLOCK) == 0 && (rfcntl(s, F_GETFL) & O_NONBLOCK) != 0, "rfcntl O_NONBLOCK");
    const int rc = rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss));
    check(rc < 0 && errno == EINPROGRESS, "nonblocking rconnect: EINPROGRESS", err(errno));
    pollfd p{s, POLLOUT, 0};
    check(rpoll(&p, 1, 20000) == 1 && (p.revents & POLLOUT) != 0, "rpoll POLLOUT once connected");
    check(get_int(s, SOL_SOCKET, SO_ERROR) == 0, "SO_ERROR 0 after the connect");
    check(rsend(s, "async", 5, 0) == 5, "nonblocking rsend");
    char buf[8];
    pollfd q{s, POLLIN, 0};
    check(rpoll(&q, 1, 20000) == 1 && rrecv(s, buf, sizeof buf, 0) == 4, "the answer through rpoll");
    rclose(s);
}

// --- refused: nobody listens ----------------------------------------------------------------

void refused_client(const sockaddr_storage& ss) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    check(rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) < 0 && errno == ECONNREFUSED,
          "blocking rconnect to a port nobody listens on: ECONNREFUSED", err(errno));
    check(rsend(s, "x", 1, 0) < 0 && errno == ENOTCONN, "rsend after the failed connect: ENOTCONN", err(errno));
    rclose(s);
    const int t = rsocket(ss.ss_family, SOCK_STREAM, 0);
    rfcntl(t, F_SETFL, O_NONBLOCK);
    // The peer's REJ may be in before rconnect returns (both daemons on one host): refused at
    // once, as a nonblocking TCP connect over loopback can be; else EINPROGRESS first.
    const int rc = rconnect(t, reinterpret_cast<const sockaddr*>(&ss), length_of(ss));
    const int e0 = errno;
    check(rc < 0 && (e0 == EINPROGRESS || e0 == ECONNREFUSED), "nonblocking: EINPROGRESS or ECONNREFUSED at once",
          std::to_string(rc) + " " + err(e0));
    pollfd p{t, POLLOUT, 0};
    check(rpoll(&p, 1, 20000) == 1 && (p.revents & POLLERR) != 0, "rpoll: POLLERR");
    const int e = get_int(t, SOL_SOCKET, SO_ERROR);
    check(e == ECONNREFUSED, "SO_ERROR ECONNREFUSED", err(e));
    check(get_int(t, SOL_SOCKET, SO_ERROR) == 0, "SO_ERROR cleared once read");
    rclose(t);
}

// --- iomap: riomap at an explicit offset, riowrite into it ---------------------------------

constexpr off_t kIomapOffset = 0x10000;
constexpr size_t kIomapSize = 256 * 1024;

void iomap_server(int l) {
    const int s = accept_one(l);
    std::vector<uint8_t> target(kIomapSize, 0);
    check(riomap(s, target.data(), target.size(), PROT_WRITE, 0, kIomapOffset) == kIomapOffset,
          "riomap at an explicit offset", err(errno));
    check(send_all(s, "mapped", 6), "the mapping announced with the next send");
    char ack[8] = {};
    check(recv_all(s, ack, 7) && std::memcmp(ack, "written", 7) == 0, "the writer's notice");
    size_t bad = 0;
    for (size_t i = 100; i < kIomapSize; ++i)
        if (target[i] != static_cast<uint8_t>(i * 13 + 1)) ++bad;
    check(bad == 0 && target[99] == 0, "riowrite's bytes in place, nothing before its offset",
          std::to_string(bad) + " bad bytes");
    check(riounmap(s, target.data(), target.size()) == 0, "riounmap");
    check(riounmap(s, target.data(), target.size()) < 0 && errno == EINVAL, "riounmap twice: EINVAL");
    rclose(s);
}

void iomap_client(const sockaddr_storage& ss) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    const int size = 4;
    rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &size, sizeof size);
    check(rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) == 0, "rconnect");
    char note[8] = {};
    check(recv_all(s, note, 6), "the peer's mapping announced");
    std::vector<uint8_t> data(kIomapSize);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
    size_t done = 100;
    while (done < kIomapSize) {
        const size_t n = riowrite(s, data.data() + done, kIomapSize - done, kIomapOffset + static_cast<off_t>(done), 0);
        if (n == static_cast<size_t>(-1) || n == 0) break;
        done += n;
    }
    check(done == kIomapSize, "riowrite of 256 KiB less 100 bytes at offset + 100");
    check(riowrite(s, data.data(), 16, kIomapOffset + kIomapSize, 0) == static_cast<size_t>(-1) && errno == EINVAL,
          "riowrite past the mapping: EINVAL");
    check(send_all(s, "written", 7), "notice");
    char end[4];
    check(rrecv(s, end, sizeof end, 0) == 0, "end of stream");
    rclose(s);
}

// --- select: rselect over an rsocket and a pipe -------------------------------------------------

void select_server(int l) {
    const int s = accept_one(l);
    int p[2];
    if (pipe(p) != 0) return;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(p[0], &r);
    timeval tv{20, 0};
    const int n = rselect(std::max(s, p[0]) + 1, &r, nullptr, nullptr, &tv);
    check(n == 1 && FD_ISSET(s, &r) && !FD_ISSET(p[0], &r), "rselect: the rsocket readable, the pipe not");
    char buf[8];
    check(rrecv(s, buf, sizeof buf, 0) == 6, "its data");
    if (write(p[1], "x", 1) != 1) return;
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(p[0], &r);
    fd_set w;
    FD_ZERO(&w);
    FD_SET(s, &w);
    tv = {20, 0};
    check(rselect(std::max(s, p[0]) + 1, &r, &w, nullptr, &tv) == 2 && FD_ISSET(p[0], &r) && FD_ISSET(s, &w) &&
              !FD_ISSET(s, &r),
          "rselect: the pipe readable, the rsocket writable");
    close(p[0]);
    close(p[1]);
    send_all(s, "bye", 3);
    rclose(s);
}

void select_client(const sockaddr_storage& ss) {
    const int s = connect_to(ss);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    check(send_all(s, "select", 6), "send");
    char buf[4];
    check(recv_all(s, buf, 3), "answer");
    rclose(s);
}

// --- keepalive: an idle connection with SO_KEEPALIVE and TCP_KEEPIDLE 1 -------------------------

void keepalive_server(int l) {
    const int s = accept_one(l);
    char buf[8];
    check(recv_all(s, buf, 4) && std::memcmp(buf, "idle", 4) == 0, "data after 3.5 s of keepalives");
    send_all(s, "ok", 2);
    rclose(s);
}

void keepalive_client(const sockaddr_storage& ss) {
    const int s = rsocket(ss.ss_family, SOCK_STREAM, 0);
    const int on = 1, idle = 1;
    check(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0 && get_int(s, SOL_SOCKET, SO_KEEPALIVE) == 1,
          "SO_KEEPALIVE");
    check(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0 &&
              get_int(s, IPPROTO_TCP, TCP_KEEPIDLE) == 1,
          "TCP_KEEPIDLE 1");
    check(rconnect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) == 0, "rconnect");
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    check(send_all(s, "idle", 4), "send after idling");
    char buf[4];
    check(recv_all(s, buf, 2), "answer");
    rclose(s);
}

// --- peerdeath: the client process is killed while the server sleeps in rrecv -----------------

void peerdeath_server(int l) {
    const int s = accept_one(l);
    char buf[8];
    check(recv_all(s, buf, 5), "hello from the peer");
    std::printf("waiting\n");
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    const ssize_t n = rrecv(s, buf, sizeof buf, 0);
    const int e = errno;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(n == 0 || (n < 0 && e == ECONNRESET), "a blocked rrecv returns when the peer dies",
          std::to_string(n) + " " + err(e));
    std::printf("peer gone after %.1f s: rrecv %zd\n", secs, n);
    check(rsend(s, "x", 1, 0) < 0 && errno == ECONNRESET, "rsend to the dead peer: ECONNRESET", err(errno));
    rclose(s);
}

void peerdeath_client(const sockaddr_storage& ss) {
    const int s = connect_to(ss);
    check(send_all(s, "hello", 5), "hello");
    std::printf("ready\n");
    std::fflush(stdout);
    pause();  // killed by the test
}

// --- plain: the POSIX socket calls, for librspreload to turn into rsockets ------------------

constexpr size_t kPlainBytes = 4 * 1024 * 1024 + 3;

void plain_server(const sockaddr_storage& ss) {
    const int l = socket(ss.ss_family, SOCK_STREAM, 0);
    int on = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    check(bind(l, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) == 0 && listen(l, 1) == 0,
          "bind and listen (an rnicd address, no kernel interface's)", err(errno));
    std::printf("listening\n");
    std::fflush(stdout);
    const int s = accept(l, nullptr, nullptr);
    check(s >= 0, "accept", err(errno));
    std::vector<uint8_t> got(kPlainBytes);
    size_t n = 0;
    while (n < got.size()) {
        pollfd p{s, POLLIN, 0};
        if (poll(&p, 1, 20000) != 1) break;
        const ssize_t k = recv(s, got.data() + n, got.size() - n, 0);
        if (k <= 0) break;
        n += static_cast<size_t>(k);
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += got[i] != static_cast<uint8_t>(i * 31 + 7);
    check(n == kPlainBytes && bad == 0, "recv through poll: 4 MiB intact",
          std::to_string(n) + " bytes, " + std::to_string(bad) + " bad");
    char end;
    check(recv(s, &end, 1, 0) == 0, "end of stream after the client's shutdown");
    check(send(s, "thanks", 6, 0) == 6, "send");
    close(s);
    close(l);
}

void plain_client(const sockaddr_storage& ss) {
    const int s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(connect(s, reinterpret_cast<const sockaddr*>(&ss), length_of(ss)) == 0, "connect", err(errno));
    std::vector<uint8_t> data(kPlainBytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
    size_t n = 0;
    while (n < data.size()) {
        const ssize_t k = send(s, data.data() + n, data.size() - n, 0);
        if (k <= 0) break;
        n += static_cast<size_t>(k);
    }
    check(n == data.size(), "send 4 MiB");
    check(shutdown(s, SHUT_WR) == 0, "shutdown SHUT_WR");
    char buf[8] = {};
    check(recv(s, buf, 6, MSG_WAITALL) == 6 && std::memcmp(buf, "thanks", 6) == 0, "the answer");
    close(s);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: rsocket_probe server|client ADDRESS PORT SCENARIO [MTU]\n");
        return 100;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool server = std::strcmp(argv[1], "server") == 0;
    const sockaddr_storage ss = address(argv[2], argv[3]);
    const std::string scenario = argv[4];
    const int mtu = argc > 5 ? std::atoi(argv[5]) : 4096;
    if (scenario == "plain") {
        (server ? plain_server : plain_client)(ss);
    } else if (server) {
        const int l = listen_on(ss, scenario == "nonblock");
        if (scenario == "basic")
            basic_server(l, mtu);
        else if (scenario == "nonblock")
            nonblock_server(l);
        else if (scenario == "iomap")
            iomap_server(l);
        else if (scenario == "select")
            select_server(l);
        else if (scenario == "keepalive")
            keepalive_server(l);
        else if (scenario == "peerdeath")
            peerdeath_server(l);
        rclose(l);
    } else {
        if (scenario == "basic")
            basic_client(ss, mtu);
        else if (scenario == "nonblock")
            nonblock_client(ss);
        else if (scenario == "refused")
            refused_client(ss);
        else if (scenario == "iomap")
            iomap_client(ss);
        else if (scenario == "select")
            select_client(ss);
        else if (scenario == "keepalive")
            keepalive_client(ss);
        else if (scenario == "peerdeath")
            peerdeath_client(ss);
    }
    std::printf("%s %s: %d failures\n", argv[1], scenario.c_str(), failures);
    return failures;
}
