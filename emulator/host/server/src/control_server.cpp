// The control socket: accepting, reading one message at a time with its descriptors, checking
// its header, and answering; op_table.cpp checks the rest against the op's row and runs its
// handler.
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "control_request.hpp"
#include "peer_process.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

// ---------------------------------------------------------------------------------------------
// The socket

void HostService::Impl::listen() {
    std::error_code ec;
    if (std::filesystem::create_directories(config.run_dir, ec)) {
        // Whatever the umask: the users the socket's mode admits must be able to reach it.
        if (chmod(config.run_dir.c_str(), 0755) != 0)
            throw std::runtime_error("cannot chmod run directory " + config.run_dir + ": " + std::strerror(errno));
    } else if (!ec) {
        struct stat dir {};
        // A directory someone else made keeps its mode; say so if it hides the socket.
        if (stat(config.run_dir.c_str(), &dir) == 0 && (config.socket_mode & 0007) && !(dir.st_mode & S_IXOTH))
            spdlog::warn(
                "run directory {} (mode {:o}) is not searchable by other users: only its owner and group "
                "can reach the socket",
                config.run_dir, dir.st_mode & 07777);
    }
    if (ec) throw std::runtime_error("cannot create run directory " + config.run_dir + ": " + ec.message());
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) throw std::runtime_error("socket path too long: " + path);

    // A socket file may be a live daemon's (refuse) or a crashed one's (remove it).
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
        const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::memcpy(sa.sun_path, path.c_str(), path.size());
        const int rc = connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
        const int err = errno;
        close(probe);
        if (rc == 0) throw std::runtime_error("another rnicd is serving " + path);
        if (err != ECONNREFUSED && err != ENOTSOCK && err != EPROTOTYPE)
            throw std::runtime_error("cannot probe " + path + ": " + std::strerror(err));
        spdlog::info("removing stale socket {}", path);
        unlink(path.c_str());
    }
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const int err = errno;
        if (fd >= 0) close(fd);
        throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(err));
    }
    // connect() needs write permission on the socket file; bind left the umask's mode. Set
    // before listen(), so nobody the mode excludes ever gets in.
    const gid_t gid = config.socket_gid ? static_cast<gid_t>(*config.socket_gid) : static_cast<gid_t>(-1);
    if ((config.socket_gid && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) ||
        chmod(path.c_str(), config.socket_mode) != 0 || ::listen(fd, 64) != 0) {
        const int err = errno;
        close(fd);
        unlink(path.c_str());
        throw std::runtime_error("cannot set up " + path + ": " + std::strerror(err));
    }
    acceptor.emplace(io, fd);
    listening = true;
    accept_next();
}

void HostService::Impl::accept_next() {
    acceptor->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec || !listening) return;
        woken = true;
        for (;;) {
            const int fd = accept4(acceptor->native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;
            ucred cred{};
            socklen_t len = sizeof cred;
            const int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
            const int err = rc == 0 ? 0 : errno;
            auto s = std::make_shared<Session>(next_session++, Session::Socket(io, fd));
            sessions.emplace(s->id, s);
            ++counters.sessions_opened;
            if (rc == 0 && len == sizeof cred) {
                s->pid = static_cast<uint32_t>(cred.pid);
                s->uid = cred.uid;
                s->peer_known = true;
                // Who registers memory, and its limit should it be gone by the time it does:
                // both read from /proc now, while the connecting process surely exists.
                s->process = {s->pid, process_start_time(s->pid).value_or(0)};
                s->accepted_lock_limit = process_lock_limit(s->process).value_or(LockLimit{});
                spdlog::debug("session {}: connected (pid {}, uid {})", s->id, s->pid, s->uid);
            } else {
                // Per-user limits, Stats' view and the memory-lock limit all hang on the peer's
                // identity: a peer we cannot identify must not pass as uid 0. Its Hello gets
                // EACCES, which the client can report, where closing now would look like a
                // crashed daemon.
                spdlog::warn("session {}: cannot read the peer's credentials (SO_PEERCRED: {}); refusing it", s->id,
                             err ? std::strerror(err) : "short answer");
            }
            read_next(s);
        }
        accept_next();
    });
}

void HostService::Impl::read_next(const std::shared_ptr<Session>& s) {
    if (s->closed || s->reading || s->deferred) return;
    s->reading = true;
    s->socket.async_wait(Session::Socket::wait_read, [this, s](const boost::system::error_code& ec) {
        s->reading = false;
        woken = true;
        if (s->closed) return;
        if (ec) {
            close_session(*s, "socket error");
            return;
        }
        on_readable(s);
    });
}

void HostService::Impl::on_readable(const std::shared_ptr<Session>& s) {
    iovec iov{rx_buffer.data(), rx_buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(s->socket.native_handle(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        read_next(s);
        return;
    }
    std::vector<int> fds;
    if (n >= 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                fds.push_back(fd);
            }
        }
    }
    if (n <= 0) {  // EOF (SEQPACKET reads 0 only at end of stream) or an error
        close_fds(fds);
        close_session(*s, n == 0 ? "disconnected" : "receive error");
        return;
    }
    ++counters.control_messages;
    MessageHeader h{};
    if (static_cast<size_t>(n) < sizeof h || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (static_cast<size_t>(n) >= sizeof h) std::memcpy(&h, rx_buffer.data(), sizeof h);
        close_fds(fds);
        reject(*s, h, EPROTO, "truncated message");
        return;
    }
    std::memcpy(&h, rx_buffer.data(), sizeof h);
    if (h.magic != kMagic || h.version != kAbiVersion || h.length != static_cast<uint32_t>(n)) {
        close_fds(fds);
        reject(*s, h, EPROTO, h.magic != kMagic ? "bad magic" : h.version != kAbiVersion ? "ABI version" : "length");
        return;
    }
    const std::span<const uint8_t> body(rx_buffer.data() + sizeof h, static_cast<size_t>(n) - sizeof h);
    dispatch(*s, h, body, fds);
    close_fds(fds);
    if (!s->closed) {
        read_next(s);
        arm_kick(s);  // from Hello on
    }
}

bool HostService::Impl::reply(Session& s, const MessageHeader& request, int result, std::span<const uint8_t> body,
                              std::span<const int> fds) {
    if (s.closed) return false;
    if (result != 0) {
        body = {};
        fds = {};
    }
    std::vector<uint8_t> out(sizeof(MessageHeader) + body.size());
    MessageHeader h{};
    h.magic = kMagic;
    h.version = kAbiVersion;
    h.op = request.op;
    h.seq = request.seq;
    h.length = static_cast<uint32_t>(out.size());
    h.status = result;
    std::memcpy(out.data(), &h, sizeof h);
    if (!body.empty()) std::memcpy(out.data() + sizeof h, body.data(), body.size());
    iovec iov{out.data(), out.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)]{};
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    // The client waits for each reply, so a full socket buffer means it stopped reading.
    if (sendmsg(s.socket.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(out.size())) {
        close_session(s, "reply not accepted");
        return false;
    }
    return true;
}

void HostService::Impl::reject(Session& s, const MessageHeader& request, int result, const char* why) {
    ++counters.control_errors;
    spdlog::warn("session {} (pid {}): malformed message (op {}): {}; closing", s.id, s.pid, request.op, why);
    reply(s, request, result);
    close_session(s, "malformed message");
}

}  // namespace rnic::host::server
