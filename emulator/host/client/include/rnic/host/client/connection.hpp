// One application's connection to one rnicd device: the control path (request/reply over the
// device's SOCK_SEQPACKET socket, descriptors by SCM_RIGHTS) and the verbs built on it, plus the
// data path over the shared rings. Every method mirrors an ibv_* verb and its errno values; a
// vanished daemon makes the connection dead: verbs fail with EIO, IBV_EVENT_DEVICE_FATAL is
// delivered locally and poll_cq flushes every outstanding WQE.
//
// Threading: control verbs may be called from any thread (one request at a time on the socket).
// post_send/post_recv serialise per queue, poll_cq per CQ, as rdma-core providers do. Objects
// must not be destroyed while another thread uses them (ibv's rule too).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/doorbell.hpp"
#include "rnic/host/client/objects.hpp"
#include "rnic/host/client/result.hpp"

namespace rnic::host::client {

// $RNIC_RUN_DIR, else /run/rnic.
std::string default_run_dir();

// Device names (the *.sock files) in `run_dir`, sorted. ENOENT when the directory is missing.
Result<std::vector<std::string>> list_devices(const std::string& run_dir);

class Connection {
public:
    // Connects to run_dir/<device>.sock and says Hello. ENOENT/ECONNREFUSED when no daemon runs.
    static Result<std::unique_ptr<Connection>> open(const std::string& device, const std::string& run_dir = {});
    // Says Hello over an already connected SOCK_SEQPACKET socket (taken over), for tests.
    static Result<std::unique_ptr<Connection>> adopt(int socket_fd);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    const abi::HelloReply& hello() const noexcept { return hello_; }
    const std::string& device_name() const noexcept { return device_name_; }
    const abi::DeviceAttr& device_attr() const noexcept { return hello_.device; }
    const abi::StatusPage* status_page() const noexcept { return status_; }
    // The fd an application polls for async events (ibv_context::async_fd).
    int async_fd() const noexcept { return async_fd_; }
    bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
    // How long a control verb waits for the daemon's reply before the daemon counts as gone
    // (the verb fails with ETIMEDOUT, later ones with EIO): a stopped or wedged daemon must not
    // hang the application. Default 30 s, or $RNIC_CONTROL_TIMEOUT_MS; the slowest legitimate
    // reply (a path whose neighbour does not answer: 3 ARP tries 1 s apart) takes ~4 s.
    void set_reply_timeout_ms(int ms) noexcept { reply_timeout_ms_ = ms; }

    Result<abi::PortAttr> query_port(uint8_t port_num);
    // The Stats document (abi::StatsRequest): everything with the first page of the QP list, or
    // the parts `what` names and the page of the QP list from `first_qpn` on.
    Result<std::string> stats(uint32_t what = abi::kStatsAll, uint32_t first_qpn = 0);
    int set_log_level(const std::string& level);
    // SetCongestionParam: NAME=VALUE knobs (mlx5 names, rp_enable/N ...), all or nothing; EINVAL
    // also for more than abi::kMaxCongestionParams or a name that does not fit.
    int set_congestion_params(const std::vector<std::pair<std::string, uint64_t>>& params);

    Result<Pd*> alloc_pd();
    int dealloc_pd(Pd* pd);

    Result<Mr*> reg_mr(Pd* pd, void* addr, size_t length, uint32_t access);
    Result<Mr*> reg_mr_iova(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access);
    int dereg_mr(Mr* mr);
    // ibv_rereg_mr's command (rereg_mr.cpp): `flags` enum ibv_rereg_mr_flags, `pd`, `addr` and
    // `length`, `access` counting only under their flags; the new iova is `addr`. 0, or the
    // daemon's errno with the region unchanged. The keys stay the same.
    int rereg_mr(Mr* mr, uint32_t flags, Pd* pd, void* addr, size_t length, uint32_t access);
    // Memory windows: the daemon's handle and first rkey. The caller (the shim's ibv_mw) keeps
    // them; binds are send WQEs.
    Result<abi::AllocMwReply> alloc_mw(Pd* pd, uint32_t type);
    int dealloc_mw(uint32_t handle);
    // ibv_advise_mr on on-demand regions: advice 0 PREFETCH, 1 PREFETCH_WRITE, 2 PREFETCH_NO_FAULT;
    // flags 0 or IBV_ADVISE_MR_FLAG_FLUSH (always served synchronously here). EINVAL: a bad
    // advice, flag, key (not an ODP MR of `pd`) or range; EFAULT: an address nothing is mapped at.
    int advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const abi::Sge* sges, uint32_t count);

    Result<CompChannel*> create_comp_channel();
    int destroy_comp_channel(CompChannel* channel);

    Result<Cq*> create_cq(uint32_t cqe, CompChannel* channel, uint32_t comp_vector);
    int destroy_cq(Cq* cq);
    int resize_cq(Cq* cq, uint32_t cqe);  // 0 or an errno (EINVAL: below the completions it holds)
    // ibv_poll_cq: completions written (0..n), or a negative errno (a corrupt ring).
    int poll_cq(Cq* cq, int n, abi::Cqe* out) noexcept;
    int req_notify_cq(Cq* cq, bool solicited_only) noexcept;
    // Blocks unless the channel's fd is O_NONBLOCK (then EAGAIN), as ibv_get_cq_event.
    Result<Cq*> get_cq_event(CompChannel* channel);
    void ack_cq_events(Cq* cq, uint32_t n);

    Result<Srq*> create_srq(Pd* pd, uint32_t max_wr, uint32_t max_sge, uint32_t srq_limit);
    int modify_srq(Srq* srq, uint32_t attr_mask, uint32_t max_wr, uint32_t srq_limit);
    Result<abi::QuerySrqReply> query_srq(Srq* srq);
    int destroy_srq(Srq* srq);
    int post_srq_recv(Srq* srq, const RecvWr* wr, const RecvWr** bad_wr) noexcept;

    // `attr.cap` comes back as granted in the Qp.
    Result<Qp*> create_qp(Pd* pd, const QpInitAttr& attr);
    int modify_qp(Qp* qp, const abi::QpAttr& attr, uint32_t attr_mask);
    Result<abi::QueryQpReply> query_qp(Qp* qp, uint32_t attr_mask);
    int destroy_qp(Qp* qp);
    int post_send(Qp* qp, const SendWr* wr, const SendWr** bad_wr) noexcept;
    // The same for a batch that must be posted whole or not at all (ibv_wr_complete): on any
    // error nothing is published and the SQ is as before.
    int post_send_all_or_nothing(Qp* qp, const SendWr* wr, const SendWr** bad_wr) noexcept;
    int post_recv(Qp* qp, const RecvWr* wr, const RecvWr** bad_wr) noexcept;

    Result<Ah*> create_ah(Pd* pd, const abi::AddressVector& av);
    int destroy_ah(Ah* ah);

    // ibv_get_async_event: blocks unless async_fd() is O_NONBLOCK (then EAGAIN).
    int get_async_event(AsyncEvent* event);

    // One request and its reply; descriptors received are returned (the caller owns them).
    // The status of the reply, or EIO when the daemon is gone.
    int call(abi::Op op, std::span<const uint8_t> body, std::span<const int> fds_out, std::vector<uint8_t>* reply,
             std::vector<int>* fds_in);

private:
    Result<Mr*> reg_mr_odp(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access);
    int share_segments(const SharedRange& range, std::vector<uint32_t>& sent);
    void drop_segments(const SharedRange& range);
    Connection() = default;
    int say_hello();
    // A thread that sleeps until the daemon's end of the socket hangs up, then marks the
    // connection dead, which makes async_fd and every channel fd readable: an application
    // blocked in its own poll() on them learns of the death without calling a verb first.
    int start_watchdog();
    void stop_watchdog() noexcept;
    void mark_dead() noexcept;
    // Non-blocking check for a hung-up socket; rate-limited by the callers on the data path.
    bool probe_dead() noexcept;
    // Whether the data path must probe for itself: the watchdog is not watching in this process.
    bool needs_probe() const noexcept;
    // After publishing a producer index of the queue in doorbell `slot`: its bit for the
    // daemon's next turn, then a kick if the daemon sleeps and `kick` allows.
    void ring_doorbell(uint32_t slot, bool kick = true) noexcept;
    int post_sends(Qp* qp, const SendWr* wr, const SendWr** bad_wr, bool all_or_nothing) noexcept;
    uint32_t ah_handle(const Ah* ah) const noexcept;
    // Waits until the notification socket `fd` is readable (and drains it) or the daemon hangs
    // up; EAGAIN when `fd` is O_NONBLOCK and not readable.
    int wait_event_fd(int fd) noexcept;
    // Leaves `fd` readable exactly when events are left to take (`more` after the take): drains
    // it, or sends a byte from `wake_fd`, its peer.
    void settle_event_fd(int fd, int wake_fd, bool more) noexcept;
    bool channel_has_events(const CompChannel* channel) const noexcept;
    void resolve(AsyncEvent& event) noexcept;

    int socket_ = -1;
    int async_fd_ = -1;       // the session's async event socket (ibv_context::async_fd)
    int async_wake_fd_ = -1;  // its peer, rnicd's end
    int kick_fd_ = -1;        // the session's kick eventfd
    std::string device_name_;
    abi::HelloReply hello_{};
    const abi::StatusPage* status_ = nullptr;
    size_t status_bytes_ = 0;
    RingMapping async_memory_;
    abi::RingView async_ring_;
    abi::DoorbellBits* doorbells_ = nullptr;  // in async_memory_
    uint32_t async_consumed_ = 0;
    bool fatal_delivered_ = false;

    std::atomic<bool> dead_{false};
    int reply_timeout_ms_ = 30'000;
    std::thread watchdog_;
    int watchdog_stop_ = -1;  // eventfd: the destructor ends the watchdog
    pid_t owner_pid_ = 0;     // a forked child has our memory but not the watchdog thread
    // The watchdog is watching in this process (not after a fork, not after its poll failed):
    // then a dead daemon is noticed without the data path's rate-limited poll() probes.
    std::atomic<bool> watchdog_watching_{false};
    uint64_t watchdog_fork_generation_ = 0;
    std::mutex verbs_lock_;  // control verbs, one at a time (held across their calls)
    std::mutex call_lock_;   // one request/reply at a time on the socket
    uint32_t seq_ = 0;

    // Lock order: verbs_lock_, then a CQ's or queue's lock, then objects_lock_, which guards the
    // maps below, channel membership, completion-event counters and the async ring; it is never
    // held across a call to the daemon or a blocking wait.
    std::mutex objects_lock_;
    std::unordered_map<uint32_t, std::unique_ptr<Pd>> pds_;
    std::unordered_map<uint32_t, std::unique_ptr<Mr>> mrs_;  // by lkey
    std::unordered_map<uint32_t, std::unique_ptr<CompChannel>> channels_;
    std::unordered_map<uint32_t, std::unique_ptr<Cq>> cqs_;
    std::unordered_map<uint32_t, std::unique_ptr<Srq>> srqs_;
    std::unordered_map<uint32_t, std::unique_ptr<Qp>> qps_;  // by QPN
    std::unordered_map<uint32_t, std::unique_ptr<Ah>> ahs_;
    std::unordered_map<uint32_t, uint32_t> segment_users_;  // segment id -> MRs of this connection
    std::condition_variable acked_;                         // destroy_cq waits for ack_cq_events
};

}  // namespace rnic::host::client
