// A hand-written client for the control protocol (plain sendmsg/recvmsg) and the in-process
// daemon of service_rig.hpp with Catch2 checks around its requests and replies.
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frames.hpp"
#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/doorbell.hpp"
#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/abi/ring.hpp"
#include "service_rig.hpp"

namespace rnic::host::test {

struct Reply {
    abi::MessageHeader header{};
    std::vector<uint8_t> body;
    std::vector<int> fds;
    bool eof = false;
    template <class T>
    T as() const {
        T v{};
        std::memcpy(&v, body.data(), std::min(sizeof v, body.size()));
        return v;
    }
    ~Reply();
    Reply() = default;
    Reply(Reply&& o) noexcept : header(o.header), body(std::move(o.body)), fds(std::move(o.fds)), eof(o.eof) {}
    Reply& operator=(Reply&& o) noexcept {
        std::swap(header, o.header);
        std::swap(body, o.body);
        std::swap(fds, o.fds);
        std::swap(eof, o.eof);
        return *this;
    }
    int take_fd(size_t i) {
        const int fd = fds.at(i);
        fds.at(i) = -1;
        return fd;
    }
};

class RawClient {
public:
    explicit RawClient(const std::string& path);
    ~RawClient();
    void send_raw(const void* data, size_t length, const std::vector<int>& fds = {});
    uint32_t send(abi::Op op, const void* body, size_t length, const std::vector<int>& fds = {});
    std::optional<Reply> try_receive();
    int fd() const { return fd_; }
    void close_now();

private:
    int fd_ = -1;
    uint32_t seq_ = 1;
};

// A client for a forked child (another uid, other limits) while the parent turns the loop:
// blocking calls, no Catch macros (a child reports through its exit status or a pipe).
class BlockingClient {
public:
    // Connects (errno in error() on failure; every call then fails with it).
    explicit BlockingClient(const std::string& path);
    ~BlockingClient();
    BlockingClient(const BlockingClient&) = delete;
    BlockingClient& operator=(const BlockingClient&) = delete;
    // The reply's status (a positive errno), or -1 for no reply (EOF, timeout, send failed).
    int call(abi::Op op, const void* body, size_t length, const std::vector<int>& fds = {},
             std::vector<uint8_t>* reply_body = nullptr, std::vector<int>* reply_fds = nullptr);
    template <class T>
    int call(abi::Op op, const T& body, const std::vector<int>& fds = {}, std::vector<uint8_t>* reply_body = nullptr) {
        return call(op, &body, sizeof body, fds, reply_body);
    }
    int hello();  // the reply's descriptors are closed
    int error() const { return error_; }

private:
    int fd_ = -1;
    int error_ = 0;
    uint32_t seq_ = 1;
};

// The in-process daemon (service_rig.hpp) with request/reply helpers that check as they go.
struct Rig : ServiceRig {
    using ServiceRig::ServiceRig;
    // Sends a request and turns the loop until its reply (or EOF) arrives.
    Reply call(RawClient& c, abi::Op op, const void* body, size_t length, const std::vector<int>& fds = {});
    template <class T>
    Reply call(RawClient& c, abi::Op op, const T& body, const std::vector<int>& fds = {}) {
        return call(c, op, &body, sizeof body, fds);
    }
    Reply wait_reply(RawClient& c, int max_turns = 2000);
    Reply hello(RawClient& c);
};

// Memory shared the way the client library does it: a memfd the test maps (its "address") and
// sends to the daemon; sealable as the library makes them, unless asked otherwise (a client
// that does not let the daemon seal it).
struct SharedBuffer {
    explicit SharedBuffer(size_t bytes, bool sealable = true);
    ~SharedBuffer();
    int fd = -1;
    uint8_t* data = nullptr;
    size_t size = 0;
};

// A mapping of a ring memfd the daemon returned.
struct Mapping {
    Mapping(int fd, size_t bytes, bool writable = true);
    ~Mapping();
    uint8_t* data = nullptr;
    size_t size = 0;
};

}  // namespace rnic::host::test
