// The transport engine: the RNIC without its port. I/O-free and single-threaded: verbs calls,
// received frames and the current time go in; frames to send, completions, async events and
// the next timer deadline come out. The daemon drives it from its DPDK poll loop; tests drive
// it in simulated time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rnic/transport/completion_queue.hpp"
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

struct QueuePair;
struct ParsedFrameRef;

struct EngineConfig {
    wire::MacAddr mac{};
    // GID table, all RoCE v2; index 0 is the port's IPv4-mapped GID, IPv6 addresses follow in
    // rnicd. An address vector's sgid_index picks the source and with it IPv4 or IPv6 framing.
    std::vector<wire::Gid> gids;
    DeviceLimits limits;
    CacheSetup caches;
    EngineTuning tuning;
    uint32_t first_qpn = 0x11;  // QPN 0/1 are the special QPs; rxe starts user QPs at 0x11
};

struct MrInfo {
    uint32_t lkey = 0;
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

// Where the engine writes outgoing frames: the daemon hands out mbuf space, tests a vector.
class FrameSink {
public:
    virtual ~FrameSink() = default;
    virtual std::span<uint8_t> allocate(size_t length) = 0;  // empty span: no room, stop
    virtual void commit(size_t length) = 0;
};

template <class T>
using Result = wire::Expected<T, int>;  // errno on failure, as rdma-core returns

// What receive() did with a frame. Accepted covers everything the protocol itself handles
// (duplicates, out-of-sequence packets and RNR NAKs included); the rest are drops, each with its
// counter, and two protocol errors the responder answered with a NAK (IBA 9.9.3 classes B/C).
enum class RxVerdict : uint8_t {
    Accepted,
    NotRocev2,          // not UDP 4791 at all
    BadIcrc,
    Malformed,          // fails a parse rule other than the ICRC (parse_error says which)
    NotForUs,           // another MAC or a GID not in our table
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

class Engine {
public:
    explicit Engine(EngineConfig config);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // ---- control path (slow path; errno values as rdma-core returns them) ----
    DeviceAttributes query_device() const;
    PortAttributes query_port() const;
    const std::vector<wire::Gid>& gids() const noexcept { return config_.gids; }
    Result<uint32_t> alloc_pd();
    int dealloc_pd(uint32_t pd);
    Result<MrInfo> reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access);
    // The same over 4 KiB pages that need not be contiguous in this process (the daemon maps a
    // client's buffer as pieces of several shared segments); the region starts
    // `first_page_offset` bytes into pages[0].
    Result<MrInfo> reg_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                uint64_t length, uint64_t iova, uint32_t access);
    int dereg_mr(uint32_t lkey);
    Result<uint32_t> create_cq(uint32_t cqe);
    int destroy_cq(uint32_t cq);
    Result<uint32_t> create_srq(uint32_t pd, const SrqAttributes& attr);
    int modify_srq(uint32_t srq, uint32_t srq_limit);
    int destroy_srq(uint32_t srq);
    Result<uint32_t> create_ah(uint32_t pd, const AddressVector& av);
    int destroy_ah(uint32_t ah);
    Result<QpInfo> create_qp(const QpInitAttr& attr);
    int modify_qp(uint32_t qpn, const QpAttributes& attr, uint32_t attr_mask);
    int query_qp(uint32_t qpn, QpAttributes& attr) const;
    int destroy_qp(uint32_t qpn);

    // ---- data path ----
    int post_send(uint32_t qpn, const SendWr& wr);
    int post_recv(uint32_t qpn, const RecvWr& wr);
    int post_srq_recv(uint32_t srq, const RecvWr& wr);
    int poll_cq(uint32_t cq, std::span<WorkCompletion> out);  // count, or -errno
    bool poll_async_event(AsyncEvent& event);

    // ---- the wire ----
    // What became of the frame: Accepted, or why it was dropped (every drop is also counted).
    RxResult receive(std::span<const uint8_t> frame, uint64_t now_ns);
    size_t transmit(FrameSink& sink, uint64_t now_ns, size_t max_frames);
    std::optional<uint64_t> next_deadline() const;
    void advance(uint64_t now_ns);  // fire timers due by now

    // ---- introspection ----
    const DeviceCounters& device_counters() const noexcept { return counters_; }
    const QpCounters* qp_counters(uint32_t qpn) const;
    std::optional<QpSequence> qp_sequence(uint32_t qpn) const;
    QpCounters total_qp_counters() const;
    std::vector<std::pair<std::string_view, uint64_t>> cache_counters() const;
    const EngineConfig& config() const noexcept { return config_; }
    bool has_pending_work() const;
    // Bumped by every completion pushed to any CQ: the host interface compares it with the
    // value it last saw instead of polling every CQ each turn.
    uint64_t completion_seq() const noexcept { return completion_seq_; }
    bool has_async_events() const noexcept { return !events_.empty(); }
    size_t qp_count() const noexcept { return qps_.size(); }
    size_t cq_count() const noexcept { return cqs_.size(); }
    size_t pd_count() const noexcept { return pds_.size(); }
    size_t srq_count() const noexcept { return srqs_.size(); }
    size_t ah_count() const noexcept { return ahs_.size(); }
    size_t mr_count() const noexcept;
    // The protection unit, for its access-error counters (Stats).
    const mem::MemoryTable& memory() const noexcept { return *memory_.get(); }

private:
    friend class Requester;
    friend class Responder;
    friend class Completer;

    QueuePair* find_qp(uint32_t qpn);
    const QueuePair* find_qp(uint32_t qpn) const;
    bool valid_av(const AddressVector& av) const noexcept;
    void complete(QueuePair& qp, uint32_t cq, const WorkCompletion& wc);
    void raise_event(EventType type, uint32_t object);
    void move_to_error(QueuePair& qp);
    void move_to_send_queue_error(QueuePair& qp);
    void flush_queues(QueuePair& qp);
    void flush_send_queue(QueuePair& qp);
    void charge(uint64_t ns);
    bool take_recv_wqe(QueuePair& qp, RecvWr& out, bool& from_srq);
    void after_srq_consume(uint32_t srq);
    void mark_ready(QueuePair& qp);

    struct ProtectionDomain {};
    struct SharedReceiveQueue {
        uint32_t pd = 0;
        SrqAttributes attr;
        std::deque<RecvWr> wqes;
        bool limit_armed = false;
    };

    EngineConfig config_;
    std::unique_ptr<mem::MemoryTable> memory_;
    std::unique_ptr<class Requester> requester_;
    std::unique_ptr<class Responder> responder_;
    std::unique_ptr<class Completer> completer_;
    std::unique_ptr<mem::CacheModel> qpc_cache_;

    std::map<uint32_t, ProtectionDomain> pds_;
    std::map<uint32_t, std::unique_ptr<CompletionQueue>> cqs_;
    std::map<uint32_t, SharedReceiveQueue> srqs_;
    std::map<uint32_t, AddressVector> ahs_;
    std::map<uint32_t, std::unique_ptr<QueuePair>> qps_;
    uint32_t next_handle_ = 1;
    uint32_t next_qpn_;
    std::deque<AsyncEvent> events_;
    std::deque<uint32_t> ready_;  // QPs with frames to send, round robin
    uint64_t now_ = 0;
    uint64_t busy_until_ = 0;     // processing time charged (cache misses) delays transmission
    DeviceCounters counters_;
    uint64_t completion_seq_ = 0;
};

}  // namespace rnic::transport
