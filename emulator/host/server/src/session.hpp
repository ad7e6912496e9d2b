// One client connection and everything it created. Handles it may use are exactly the ones in
// its own sets: anything else is EINVAL, as if it did not exist.
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ring_memory.hpp"
#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/doorbell.hpp"
#include "rnic/host/server/pinned_pages.hpp"
#include "rnic/wire/gid.hpp"

namespace rnic::host::server {

// A client memfd mapped once; MRs hold it, so ReleaseSegment (or the session ending) unmaps it
// only after the last MR over it is gone. memory.sealed(): the file cannot shrink under the
// mapping; an unsealed one can, and only the engine's fault guard stands between a client's
// ftruncate and a SIGBUS in the daemon (Stats counts them per session: segments_unsealed).
struct Segment {
    SharedMemory memory;
};

struct HostMr {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint32_t pd = 0;
    uint64_t length = 0;
    uint64_t pinned_pages = 0;  // charged to the session's process (ib_umem_num_pages)
    std::vector<std::shared_ptr<Segment>> segments;
};

// A completion channel: the daemon's end of its notification socket (notify_socket.hpp).
struct Channel {
    explicit Channel(int f) : fd(f) {}
    ~Channel();
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    void notify() const noexcept;
    int fd;
};

// A QP or SRQ: what a doorbell slot names, and what waits for a turn to read its WQEs.
struct QueueRef {
    uint32_t handle = 0;  // QPN or SRQ handle; 0: nothing
    bool srq = false;
};

// A ModifyQp or CreateAh waiting for ARP or neighbour discovery: replied to from the poll loop
// once resolved.
struct Deferred {
    abi::MessageHeader header{};
    std::vector<uint8_t> body;
    wire::Gid dgid;
    uint64_t since_ns = 0;
};

struct Session {
    // Boost 1.74 has no local seq_packet protocol; Asio only waits for readability here and the
    // messages (with their descriptors) go through recvmsg/sendmsg on the fd.
    using Socket = boost::asio::posix::stream_descriptor;

    Session(uint32_t session_id, Socket s) : id(session_id), socket(std::move(s)) {}

    // A doorbell slot naming `ref`, or UINT32_MAX when all kDoorbellSlots are in use.
    uint32_t take_doorbell(QueueRef ref);
    void release_doorbell(uint32_t slot) noexcept;

    uint32_t id;
    Socket socket;
    uint32_t pid = 0;
    uint32_t uid = UINT32_MAX;      // (uid_t)-1, nobody's, until SO_PEERCRED says who it is
    bool peer_known = false;        // SO_PEERCRED answered: pid and uid are the peer's
    ProcessId process;              // pid and start time: whose RLIMIT_MEMLOCK the MRs count against
    LockLimit accepted_lock_limit;  // read at accept: used once the process can no longer be read
    bool hello_done = false;
    bool closed = false;
    bool reading = false;

    int async_fd = -1;  // the daemon's end of the async notification socket, a byte per event
    // The session's kick eventfd (the client writes it when it rings a doorbell of a sleeping
    // daemon; the daemon reads it with RWF_NOWAIT only, see notify_socket.hpp).
    std::optional<Socket> kick;
    bool kick_armed = false;
    SharedMemory async_memory;  // the async ring, then the doorbell bits
    abi::RingView async_ring;
    abi::DoorbellBits* doorbells = nullptr;
    std::vector<QueueRef> doorbell_targets;  // by slot
    std::vector<uint32_t> free_doorbells;    // slots given back, reused first
    uint32_t async_produced = 0;
    uint64_t async_dropped = 0;
    uint32_t wqe_budget = 0;  // WQEs its queues may still read this turn (host_queues.cpp)

    std::set<uint32_t> pds;
    std::map<uint32_t, HostMr> mrs;                         // by lkey
    std::set<uint32_t> mws;                                 // memory window handles
    std::map<uint32_t, std::shared_ptr<Segment>> segments;  // by the client's segment id
    std::map<uint32_t, std::shared_ptr<Channel>> channels;
    uint32_t next_channel = 1;
    std::set<uint32_t> cm_channels;  // the CM's event channels it made (CmOp::CreateChannel)
    std::set<uint32_t> cqs, srqs, qps;
    std::map<uint32_t, uint32_t> ahs;  // handle -> pd
    std::optional<Deferred> deferred;
};

}  // namespace rnic::host::server
