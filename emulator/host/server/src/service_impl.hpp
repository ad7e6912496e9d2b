// HostService's state, shared by the files that implement it by concern: control_server.cpp
// (socket, reading and answering messages), op_table.cpp (every op's row and the checked
// dispatch), handlers_*.cpp (the ops), session.cpp (events to a session, reclaiming one),
// host_queues.cpp (the data path each turn), stats_json.cpp (the Stats op), host_service.cpp
// (loop glue, sleep).
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "host_queues.hpp"
#include "odp_notifier.hpp"
#include "ring_memory.hpp"
#include "rnic/cm/cm_service.hpp"
#include "rnic/common/ring_buffer.hpp"
#include "rnic/host/server/host_service.hpp"
#include "session.hpp"

namespace rnic::host::server {

struct CmGlue;   // below
struct Request;  // control_request.hpp

struct ServiceCounters {
    uint64_t sessions_opened = 0;
    uint64_t sessions_closed = 0;
    uint64_t sessions_refused = 0;
    uint64_t user_limit_refusals = 0;  // EAGAIN: a uid at its cap (--user-limit)
    uint64_t memlock_refusals = 0;     // RegMr over the process's RLIMIT_MEMLOCK (ENOMEM, EPERM)
    uint64_t control_messages = 0;
    uint64_t control_errors = 0;    // malformed messages (the session was closed)
    uint64_t deferred_replies = 0;  // waited for ARP
    uint64_t wqes_posted = 0;
    uint64_t wqes_rejected = 0;     // completed with IBV_WC_LOC_QP_OP_ERR by the daemon
    uint64_t wqes_engine_full = 0;  // left in the ring for a later turn
    uint64_t cqes_delivered = 0;
    uint64_t cqes_dropped = 0;  // their QP was destroyed before delivery
    uint64_t cqes_overrun = 0;  // made by the daemon (rejected WQEs) for a CQ already holding `cqe` of them
    uint64_t cq_events = 0;     // completion-channel notifications
    uint64_t async_events = 0;
    uint64_t async_events_dropped = 0;  // the session's async ring was full
    uint64_t corrupt_rings = 0;
    uint64_t kicks = 0;
    uint64_t naps = 0;
};

struct HostService::Impl {
    Impl(boost::asio::io_context& io, transport::Engine& engine, ServerConfig config, Resolver resolver,
         CounterSource counters);
    ~Impl();

    boost::asio::io_context& io;
    transport::Engine& engine;
    ServerConfig config;
    Resolver resolver;
    CounterSource extra_counters;
    std::string path;
    uint32_t daemon_uid = 0;
    uint32_t daemon_pid = 0;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_guard;
    std::optional<boost::asio::posix::stream_descriptor> acceptor;  // the listening socket
    bool listening = false;

    SharedMemory status_memory;
    abi::StatusPage* status = nullptr;
    std::optional<boost::asio::posix::stream_descriptor> wake;  // the port's fd, not owned
    bool wake_armed = false;
    uint64_t wake_generation = 0;
    bool wake_fired = false;
    boost::asio::steady_timer nap_timer;
    uint64_t nap_generation = 0;
    bool nap_timer_armed = false;
    bool nap_done = false;
    bool woken = false;   // a control message or a kick: the loop has work

    // ---- on-demand regions (odp_service.cpp) ----
    // The ODP workers' news (a copy the loop stopped waiting for is done), and its eventfd as a
    // wake-up of the loop (a dup: the workers own the notifier, which may outlive this service).
    std::shared_ptr<OdpNotifier> odp_notifier = std::make_shared<OdpNotifier>();
    std::optional<boost::asio::posix::stream_descriptor> odp_wake;
    bool odp_wake_armed = false;
    std::vector<uint32_t> odp_timeouts;
    void start_odp();
    void arm_odp_wake();
    size_t poll_odp();
    bool kicked = false;  // some session's kick eventfd was written
    uint32_t kick_cpu = UINT32_MAX;  // the CPU the kick that ended the nap came from (the client's word)

    // What each uid holds on this device, for its caps (user_limits.cpp).
    struct UserUsage {
        std::array<uint32_t, kResourceCount> held{};
    };
    std::map<uint32_t, UserUsage> users;
    std::shared_ptr<PinnedPages> pinned;

    std::map<uint32_t, std::shared_ptr<Session>> sessions;
    uint32_t next_session = 1;
    size_t deferred_sessions = 0;  // sessions whose reply waits for ARP or ND
    std::unordered_map<uint32_t, std::unique_ptr<HostCq>> cqs;
    std::unordered_map<uint32_t, std::unique_ptr<HostQp>> qps;
    std::unordered_map<uint32_t, std::unique_ptr<HostSrq>> srqs;

    // Work queues with WQEs to read (their doorbell rang, or a turn's share left some), oldest
    // first; and those the engine had no room for, tried again once work leaves it.
    common::RingBuffer<QueueRef> pending;
    std::vector<QueueRef> waiting_for_room;
    uint64_t room_seq = 0;
    // CQs whose ring was full while the engine or `local` held more, round robin.
    common::RingBuffer<uint32_t> cq_backlog;
    std::vector<uint32_t> updated_cqs;  // swapped with the engine's list each turn

    uint64_t now_ns = 0;
    ServiceCounters counters;

    // ---- latency_trace.cpp ----
    bool latency_trace = false;
    common::LatencyHistogram doorbell_to_seen;  // a client's doorbell stamp -> the daemon took the bits
    uint64_t latency_bogus_stamps = 0;          // stamps in the future or older than 10 s: dropped
    HistogramSource histogram_source;
    void note_doorbell_stamp(Session& s);
    std::optional<KickStamp> take_kick_stamp(uint64_t since_ns);
    void latency_part(nlohmann::json& doc) const;

    alignas(16) std::array<uint8_t, abi::kMaxMessage + 1> rx_buffer{};
    std::vector<transport::WorkCompletion> wc_scratch = std::vector<transport::WorkCompletion>(64);
    transport::SendWr send_scratch;
    transport::RecvWr recv_scratch;

    // ---- control_server.cpp ----
    void listen();
    void accept_next();
    void read_next(const std::shared_ptr<Session>& s);
    void on_readable(const std::shared_ptr<Session>& s);
    bool reply(Session& s, const abi::MessageHeader& request, int result, std::span<const uint8_t> body = {},
               std::span<const int> fds = {});
    void reject(Session& s, const abi::MessageHeader& request, int result, const char* why);

    // ---- op_table.cpp ----
    // A message whose header checked out: refused unless its op has a row and the message
    // meets it, else handed to the row's handler. `fds` may still hold descriptors afterwards.
    void dispatch(Session& s, const abi::MessageHeader& h, std::span<const uint8_t> body, std::vector<int>& fds);
    // The reply waits for ARP or ND to resolve `dgid` (Pending; the session reads nothing more
    // meanwhile), or goes now (Resolved, Unreachable): the row's `resolved` handler makes it.
    void defer(Request& rq, const wire::Gid& dgid, Resolution r, const wire::MacAddr& mac);
    void finish_deferred(Session& s, Resolution r, const wire::MacAddr& mac);

    // ---- the ops: each the handler of its row in op_table.cpp ----
    // handlers_device.cpp
    void on_hello(Request& rq, const abi::HelloRequest& req);
    void on_query_port(Request& rq);
    void on_stats(Request& rq, const abi::StatsRequest& req);
    void on_set_log_level(Request& rq, const abi::SetLogLevelRequest& req);
    // handlers_memory.cpp
    void on_alloc_pd(Request& rq);
    void on_dealloc_pd(Request& rq, const abi::HandleRequest& req);
    void on_share_segment(Request& rq, const abi::ShareSegmentRequest& req);
    void on_release_segment(Request& rq, const abi::HandleRequest& req);
    void on_reg_mr(Request& rq, const abi::RegMrRequest& req);
    void on_reg_mr_odp(Request& rq, const abi::RegMrRequest& req);
    void on_dereg_mr(Request& rq, const abi::HandleRequest& req);
    // handlers_rereg_mr.cpp
    void on_rereg_mr(Request& rq, const abi::ReregMrRequest& req);
    // The pages a RegMr/ReregMr tail of `run_count` SegmentRuns names, for a buffer `page_offset`
    // bytes into its first page and `length` long, and the segments they lie in; EINVAL for any
    // run that is not within a segment of the session or pages that do not add up.
    int collect_pages(Session& s, std::span<const uint8_t> runs, uint32_t run_count, uint32_t page_offset,
                      uint64_t length, std::vector<uintptr_t>& pages, std::vector<std::shared_ptr<Segment>>& segments);
    // The session's ODP backend, opened at its first use (0, EPERM or ESRCH).
    int open_process_memory(Session& s);
    // handlers_mw.cpp
    void on_alloc_mw(Request& rq, const abi::AllocMwRequest& req);
    void on_dealloc_mw(Request& rq, const abi::HandleRequest& req);
    // handlers_queues.cpp
    void on_create_comp_channel(Request& rq);
    void on_destroy_comp_channel(Request& rq, const abi::HandleRequest& req);
    void on_create_cq(Request& rq, const abi::CreateCqRequest& req);
    void on_destroy_cq(Request& rq, const abi::HandleRequest& req);
    void on_resize_cq(Request& rq, const abi::ResizeCqRequest& req);
    // handlers_congestion.cpp
    void on_set_congestion_param(Request& rq, const abi::SetCongestionParamRequest& req);
    void on_create_srq(Request& rq, const abi::CreateSrqRequest& req);
    void on_modify_srq(Request& rq, const abi::ModifySrqRequest& req);
    void on_query_srq(Request& rq, const abi::HandleRequest& req);
    void on_destroy_srq(Request& rq, const abi::HandleRequest& req);
    int charge_queue_memory(Session& s, size_t bytes, uint64_t& pages);
    // RLIMIT_MEMLOCK for `pages` more of the session's process (RegMr, queues): 0, EPERM or ENOMEM.
    int charge_locked_pages(Session& s, uint64_t pages, const char* what);
    // handlers_qp.cpp
    void on_create_qp(Request& rq, const abi::CreateQpRequest& req);
    void on_modify_qp(Request& rq, const abi::ModifyQpRequest& req);
    void on_modify_qp_resolved(Request& rq, const abi::ModifyQpRequest& req, const wire::MacAddr& mac);
    void on_query_qp(Request& rq, const abi::QueryQpRequest& req);
    void on_destroy_qp(Request& rq, const abi::HandleRequest& req);
    // handlers_ah.cpp
    void on_create_ah(Request& rq, const abi::CreateAhRequest& req);
    void on_create_ah_resolved(Request& rq, const abi::CreateAhRequest& req, const wire::MacAddr& mac);
    void on_destroy_ah(Request& rq, const abi::HandleRequest& req);
    // handlers_cm.cpp
    void on_cm_create_channel(Request& rq);
    void on_cm_destroy_channel(Request& rq, const abi::HandleRequest& req);
    void on_cm_create_id(Request& rq, const abi::CmCreateIdRequest& req);
    void on_cm_destroy_id(Request& rq, const abi::HandleRequest& req);
    void on_cm_migrate_id(Request& rq, const abi::CmMigrateIdRequest& req);
    void on_cm_bind_addr(Request& rq, const abi::CmAddrRequest& req);
    void on_cm_resolve_addr(Request& rq, const abi::CmResolveAddrRequest& req);
    void on_cm_resolve_route(Request& rq, const abi::CmTimeoutRequest& req);
    void on_cm_query(Request& rq, const abi::HandleRequest& req);
    void on_cm_listen(Request& rq, const abi::CmListenRequest& req);
    void on_cm_connect(Request& rq, const abi::CmConnectRequest& req);
    void on_cm_accept(Request& rq, const abi::CmConnectRequest& req);
    void on_cm_reject(Request& rq, const abi::CmRejectRequest& req);
    void on_cm_disconnect(Request& rq, const abi::HandleRequest& req);
    void on_cm_init_qp_attr(Request& rq, const abi::CmInitQpAttrRequest& req);
    void on_cm_notify(Request& rq, const abi::CmNotifyRequest& req);
    void on_cm_set_option(Request& rq, const abi::CmSetOptionRequest& req);
    void on_cm_get_event(Request& rq, const abi::HandleRequest& req);
    void on_cm_join_multicast(Request& rq, const abi::CmJoinRequest& req);
    void on_cm_leave_multicast(Request& rq, const abi::CmLeaveRequest& req);
    void on_cm_establish(Request& rq, const abi::HandleRequest& req);

    // ---- session.cpp ----
    void close_session(Session& s, const char* why);
    void push_async(Session& s, uint32_t type, uint32_t object);

    // ---- host_queues.cpp ----
    size_t scan_work_queues();
    size_t deliver_completions();
    size_t deliver_events();
    size_t run_deferred();
    bool doorbells_pending() const;
    void qp_to_error(HostQp& qp);
    void after_modify(HostQp& qp);
    void stop_queue(HostQp& qp, WorkQueue& q, const char* which);
    void wake_queue(QueueRef ref, Waiting& waiting);
    // What a queue's share of a turn left: nothing, more WQEs, or WQEs the engine had no room for.
    enum class Served : uint8_t { Done, More, Full };
    Served serve_send_queue(HostQp& qp);
    Served serve_recv_queue(HostQp& qp);
    Served serve_srq(HostSrq& srq);
    void add_local_cqe(uint32_t cq_handle, const abi::Cqe& cqe);
    void raise_cq_error(HostCq& cq);
    void backlog_cq(HostCq& cq);
    size_t deliver_cq(HostCq& cq);

    // ---- user_limits.cpp ----
    const UserLimits& limits_of(uint32_t uid) const;
    uint32_t held_by(uint32_t uid, Resource r) const;
    // EAGAIN when the session's uid holds its cap of `r` already (as the rdma cgroup refuses),
    // else counts one more.
    int charge(const Session& s, Resource r);
    void uncharge(const Session& s, Resource r, size_t n = 1);
    // uid 0 and the daemon's own uid administer the device: they see every session in Stats and
    // may set the log level.
    bool administers(const Session& s) const { return s.uid == 0 || s.uid == daemon_uid; }
    // Closes the sessions of `uid` whose peer already hung up (their EOF not yet read), so a
    // program that closed a device and opens it again is not refused for the session it left.
    void reap_hung_up(uint32_t uid, const Session& except);

    // ---- stats_json.cpp ----
    // `viewer`: the uid asking, whose view excludes other users' sessions and QPs unless it
    // administers the device; nullopt: everything. `what` and `first_qpn`: abi::StatsRequest.
    std::string stats_json(std::optional<uint32_t> viewer, uint32_t what, uint32_t first_qpn) const;
    void device_part(nlohmann::json& doc, std::optional<uint32_t> viewer) const;
    void qp_page(nlohmann::json& doc, std::optional<uint32_t> viewer, uint32_t first_qpn) const;
    void cm_page(nlohmann::json& doc, std::optional<uint32_t> viewer, uint32_t first_id) const;
    bool sees(std::optional<uint32_t> viewer, uint32_t uid) const;

    // ---- host_service.cpp ----
    void arm_kick(const std::shared_ptr<Session>& s);
    void arm_wake();
    void set_wake_fd(int fd);
    bool begin_nap();
    void cancel_nap();
    NapEnd nap(uint64_t max_ns, bool wake_on_rx);
    void arm_nap(bool wake_on_rx);
    void arm_nap_timer(uint64_t max_ns);
    NapEnd end_nap();

    // ---- cm_glue.cpp: the device's connection manager ----
    // Its configuration from the engine's GID table and the port's prefixes; the CM itself.
    cm::CmConfig cm_config() const;
    void start_cm();
    // The session's ids and channels destroyed (DREQ, REJ as on a process's death).
    void close_cm(Session& s);
    std::unique_ptr<CmGlue> cm_glue;
    std::unique_ptr<cm::CmService> cm;
    std::unordered_map<uint32_t, int> cm_channel_fds;  // CM channel -> the daemon's end of its socket
};

// What the CM asks of the host service (cm_glue.cpp).
struct CmGlue final : cm::CmHooks {
    explicit CmGlue(HostService::Impl& i) : impl(i) {}
    void event_queued(uint32_t channel) override;
    int admit_id(uint32_t owner) override;
    void id_released(uint32_t owner) override;
    bool privileged(uint32_t owner) override;
    HostService::Impl& impl;
};

}  // namespace rnic::host::server
