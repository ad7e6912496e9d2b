// A client session over the raw control protocol and the shared rings, free of Catch2 so the
// libFuzzer targets use it as well as the tests: requests go out without blocking, replies are
// waited for by turning the in-process daemon (service_rig.hpp) a bounded number of times, and
// every verb returns 0 or the daemon's errno (kNoReply when no reply came). It keeps what a
// client library keeps (ring indices, mappings, handles) and nothing stops a caller from
// writing anything anywhere in the memory it maps: the hostile client is this one misused.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/doorbell.hpp"
#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/abi/ring.hpp"
#include "rnic/wire/gid.hpp"
#include "service_rig.hpp"

namespace rnic::host::test {

inline constexpr int kNoReply = -1;
inline constexpr uint32_t kAccessLocalWrite = 1, kAccessRemoteWrite = 2, kAccessRemoteRead = 4, kAccessRemoteAtomic = 8;

struct SessionReply {
    abi::MessageHeader header{};
    std::vector<uint8_t> body;
    std::vector<int> fds;  // owned: closed with the reply unless taken

    SessionReply() = default;
    ~SessionReply();
    SessionReply(SessionReply&& o) noexcept;
    SessionReply& operator=(SessionReply&& o) noexcept;
    SessionReply(const SessionReply&) = delete;
    SessionReply& operator=(const SessionReply&) = delete;

    int status() const { return header.status; }
    template <class T>
    T as() const {
        T v{};
        std::memcpy(&v, body.data(), std::min(sizeof v, body.size()));
        return v;
    }
    int take_fd(size_t i);  // -1 when there is no such descriptor
};

// A memfd mapped MAP_SHARED, its descriptor kept open (a hostile client may still resize it).
struct SharedMapping {
    // Null when mmap fails; takes `fd` over in any case.
    static std::shared_ptr<SharedMapping> map(int fd, size_t bytes, bool writable = true);
    // A new memfd of `bytes`, mapped; sealable as the client library makes them, unless asked not
    // to be (then the daemon cannot seal it against shrinking).
    static std::shared_ptr<SharedMapping> create(size_t bytes, bool sealable = true);
    ~SharedMapping();
    int fd = -1;
    uint8_t* data = nullptr;
    size_t size = 0;
};

struct CqRing {
    uint32_t handle = 0;
    abi::CreateCqReply reply{};
    std::shared_ptr<SharedMapping> memory;
    abi::RingView ring;
    uint32_t consumed = 0;
    // Takes every CQE the daemon published (none from a corrupt producer index) and releases them.
    size_t poll(std::vector<abi::Cqe>& out);
};

struct QpRings {
    uint32_t qpn = 0;
    uint32_t qp_type = 0;  // enum ibv_qp_type
    abi::CreateQpReply reply{};
    std::shared_ptr<SharedMapping> memory;
    abi::RingView sq, rq;
    uint32_t sq_produced = 0, rq_produced = 0;
};

struct SrqRing {
    uint32_t handle = 0;
    abi::CreateSrqReply reply{};
    std::shared_ptr<SharedMapping> memory;
    abi::RingView ring;
    uint32_t produced = 0;
};

// Registered memory: a shared segment and one MR over all of it, named by the mapping's address.
struct Buffer {
    uint32_t segment_id = 0;
    std::shared_ptr<SharedMapping> memory;
    uint32_t lkey = 0, rkey = 0;
    uint64_t iova() const { return reinterpret_cast<uint64_t>(memory->data); }
};

class SessionClient {
public:
    // Connects to the rig's socket (std::runtime_error when that fails); say hello() next.
    explicit SessionClient(ServiceRig& rig);
    ~SessionClient();
    SessionClient(const SessionClient&) = delete;
    SessionClient& operator=(const SessionClient&) = delete;

    // ---- messages ----
    // One request, sent without blocking; its seq, or nullopt when the socket did not take it.
    std::optional<uint32_t> send(abi::Op op, const void* body, size_t length, std::span<const int> fds = {});
    // Any bytes as one message; false when the socket did not take them.
    bool send_raw(const void* data, size_t length, std::span<const int> fds = {});
    // Turns the daemon until the reply to `seq` arrives (replies to earlier requests met on the
    // way are dropped), the connection ends or `max_turns` passed.
    std::optional<SessionReply> wait(uint32_t seq, int max_turns = 64);
    std::optional<SessionReply> call(abi::Op op, const void* body, size_t length, std::span<const int> fds = {},
                                     int max_turns = 64);
    template <class T>
    std::optional<SessionReply> call(abi::Op op, const T& body, std::span<const int> fds = {}, int max_turns = 64) {
        return call(op, &body, sizeof body, fds, max_turns);
    }
    // Replies waiting on the socket, read and dropped; false once the daemon closed the connection.
    bool drain();
    // Closes the socket (the daemon reclaims the session); mappings and ring state stay.
    void disconnect();
    bool connected() const { return fd_ >= 0 && !eof_; }

    // ---- verbs: 0, the daemon's errno, or kNoReply ----
    int hello();  // maps the async ring and the doorbell bits, keeps the kick eventfd
    int alloc_pd(uint32_t& pd);
    int register_buffer(uint32_t pd, size_t bytes, uint32_t segment_id, uint32_t access, Buffer& out,
                        bool sealable = true);
    int create_channel(uint32_t& handle);
    int create_cq(uint32_t cqe, uint32_t channel, CqRing& out);
    int create_qp(const abi::CreateQpRequest& req, QpRings& out);
    int create_srq(const abi::CreateSrqRequest& req, SrqRing& out);
    int create_ah(uint32_t pd, const wire::Gid& dgid, uint8_t sgid_index, uint32_t& ah);
    int modify_qp(uint32_t qpn, uint32_t mask, const abi::QpAttr& attr);
    int query_qp_state(uint32_t qpn, uint32_t& state);
    // RESET -> INIT -> RTR -> RTS as the pingpongs do: RC and UC towards `dest` at `dgid`; UD
    // with `qkey` (dest and dgid unused).
    int connect(const QpRings& qp, uint32_t dest, const wire::Gid& dgid, uint8_t sgid_index = 0, uint32_t qkey = 0);
    int destroy(abi::Op op, uint32_t handle);

    // ---- data path: write the WQE, publish, ring the queue's doorbell bit ----
    void post_send(QpRings& qp, const abi::SendWqe& wqe, std::span<const abi::Sge> sges);
    void post_recv(QpRings& qp, uint64_t wr_id, std::span<const abi::Sge> sges);
    void post_srq_recv(SrqRing& srq, uint64_t wr_id, std::span<const abi::Sge> sges);
    void ring_doorbell(uint32_t slot);
    // Turns the daemon until `cq` holds `n` more CQEs (or `max_turns` passed); what arrived.
    std::vector<abi::Cqe> wait_cqes(CqRing& cq, size_t n, int max_turns = 500, uint64_t advance_ns = 10'000);
    // Async events published since the last call.
    std::vector<abi::AsyncEventEntry> async_events();

    ServiceRig& rig() const { return rig_; }
    uint32_t session_id = 0;
    std::shared_ptr<SharedMapping> async_memory;  // the async ring, then the doorbell bits
    std::shared_ptr<SharedMapping> status_memory;
    abi::RingView async_ring;
    abi::DoorbellBits* doorbells = nullptr;
    uint32_t async_consumed = 0;
    int async_fd = -1;  // the client's end of the session's async event socket
    int kick_fd = -1;

private:
    std::optional<SessionReply> receive();

    ServiceRig& rig_;
    int fd_ = -1;
    bool eof_ = false;
    uint32_t seq_ = 1;
};

}  // namespace rnic::host::test
