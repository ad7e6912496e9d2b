// The transport engine: the RNIC without its port. I/O-free and single-threaded: verbs calls,
// received frames and the current time go in; frames to send, completions, async events and
// the next timer deadline come out. The daemon drives it from its DPDK poll loop; tests drive
// it in simulated time.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rnic/common/frame_sink.hpp"
#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/memory/mr_rereg.hpp"
#include "rnic/memory/odp_backend.hpp"
#include "rnic/transport/counters.hpp"
#include "rnic/transport/device_attr.hpp"
#include "rnic/transport/work_request.hpp"
#include "rnic/wire/expected.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"
#include "rnic/wire/parse_error.hpp"

namespace rnic::mem {
class MemoryTable;
}

namespace rnic::transport {

class EngineCore;
using common::FrameSink;

// The "trust DSCP" default of RoCE NICs and switches: a DSCP's priority is its class selector.
constexpr std::array<uint8_t, 64> class_selector_priorities() noexcept {
    std::array<uint8_t, 64> map{};
    for (size_t d = 0; d < map.size(); ++d) map[d] = static_cast<uint8_t>(d >> 3);
    return map;
}

struct EngineConfig {
    wire::MacAddr mac{};
    // GID table, all RoCE v2; index 0 is the port's IPv4-mapped GID, IPv6 addresses follow in
    // rnicd. An address vector's sgid_index picks the source and with it IPv4 or IPv6 framing.
    std::vector<wire::Gid> gids;
    DeviceLimits limits;
    CacheSetup caches;
    EngineTuning tuning;
    uint32_t first_qpn = 0x11;  // QPN 0/1 are the special QPs; rxe starts user QPs at 0x11
    // Congestion control (docs/congestion.md): DCQCN's knobs, and the port rate that is its
    // ceiling (rp_max_rate 0) and the pacer's reference.
    cc::DcqcnParams congestion;
    uint32_t port_rate_mbps = 10'000;
    // The 802.1p priority of each DSCP (rnicd --dscp-prio): whether DCQCN is on for a frame's
    // traffic, and which PFC pause holds it.
    std::array<uint8_t, 64> dscp_priority = class_selector_priorities();
    uint8_t priority_of_dscp(uint8_t dscp) const noexcept { return dscp_priority[dscp & 63] & 7; }
};

// A QP's congestion-control state, for rnicctl.
struct QpCongestionInfo {
    bool limited = false;        // a CNP cut its rate and it has not recovered yet
    uint64_t rate_kbps = 0;      // current rate
    uint64_t target_kbps = 0;
    uint32_t alpha = 0;          // 1/1024
    uint64_t cnps = 0;           // CNPs received for this QP
    uint64_t cuts = 0;
    uint64_t cnps_sent = 0;      // CNPs this QP sent for CE-marked frames it received
};

struct MrInfo {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

// ibv_alloc_mw: the window's handle (its MPT index, the same for its whole life) and first rkey.
struct MwInfo {
    uint32_t handle = 0;
    uint32_t rkey = 0;
};

struct QpInfo {
    uint32_t qpn = 0;
    QpCap cap;  // what was actually granted
};

// A QP's live sequence numbers. query_qp reports next_psn as sq_psn and expected_psn as rq_psn
// (what rxe and mlx5 read back from their QP context, so `rdma resource show qp` moves with the
// traffic); unacked_psn is only for introspection.
struct QpSequence {
    uint32_t next_psn = 0;      // the PSN the requester gives its next new packet
    uint32_t unacked_psn = 0;   // the oldest PSN not yet acknowledged (RC); next_psn otherwise
    uint32_t expected_psn = 0;  // the PSN the responder expects next
};

template <class T>
using Result = wire::Expected<T, int>;  // errno on failure, as rdma-core returns

// What receive() did with a frame. Accepted covers everything the protocol itself handles
// (duplicates, out-of-sequence packets and RNR NAKs included); the rest are drops, each with its
// counter, and two protocol errors the responder answered with a NAK (IBA 9.9.3 classes B/C).
enum class RxVerdict : uint8_t {
    Accepted,
    NotRocev2,  // not UDP 4791 at all
    BadIcrc,
    Malformed,  // fails a parse rule other than the ICRC (parse_error says which)
    NotForUs,   // another MAC or a GID not in our table
    UnknownQp,
    BadPkey,
    WrongTransport,     // an RC opcode for a UD QP and the like
    BadSource,          // a connected QP's packet from another GID than its peer's
    BadState,           // the QP cannot receive (RESET, INIT, ERR)
    RemoteAccessError,  // NAKed: rkey, bounds or access rights (C9-50 ...)
    InvalidRequest,     // NAKed: an operation the QP does not allow, a bad length
};
std::string_view to_string(RxVerdict v) noexcept;

struct RxResult {
    RxVerdict verdict = RxVerdict::Accepted;
    wire::ParseErrc parse_error{};  // for BadIcrc and Malformed
    uint32_t qpn = 0;               // destination QP, once the BTH was read
    uint32_t psn = 0;
    uint8_t opcode = 0;
};

// Every entry point is noexcept: a control verb that runs out of memory returns ENOMEM, and on the
// data path nothing throws (lookups index tables, queues are sized when their object is created);
// should anything still throw, it is caught at the boundary and counted (`internal_errors`), so a
// bug costs a frame or a work request, never the daemon that every application shares.
class Engine {
public:
    explicit Engine(EngineConfig config);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // ---- control path (slow path; errno values as rdma-core returns them) ----
    DeviceAttributes query_device() const noexcept;
    PortAttributes query_port() const noexcept;
    const std::vector<wire::Gid>& gids() const noexcept;
    Result<uint32_t> alloc_pd() noexcept;
    // EBUSY while QPs, SRQs, AHs or MRs of the PD exist, as uverbs refuses.
    int dealloc_pd(uint32_t pd) noexcept;
    Result<MrInfo> reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access) noexcept;
    // The same over 4 KiB pages that need not be contiguous in this process (the daemon maps a
    // client's buffer as pieces of several shared segments); the region starts
    // `first_page_offset` bytes into pages[0].
    Result<MrInfo> reg_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                uint64_t length, uint64_t iova, uint32_t access) noexcept;
    // An on-demand (ODP) region: every access goes through `backend` (see mem::OdpBackend);
    // `implicit`: the whole address space. `access` must hold IBV_ACCESS_ON_DEMAND.
    Result<MrInfo> reg_mr_odp(uint32_t pd, uint64_t address, uint64_t length, uint64_t iova, uint32_t access,
                              mem::OdpBackend* backend, bool implicit) noexcept;
    // Work that still names the MR's keys fails with a protection error when it reaches them.
    // EINVAL while memory windows are bound to it (rxe).
    int dereg_mr(uint32_t lkey) noexcept;
    // ibv_rereg_mr: the region keeps its keys; its PD, rights and/or translation change in one
    // step between two accesses (mem::MemoryTable::reregister_mr). EINVAL also for a new PD that
    // does not exist.
    int rereg_mr(uint32_t lkey, const mem::MrRereg& change) noexcept;
    // Memory windows (IBV_MW_TYPE_1 = 1, IBV_MW_TYPE_2 = 2). Binding and invalidation are work
    // requests (BIND_MW, LOCAL_INV, SEND_WITH_INV); deallocation unbinds whatever is bound.
    Result<MwInfo> alloc_mw(uint32_t pd, uint32_t mw_type) noexcept;
    int dealloc_mw(uint32_t handle) noexcept;
    Result<uint32_t> create_cq(uint32_t cqe) noexcept;
    int destroy_cq(uint32_t cq) noexcept;  // EBUSY while a QP completes on it
    // ibv_resize_cq's engine half: the capacity becomes `cqe`; EINVAL past max_cqe or below the
    // completions held here plus `held_elsewhere` (the host's ring), as rxe refuses a shrink.
    int resize_cq(uint32_t cq, uint32_t cqe, uint64_t held_elsewhere) noexcept;
    Result<uint32_t> create_srq(uint32_t pd, const SrqAttributes& attr) noexcept;
    int modify_srq(uint32_t srq, uint32_t srq_limit) noexcept;
    int destroy_srq(uint32_t srq) noexcept;  // EBUSY while a QP is attached
    Result<uint32_t> create_ah(uint32_t pd, const AddressVector& av) noexcept;
    // Sends already posted through the AH keep its address vector (copied at post time).
    int destroy_ah(uint32_t ah) noexcept;
    Result<QpInfo> create_qp(const QpInitAttr& attr) noexcept;
    int modify_qp(uint32_t qpn, const QpAttributes& attr, uint32_t attr_mask) noexcept;
    int query_qp(uint32_t qpn, QpAttributes& attr) const noexcept;
    int destroy_qp(uint32_t qpn) noexcept;

    // ---- data path ----
    int post_send(uint32_t qpn, const SendWr& wr) noexcept;
    int post_recv(uint32_t qpn, const RecvWr& wr) noexcept;
    int post_srq_recv(uint32_t srq, const RecvWr& wr) noexcept;
    int poll_cq(uint32_t cq, std::span<WorkCompletion> out) noexcept;  // count, or -errno
    bool poll_async_event(AsyncEvent& event) noexcept;
    // The CQs that received completions since the last call, each once, in the order they first
    // did; `out` is replaced (swapped with the engine's list, so neither side allocates).
    void take_updated_cqs(std::vector<uint32_t>& out) noexcept;
    // On-demand regions (docs/host_interface.md): a backend whose Pending access completed has
    // news: every QP parked on a Pending access tries again (the caller's wake-up, e.g. rnicd's
    // ODP eventfd). Cheap when nothing is parked.
    void odp_resume() noexcept;
    // QPs put in error because an on-demand access stayed Pending past the time bound since the
    // last call (`out` is replaced), for the daemon's log line.
    void take_odp_timeouts(std::vector<uint32_t>& out) noexcept;

    // ---- the wire ----
    // What became of the frame: Accepted, or why it was dropped (every drop is also counted).
    RxResult receive(std::span<const uint8_t> frame, uint64_t now_ns) noexcept;
    // Frames from QPs with work, round robin; a QP whose turn ends because the sink is full keeps
    // its place at the head of the line.
    size_t transmit(FrameSink& sink, uint64_t now_ns, size_t max_frames) noexcept;
    std::optional<uint64_t> next_deadline() const noexcept;
    void advance(uint64_t now_ns) noexcept;  // fire timers due by now

    // ---- congestion control ----
    // Sets one knob by its mlx5 name at run time (from the next event of each QP); the error
    // names the knob and its range.
    std::optional<std::string> set_congestion_param(std::string_view name, uint64_t value) noexcept;
    // Several knobs, all or nothing (cc::set_params); on success every QP's reaction point
    // takes the new limits at once (rp_min_rate, rp_max_rate) and the rest from its next event.
    std::optional<std::string> set_congestion_params(std::span<const cc::ParamAssignment> assignments) noexcept;
    const cc::DcqcnParams& congestion_params() const noexcept;

    // ---- PFC and PAUSE received (docs/congestion.md) ----
    // The port received a pause for `priority` (0..7): no frame of that priority (requests,
    // ACKs, responses, CNPs) leaves before `until_ns`; a time not after the engine's clock
    // resumes it at once. The port turns quanta into time; the engine only holds and releases.
    void pause_priority(uint8_t priority, uint64_t until_ns) noexcept;
    uint64_t priority_paused_until(uint8_t priority) const noexcept;
    std::optional<QpCongestionInfo> qp_congestion(uint32_t qpn) const noexcept;

    // ---- introspection ----
    const DeviceCounters& device_counters() const noexcept;
    const QpCounters* qp_counters(uint32_t qpn) const noexcept;
    std::optional<QpSequence> qp_sequence(uint32_t qpn) const noexcept;
    QpCounters total_qp_counters() const;
    std::vector<std::pair<std::string_view, uint64_t>> cache_counters() const;
    const EngineConfig& config() const noexcept;
    bool has_pending_work() const noexcept;
    // Bumped whenever a work request leaves the engine, which is when its queue has room again:
    // every completion pushed to a CQ, and every unsignaled send WQE retired without one.
    uint64_t room_seq() const noexcept;
    bool has_async_events() const noexcept;
    size_t qp_count() const noexcept;
    size_t cq_count() const noexcept;
    size_t pd_count() const noexcept;
    size_t srq_count() const noexcept;
    size_t ah_count() const noexcept;
    size_t mr_count() const noexcept;
    size_t armed_timers() const noexcept;
    // The daemon memory an object's queues take at most: a QP's or SRQ's WQE storage (sized at
    // creation), a CQ's completions once full. 0 for no such object. The host charges it to the
    // owner, as mlx5's queue buffers count against the locked-memory limit.
    size_t qp_storage_bytes(uint32_t qpn) const noexcept;
    size_t srq_storage_bytes(uint32_t srq) const noexcept;
    size_t cq_storage_bytes(uint32_t cq) const noexcept;
    // The protection unit, for its access-error counters (Stats).
    const mem::MemoryTable& memory() const noexcept;

private:
    std::unique_ptr<EngineCore> core_;
};

}  // namespace rnic::transport
