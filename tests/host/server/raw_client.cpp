#include "raw_client.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <stdexcept>

namespace rnic::host::test {

Reply::~Reply() {
    for (int fd : fds)
        if (fd >= 0) close(fd);
}

RawClient::RawClient(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) throw std::runtime_error("connect " + path);
}

RawClient::~RawClient() {
    close_now();
}

void RawClient::close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

void RawClient::send_raw(const void* data, size_t length, const std::vector<int>& fds) {
    iovec iov{const_cast<void*>(data), length};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)]{};
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    REQUIRE(sendmsg(fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(length));
}

uint32_t RawClient::send(abi::Op op, const void* body, size_t length, const std::vector<int>& fds) {
    std::vector<uint8_t> buf(sizeof(abi::MessageHeader) + length);
    abi::MessageHeader h{
        abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(op), seq_++, static_cast<uint32_t>(buf.size()), 0, 0};
    std::memcpy(buf.data(), &h, sizeof h);
    if (length) std::memcpy(buf.data() + sizeof h, body, length);
    send_raw(buf.data(), buf.size(), fds);
    return h.seq;
}

std::optional<Reply> RawClient::try_receive() {
    std::vector<uint8_t> buf(abi::kMaxMessage);
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return std::nullopt;
    Reply r;
    if (n == 0) {
        r.eof = true;
        return r;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            r.fds.push_back(fd);
        }
    REQUIRE(static_cast<size_t>(n) >= sizeof r.header);
    std::memcpy(&r.header, buf.data(), sizeof r.header);
    r.body.assign(buf.begin() + sizeof r.header, buf.begin() + n);
    return r;
}

BlockingClient::BlockingClient(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), std::min(path.size(), sizeof sa.sun_path - 1));
    const timeval timeout{10, 0};  // the parent's loop answers within milliseconds
    if (fd_ < 0 || setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0 ||
        connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        error_ = errno;
}

BlockingClient::~BlockingClient() {
    if (fd_ >= 0) close(fd_);
}

int BlockingClient::call(abi::Op op, const void* body, size_t length, const std::vector<int>& fds,
                         std::vector<uint8_t>* reply_body, std::vector<int>* reply_fds) {
    if (error_) return -1;
    std::vector<uint8_t> out(sizeof(abi::MessageHeader) + length);
    const abi::MessageHeader h{
        abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(op), seq_++, static_cast<uint32_t>(out.size()), 0, 0};
    std::memcpy(out.data(), &h, sizeof h);
    if (length) std::memcpy(out.data() + sizeof h, body, length);
    iovec iov{out.data(), out.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)]{};
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    if (sendmsg(fd_, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return -1;
    std::vector<uint8_t> in(abi::kMaxMessage);
    iovec riov{in.data(), in.size()};
    alignas(cmsghdr) char rcontrol[CMSG_SPACE(sizeof(int) * 8)];
    msghdr r{};
    r.msg_iov = &riov;
    r.msg_iovlen = 1;
    r.msg_control = rcontrol;
    r.msg_controllen = sizeof rcontrol;
    const ssize_t n = recvmsg(fd_, &r, MSG_CMSG_CLOEXEC);
    if (n < static_cast<ssize_t>(sizeof h)) return -1;
    std::vector<int> got;
    for (cmsghdr* c = CMSG_FIRSTHDR(&r); c; c = CMSG_NXTHDR(&r, c))
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            got.push_back(fd);
        }
    if (reply_fds)
        *reply_fds = got;
    else
        for (int fd : got) close(fd);
    abi::MessageHeader rh{};
    std::memcpy(&rh, in.data(), sizeof rh);
    if (reply_body) reply_body->assign(in.begin() + sizeof rh, in.begin() + n);
    return rh.status;
}

int BlockingClient::hello() {
    const abi::HelloRequest req{static_cast<uint32_t>(getpid()), 0};
    return call(abi::Op::Hello, req);
}

Reply Rig::wait_reply(RawClient& c, int max_turns) {
    for (int i = 0; i < max_turns; ++i) {
        turn();
        if (auto r = c.try_receive()) return std::move(*r);
    }
    FAIL("no reply from the daemon");
    return Reply{};
}

Reply Rig::call(RawClient& c, abi::Op op, const void* body, size_t length, const std::vector<int>& fds) {
    const uint32_t seq = c.send(op, body, length, fds);
    Reply r = wait_reply(c);
    if (!r.eof) {
        CHECK(r.header.seq == seq);
        CHECK(r.header.op == static_cast<uint16_t>(op));
    }
    return r;
}

Reply Rig::hello(RawClient& c) {
    abi::HelloRequest req{static_cast<uint32_t>(getpid()), 0};
    return call(c, abi::Op::Hello, req);
}

SharedBuffer::SharedBuffer(size_t bytes, bool sealable) : size(bytes) {
    fd = memfd_create("test-buffer", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0u));
    REQUIRE(ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    data = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE(data != MAP_FAILED);
}

SharedBuffer::~SharedBuffer() {
    munmap(data, size);
    close(fd);
}

Mapping::Mapping(int fd, size_t bytes, bool writable) : size(bytes) {
    void* p = mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    data = static_cast<uint8_t*>(p);
}

Mapping::~Mapping() {
    munmap(data, size);
}

}  // namespace rnic::host::test
