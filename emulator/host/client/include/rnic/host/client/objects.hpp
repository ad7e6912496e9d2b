// The verbs objects of one connection, shaped after rdma-core's so the verbs shim wraps each one
// in its ibv_* struct. They are owned by their Connection and handed out as plain pointers, as
// ibv_* objects are; the data-path state (ring views, private indices) lives here so posting and
// polling need no lookup and no syscall.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/abi/ring.hpp"
#include "rnic/host/client/page_sharer.hpp"

namespace rnic::host::client {

class Connection;
struct Qp;

struct Pd {
    Connection* connection;
    uint32_t handle;
};

struct Mr {
    Connection* connection;
    Pd* pd;
    void* addr;
    size_t length;
    uint64_t iova;
    uint32_t access;
    uint32_t lkey;
    uint32_t rkey;
    SharedRange shared;  // the segments this MR holds
};

struct Ah {
    Connection* connection;
    Pd* pd;
    uint32_t handle;
};

// A mapped ring memfd; unmapped by its owner's destruction.
struct RingMapping {
    void* base = nullptr;
    size_t bytes = 0;
    ~RingMapping();
    RingMapping() = default;
    RingMapping(const RingMapping&) = delete;
    RingMapping& operator=(const RingMapping&) = delete;
};

struct Cq;

struct CompChannel {
    Connection* connection;
    uint32_t handle;
    int fd;                // the socket rnicd notifies on; the application polls it, may set O_NONBLOCK
    int wake_fd;           // rnicd's end of it: a byte sent here makes `fd` readable again
    std::vector<Cq*> cqs;  // guarded by the connection's object lock
};

struct Cq {
    Connection* connection;
    CompChannel* channel;
    uint32_t handle;
    void* user = nullptr;  // the wrapper that owns this object (the verbs shim's ibv_cq), for events
    uint32_t cqe;          // granted
    RingMapping memory;
    abi::RingView ring;

    std::mutex lock;  // poll_cq; the QPs below
    uint32_t consumed = 0;
    std::unordered_map<uint32_t, Qp*> qps;  // QPs completing here, by QPN: slots to retire, flushes
    uint32_t empty_polls = 0;
    uint64_t last_probe_ns = 0;

    // Completion events (ibv_get_cq_event / ibv_ack_cq_events), guarded by the connection's
    // event lock.
    uint32_t events_seen = 0;  // of the ring's `events` counter
    uint32_t events_delivered = 0;
    uint32_t events_acked = 0;
    bool death_event_pending = false;  // one wake-up so a sleeping application polls the flushes
};

// One work queue the client produces into (SQ or RQ). Slots are retired by completions
// (docs/host_interface.md, "Slot reuse and ENOMEM").
struct WorkQueue {
    abi::RingView ring;
    uint32_t max_wr = 0;  // the granted capacity; the ring may be larger (a power of two)
    uint32_t max_sge = 0;
    uint32_t max_inline = 0;
    std::mutex lock;  // posting; reset; flushing
    // Our producer index: written under `lock`, read by the CQ poller to bound retirement.
    std::atomic<uint32_t> produced{0};
    std::atomic<uint32_t> retired{0};  // advanced by the CQ poller (and by flushing)
};

struct Srq {
    Connection* connection;
    Pd* pd;
    uint32_t handle;
    void* user = nullptr;  // the verbs shim's ibv_srq, for async events
    uint32_t srq_limit;
    RingMapping memory;
    WorkQueue wq;           // max_wr and max_sge as granted
    uint32_t doorbell = 0;  // slot in the session's doorbell bits
};

struct QpInitAttr {
    uint32_t qp_type;  // IBV_QPT_*
    Cq* send_cq;
    Cq* recv_cq;
    Srq* srq;
    abi::QpCaps cap;
    bool sq_sig_all;
};

struct Qp {
    Connection* connection;
    Pd* pd;
    uint32_t qpn;
    void* user = nullptr;  // the verbs shim's ibv_qp, for async events
    uint32_t qp_type;
    Cq* send_cq;
    Cq* recv_cq;
    Srq* srq;
    bool sq_sig_all;
    abi::QpCaps cap;  // granted
    std::atomic<uint32_t> state{0};
    RingMapping memory;
    WorkQueue sq;
    WorkQueue rq;           // unused with an SRQ
    uint32_t doorbell = 0;  // slot in the session's doorbell bits (both queues)
};

// A work request as ibv_send_wr carries it, flattened (the shim converts each ibv_send_wr).
struct SendWr {
    uint64_t wr_id;
    const SendWr* next;
    const abi::Sge* sg_list;
    uint32_t num_sge;
    uint8_t opcode;  // IBV_WR_*
    uint32_t send_flags;
    uint32_t imm_data;  // network order; the rkey to invalidate for SEND_WITH_INV / LOCAL_INV
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t compare_add;
    uint64_t swap;
    Ah* ah;  // UD
    uint32_t remote_qpn;
    uint32_t remote_qkey;
    // IBV_WR_BIND_MW: rkey is the new rkey, remote_addr the window's start.
    uint32_t bind_mw_rkey = 0;  // the window's current rkey
    uint32_t bind_mr_lkey = 0;
    uint64_t bind_length = 0;
    uint32_t bind_access = 0;
};

struct RecvWr {
    uint64_t wr_id;
    const RecvWr* next;
    const abi::Sge* sg_list;
    uint32_t num_sge;
};

struct AsyncEvent {
    uint32_t event_type;  // IBV_EVENT_*
    uint32_t object;      // as in the ring: QPN, CQ handle, SRQ handle or port number
    Qp* qp = nullptr;     // resolved when the object is one of this connection's
    Cq* cq = nullptr;
    Srq* srq = nullptr;
};

}  // namespace rnic::host::client
