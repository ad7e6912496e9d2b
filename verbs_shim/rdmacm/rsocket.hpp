// rsockets: the socket-like API of librdmacm over RC QPs that rdma_cm connects
// (docs/rdma_cm.md, "rsockets"). An rsocket is a synchronous rdma_cm id, its QP, a send buffer,
// a receive ring the peer RDMA-writes into and a target buffer list where the peer announces
// the halves of its own ring (and its iomaps). Its number is the descriptor of the id's event
// channel, so it never collides with the process's other descriptors (rpoll mixes both).
//
// Locks of one socket: `cm_mu` for connection setup and CM events (never held while waiting),
// `mu` for the data path and the CQ (released while asleep: one thread at a time, the leader,
// sleeps on the completion channel, others on `progress`), `map_mu` for the iomaps (taken
// after `mu`). The table lock is taken before none of them.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "rsocket_wire.hpp"

namespace rnic::rdmacm::rsock {

// rdma-core's defaults, each replaceable by a file of /etc/rdma/rsocket as librdmacm reads them.
struct Config {
    uint32_t polling_time_us = 10;   // busy polling before sleeping
    int wake_up_interval_ms = 5000;  // rpoll's longest sleep between re-checks
    uint16_t inline_default = 64;
    uint16_t sqsize_default = 384;
    uint16_t rqsize_default = 384;
    uint32_t mem_default = 1 << 17;   // receive ring
    uint32_t wmem_default = 1 << 17;  // send buffer
    uint16_t iomap_size = 0;
};
const Config& config();

inline constexpr uint32_t kOlapStartSize = 2048;  // first chunk of a send; doubles up to:
inline constexpr uint32_t kMaxTransfer = 65536;
inline constexpr uint32_t kSndLowat = 2048;  // send buffer room below which a send waits
inline constexpr uint16_t kQpMinSize = 16;
inline constexpr uint16_t kQpMaxSize = 0xFFFE;
inline constexpr uint32_t kQpCtrlSize = 4;  // control messages in flight (a power of two)
inline constexpr int kConnRetries = 6;
inline constexpr uint32_t kMaxCtrlMsg = sizeof(WireSge);

// Work request ids: receives carry bit 63; sends carry the immediate value they send (or the
// op and length of a plain write), which their completion gives back.
inline constexpr uint64_t kRecvWrId = uint64_t{1} << 63;

// rdma-core's states, ordered passive, connecting, connected, disconnected (comparisons rely
// on the order; `opening` is a bit of every connecting state).
namespace st {
inline constexpr uint32_t init = 0;
inline constexpr uint32_t bound = 0x0001;
inline constexpr uint32_t listening = 0x0002;
inline constexpr uint32_t opening = 0x0004;
inline constexpr uint32_t resolving_addr = opening | 0x0010;
inline constexpr uint32_t resolving_route = opening | 0x0020;
inline constexpr uint32_t connecting = opening | 0x0040;
inline constexpr uint32_t accepting = opening | 0x0080;
inline constexpr uint32_t connected = 0x0100;
inline constexpr uint32_t writable = 0x0200;
inline constexpr uint32_t readable = 0x0400;
inline constexpr uint32_t connect_rdwr = connected | readable | writable;
inline constexpr uint32_t connect_error = 0x0800;
inline constexpr uint32_t disconnected = 0x1000;
inline constexpr uint32_t error = 0x2000;
}  // namespace st

// Memory the NIC reads or writes: whole pages, zeroed (rdma-core's forksafe_alloc).
struct PageBuffer {
    uint8_t* data = nullptr;
    size_t size = 0;
    bool allocate(size_t bytes);
    void release();
};

// One riomap'ed buffer that the peer may riowrite into (a slot of the peer's iomap table).
struct IomapSlot {
    ibv_mr* mr = nullptr;
    uint64_t offset = 0;
};

// Whole pages of their own for what the service thread writes (an rsocket's locks, state and
// reference counts): the application's ibv_reg_mr/riomap turns the pages of its buffer into
// shared memory by copying them (docs/host_interface.md), and a write another thread makes to
// such a page meanwhile is lost. Objects on pages of their own are never on an application's.
template <class T>
struct PageAllocator {
    using value_type = T;
    PageAllocator() = default;
    template <class U>
    PageAllocator(const PageAllocator<U>&) noexcept {}
    T* allocate(size_t n) {
        PageBuffer b;
        if (!b.allocate(n * sizeof(T))) throw std::bad_alloc();
        return reinterpret_cast<T*>(b.data);
    }
    void deallocate(T* p, size_t) noexcept { std::free(p); }
    template <class U>
    bool operator==(const PageAllocator<U>&) const noexcept {
        return true;
    }
};

struct Rsocket;
using RsocketPtr = std::shared_ptr<Rsocket>;

struct Rsocket {
    Rsocket(int type, const Rsocket* listener);
    ~Rsocket();
    Rsocket(const Rsocket&) = delete;
    Rsocket& operator=(const Rsocket&) = delete;

    uint32_t state_now() const { return state.load(std::memory_order_acquire); }
    bool in(uint32_t bits) const { return (state_now() & bits) != 0; }
    void set_state(uint32_t s) { state.store(s, std::memory_order_release); }
    void clear_state(uint32_t bits) { state.fetch_and(~bits, std::memory_order_acq_rel); }
    bool nonblocking(int flags) const {
        return (fd_flags.load(std::memory_order_relaxed) & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0;
    }

    const int type;
    int index = -1;
    rdma_cm_id* cm_id = nullptr;
    std::atomic<uint32_t> state{st::init};
    std::atomic<int> err{0};  // SO_ERROR
    std::atomic<int> fd_flags{0};
    std::atomic<bool> closing{false};  // rclose has begun: the service leaves it alone

    // Connection setup (cm_mu).
    std::mutex cm_mu;
    int retries = 0;
    std::vector<uint8_t> route;  // RDMA_ROUTE until the connect uses it
    bool in_service = false;     // the service thread watches its CM events

    // Options and sizes (cm_mu; fixed once the endpoint exists).
    uint64_t so_opts = 0;
    uint64_t tcp_opts = 0;
    uint64_t ipv6_opts = 0;
    std::atomic<uint32_t> keepalive_time{0};  // seconds (TCP_KEEPIDLE)
    std::atomic<bool> keepalive{false};
    std::atomic<int64_t> keepalive_due_ms{0};  // steady clock; the service sends then
    uint32_t sbuf_size;
    uint32_t rbuf_size;
    uint16_t sq_size;
    uint16_t rq_size;
    uint16_t sq_inline;
    uint16_t target_iomap_size = 0;

    // A listener's queue of accepted sockets (their numbers) for raccept.
    int accept_queue[2] = {-1, -1};

    // Data path (mu).
    std::mutex mu;
    std::condition_variable progress;
    bool leader = false;  // a thread sleeps on the completion channel
    int followers = 0;    // threads sleeping on `progress`
    int wake_fd = -1;     // wakes the leader when another thread made progress for it
    bool cq_armed = false;
    uint32_t unack_cqe = 0;
    bool swap_sgl = false;  // the peer's byte order differs

    uint32_t ctrl_seqno = 0;
    uint32_t ctrl_max_seqno = kQpCtrlSize;
    uint16_t sseq_no = 0;    // messages sent that use a receive of the peer
    uint16_t sseq_comp = 0;  // sending stops when sseq_no reaches it (the peer's credits)
    uint16_t rseq_no = 0;    // messages received and consumed
    uint16_t rseq_comp = 0;  // credits are given when rseq_no reaches it
    int sqe_avail = 0;

    PageBuffer sbuf;  // sbuf_size bytes, then the control messages' SGEs when not inline
    ibv_mr* smr = nullptr;
    uint32_t sbuf_bytes_avail = 0;
    uint32_t sbuf_head = 0;  // where the next copy into sbuf goes

    WireSge remote_sgl{};  // the peer's target buffer list
    uint32_t remote_sge = 0;
    WireSge remote_iomap{};  // the peer's iomap table (length: entries)

    PageBuffer target_list;  // our target buffer list, written by the peer
    ibv_mr* target_mr = nullptr;
    uint32_t target_sge = 0;
    volatile WireSge* target_sgl() { return reinterpret_cast<volatile WireSge*>(target_list.data); }
    volatile WireIomap* target_iomap() {
        return reinterpret_cast<volatile WireIomap*>(target_list.data + sizeof(WireSge) * kTargetSgeCount);
    }

    PageBuffer rbuf;
    ibv_mr* rmr = nullptr;
    uint32_t rbuf_bytes_avail = 0;
    uint32_t rbuf_free_offset = 0;
    uint32_t rbuf_offset = 0;
    std::vector<uint32_t> rmsg;  // lengths of the data messages not yet read (a ring)
    size_t rmsg_head = 0;
    size_t rmsg_tail = 0;

    // iomaps (map_mu).
    std::mutex map_mu;
    std::vector<IomapSlot> iomap_slots;  // as many as the peer's table holds
    std::deque<size_t> iomap_queue;      // slots to announce before the next send
    std::vector<ibv_mr*> local_maps;     // read-only mappings (no slot)
    std::atomic<bool> iomap_pending{false};

    bool verbs_released = false;  // rclose tore the endpoint down (else the buffers are leaked)
};

inline RsocketPtr make_rsocket(int type, const Rsocket* listener) {
    return std::allocate_shared<Rsocket>(PageAllocator<Rsocket>{}, type, listener);
}

// The table of rsockets by number.
RsocketPtr find(int index);
int insert(const RsocketPtr& rs, int index);
void erase(int index);

// -1 with errno (librdmacm's ERR).
int fail(int error);

// librdmacm's ucma_complete over the public API for a synchronous id whose channel never
// blocks: acknowledges the id's previous event and takes the next. 0, or -1 with errno:
// EAGAIN (nothing yet), ECONNREFUSED (REJECTED), the event's status.
int cm_complete(rdma_cm_id* id);

// Connection setup (rsocket_connect.cpp). Under cm_mu: the next step of a connect or an
// accept; 0 once connected, -1 with EINPROGRESS while the CM has yet to answer, else the error
// (the socket is then in connect_error with SO_ERROR set).
int connect_step(const RsocketPtr& rs);
// What rsend/rrecv do first on a socket still connecting: blocking callers wait for the
// connection, others get EAGAIN. 0 when connected.
int finish_opening(const RsocketPtr& rs, bool nonblock);
// The endpoint: CQ, QP, buffers, receives posted (the id has its route).
int create_endpoint(Rsocket& rs);
void save_conn_data(Rsocket& rs, const ConnData& c);
ConnData format_conn_data(const Rsocket& rs);
// Tears down the endpoint and the id (rclose's last part, or a failed accept's).
void release(Rsocket& rs);

// Data path (rsocket_transfer.cpp), all under mu unless they say otherwise.
bool can_send(const Rsocket& rs);
bool have_rdata(const Rsocket& rs);
bool conn_have_rdata(const Rsocket& rs);
bool conn_can_send(const Rsocket& rs);
bool ctrl_avail(const Rsocket& rs);
bool all_sends_done(const Rsocket& rs);
// Processes what the CQ holds and gives credits; 0, or -1 with errno when receives could not
// be posted again.
int poll_cq(Rsocket& rs);
void update_credits(Rsocket& rs);
// Waits (under `lock`, released while asleep) until `test` holds: 0, or -1 with errno
// (EWOULDBLOCK when `nonblock`). Busy-polls for config().polling_time_us first.
int wait_for(Rsocket& rs, std::unique_lock<std::mutex>& lock, bool nonblock, const std::function<bool()>& test);
// Takes the completion channel's event if one is there (never blocks).
void take_cq_event(Rsocket& rs);
// After progress made outside the leader: wakes the leader and the followers.
void wake_waiters(Rsocket& rs);
// Posts a control message (WRITE WITH IMMEDIATE, no data).
int post_ctrl(Rsocket& rs, uint32_t imm);
int post_keepalive(Rsocket& rs);
int post_recv(Rsocket& rs);
// Announces the iomaps riomap queued (under mu, `lock` being it; takes map_mu briefly).
int send_iomaps(Rsocket& rs, int flags, std::unique_lock<std::mutex>& lock);
// Bytes to send, gathered from the application's iovecs.
struct Source {
    const iovec* iov = nullptr;
    size_t count = 0;
    size_t index = 0;
    size_t offset = 0;
    // The next n bytes when they lie in one iovec, else nullptr.
    const uint8_t* contiguous(size_t n);
    void copy(uint8_t* dst, size_t n);
};
// One RDMA WRITE of `length` bytes from `src` (inline when small, else through the send
// buffer) to (addr, rkey), WITH IMMEDIATE `msg` when `with_imm`; `msg` is also its work request
// id. The caller has counted it (sqe_avail, sbuf_bytes_avail, sequence numbers).
int write_chunk(Rsocket& rs, Source& src, uint32_t length, bool with_imm, uint32_t msg, uint64_t addr, uint32_t rkey);

// The background thread (rsocket_service.cpp): listeners' connection requests, connected
// sockets' CM events (DISCONNECTED and errors), keepalives.
namespace service {
void watch(const RsocketPtr& rs);
void forget(Rsocket& rs);
void keepalive_changed();
}  // namespace service

// Accepts one connection request on a listener (the service calls it while requests wait):
// 1 when one was taken (accepted, or rejected as no rsocket), 0 when none waits, -1 with errno
// when the listener's id failed.
int accept_one(const RsocketPtr& listener);
// A connected socket's CM event (service thread, under cm_mu).
void handle_cm_event(Rsocket& rs);
// The socket lost its connection: no more sending or receiving; the QP is flushed so that
// sleepers wake.
void mark_down(Rsocket& rs, uint32_t new_state, int error);

}  // namespace rnic::rdmacm::rsock
