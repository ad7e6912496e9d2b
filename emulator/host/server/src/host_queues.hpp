// The daemon's view of a host CQ, QP and SRQ: their rings, the indices it owns, and the user
// wr_ids it keeps while the engine works with ring indices instead.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ring_memory.hpp"
#include "rnic/common/ring_buffer.hpp"
#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/abi/ring.hpp"
#include "rnic/transport/verbs_types.hpp"
#include "session.hpp"

namespace rnic::host::server {

struct WorkQueue {
    abi::RingView ring;
    uint32_t consumed = 0;  // next WQE to read; published as the ring's consumer
    uint32_t max_sge = 0;
    uint32_t max_inline = 0;
    std::vector<uint64_t> wr_ids;  // the user's wr_id by index & mask (SQ and RQ)
    bool broken = false;           // corrupt ring: never read again
};

struct HostCq {
    uint32_t handle = 0;
    Session* owner = nullptr;
    SharedMemory memory;
    abi::RingView ring;
    uint32_t produced = 0;
    uint32_t cqe = 0;
    uint32_t channel = 0;
    std::shared_ptr<Channel> channel_ref;
    // Completions the daemon itself made (rejected WQEs), at most `cqe` of them: more is an overrun.
    common::RingBuffer<abi::Cqe> local;
    bool backlogged = false;    // on the service's backlog: the engine or `local` holds more than the ring took
    uint64_t pinned_pages = 0;  // charged to the owner's locked memory (charge_queue_memory)
    bool overrun = false;       // IBV_EVENT_CQ_ERR raised (the engine's CQ overflowed, or `local` did)
};

// Where a queue's work waits between turns (HostService::Impl::pending / waiting_for_room).
enum class Waiting : uint8_t { No, Pending, ForRoom };

struct HostSrq {
    uint32_t handle = 0;
    uint32_t pd = 0;
    Session* owner = nullptr;
    SharedMemory memory;
    WorkQueue wq;
    uint32_t max_wr = 0;
    uint32_t srq_limit = 0;
    uint32_t doorbell = 0;      // slot in the owner's doorbell bits
    uint64_t pinned_pages = 0;  // charged to the owner's locked memory (charge_queue_memory)
    Waiting waiting = Waiting::No;
    bool room_listed = false;  // on HostService::Impl::waiting_for_room (once at most)
};

struct HostQp {
    uint32_t qpn = 0;
    Session* owner = nullptr;
    transport::QpType type = transport::QpType::Rc;
    transport::QpState state = transport::QpState::Reset;
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    uint32_t srq = 0;
    bool sq_sig_all = false;
    abi::QpCaps init_cap{};
    SharedMemory memory;
    WorkQueue sq;
    WorkQueue rq;
    uint32_t doorbell = 0;      // slot in the owner's doorbell bits
    uint64_t pinned_pages = 0;  // charged to the owner's locked memory (charge_queue_memory)
    Waiting waiting = Waiting::No;
    bool room_listed = false;  // on HostService::Impl::waiting_for_room (once at most)
};

}  // namespace rnic::host::server
