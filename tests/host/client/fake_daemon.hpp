// A few dozen lines of rnicd for the client tests: answers the control ops over a connected
// SOCK_SEQPACKET socket from a thread, creating real ring memfds, and lets the test play the
// daemon's part on the rings (CQEs, events) and die on request.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/doorbell.hpp"
#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/abi/ring.hpp"

namespace rnic::test {

struct SharedRing {
    int fd = -1;
    void* base = nullptr;
    size_t bytes = 0;
};

class FakeDaemon {
public:
    // `fd`: the daemon's end of a connected socket; `stats`: the Stats reply.
    explicit FakeDaemon(int fd, std::string stats = "{}");
    ~FakeDaemon();

    // Closes the daemon's end as a crash would and waits for the thread.
    void die();

    std::mutex mutex;  // guards everything below while the thread runs
    std::vector<uint16_t> ops;
    std::map<uint32_t, int> segment_fds;  // ShareSegment id -> fd received
    std::map<uint32_t, uint64_t> segment_lengths;
    std::vector<uint32_t> released_segments;
    host::abi::RegMrRequest last_reg{};
    std::vector<host::abi::SegmentRun> last_runs;
    std::map<uint32_t, SharedRing> cqs;  // by handle
    std::map<uint32_t, SharedRing> qps;  // by qpn
    std::map<uint32_t, host::abi::CreateQpReply> qp_replies;
    std::map<uint32_t, SharedRing> srqs;
    std::map<uint32_t, int> channel_fds;  // by handle: the daemon's end of each channel socket
    std::map<uint16_t, int> fail_ops;     // op -> errno to answer once
    std::set<uint16_t> silent_ops;        // ops never answered
    std::string stats_json = "{}";
    std::string log_level;
    int async_notify_fd = -1;  // the daemon's end of the session's async event socket
    int kick_fd = -1;          // the session's kick eventfd
    SharedRing status;
    SharedRing async_ring;

    host::abi::StatusPage* status_page() { return static_cast<host::abi::StatusPage*>(status.base); }
    // Daemon-side actions on the shared memory.
    void push_cqe(uint32_t cq, const host::abi::Cqe& cqe);
    void raise_cq_event(uint32_t cq);
    void push_async_event(uint32_t type, uint32_t object);
    // Kicks the client wrote since the last call.
    long take_kicks();

private:
    void run();
    void answer(const host::abi::MessageHeader& h, const std::vector<uint8_t>& body, std::vector<int>& fds);
    void reply(const host::abi::MessageHeader& h, int status, const void* body, size_t len, std::vector<int> fds = {});

    int fd_;
    std::thread thread_;
    uint32_t next_handle_ = 1;
    uint32_t next_qpn_ = 0x11;
    uint32_t next_doorbell_ = 0;
};

SharedRing make_ring(uint32_t entries, uint32_t entry_size, size_t bytes = 0);

}  // namespace rnic::test
