// The QP context (what an RNIC keeps in its QPC/ICM), in the parts each unit owns the way rxe
// splits its QP: the attributes and queues every unit reads, the requester's cursor, the
// completer's acknowledgement state and timers, and the responder's sequence and receive state.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "qp_congestion.hpp"
#include "rnic/common/ring_buffer.hpp"
#include "rnic/transport/counters.hpp"
#include "rnic/transport/work_request.hpp"
#include "timer_queue.hpp"
#include "work_queues.hpp"

namespace rnic::transport {

// A response the responder owes the requester, emitted in order at transmit time.
struct ResponseJob {
    // EmptyReadResponse: a READ RESPONSE ONLY without payload, the answer to ATOMIC WRITE and
    // FLUSH (IBTA 1.5, as rxe sends it).
    enum class Kind : uint8_t { Ack, ReadResponse, AtomicAck, EmptyReadResponse } kind = Kind::Ack;
    uint32_t psn = 0;      // PSN of the (first) response packet
    uint8_t syndrome = 0;  // ACK/NAK/RNR syndrome
    uint32_t msn = 0;
    // READ response
    uint32_t rkey = 0;
    uint64_t va = 0;
    uint32_t length = 0;  // bytes still to send
    uint32_t total_length = 0;
    bool first_sent = false;
    uint32_t generation = 0;  // of the region at the first response packet (re-registration)
    bool replay = false;  // answers a duplicate request: not a new responder resource
    // atomic
    uint64_t original = 0;
};

// READ and atomic requests the responder executed, kept so duplicates can be answered
// (IBA 9.7.5.1.4: duplicate READs are re-executed, duplicate atomics answered from the
// saved result, never applied twice).
struct ResponderResource {
    bool valid = false;
    bool atomic = false;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;
    uint64_t original = 0;
    bool empty_response = false;  // ATOMIC WRITE / FLUSH: replayed as an empty READ response
};

// Transmission: which WQE and packet goes out next, and the PSNs handed out so far.
struct RequesterState {
    uint32_t cursor = 0;            // SQ position of the next WQE to (re)transmit
    uint32_t cursor_pkt = 0;        // packet index within that WQE
    uint32_t next_psn = 0;          // next PSN never yet assigned
    uint32_t highest_sent_psn = 0;  // to tell retransmissions from first transmissions
    bool sent_any = false;
    uint32_t outstanding_rd_atomic = 0;
    uint32_t packets_without_ack_request = 0;  // in a row, since the last AckReq sent
};

// Acknowledgement: what the peer confirmed, the retry budgets and the two timers.
struct CompleterState {
    uint32_t una_psn = 0;     // oldest PSN not yet acknowledged
    uint32_t ack_cursor = 0;  // SQ position of the oldest WQE not yet finished (RC)
    uint8_t retry_left = 0;
    uint8_t rnr_retry_left = 0;
    bool read_gap_reported = false;  // one retransmission per lost READ response
    // An RNR NAK for una_psn came and nothing was acknowledged since: a sequence NAK for that
    // PSN is then the responder's echo of our packets in flight behind it, not a loss, and is
    // not charged to retry_cnt (see Completer::on_sequence_nak).
    bool rnr_nak_pending = false;
    bool sqd_notified = false;
    Timer retransmit;  // ACK timeout
    Timer rnr;         // waiting out an RNR NAK
};

// The receive WQE the message in progress lands in: the RQ's front (left in place until the
// message completes) or a WQE taken out of the SRQ.
struct RecvClaim {
    bool active = false;
    bool from_srq = false;
    uint32_t slot = 0;
};

struct ResponderState {
    uint32_t epsn = 0;  // expected PSN
    uint32_t msn = 0;
    bool nak_sent = false;  // one sequence NAK per gap (IBA C9-111)
    RecvClaim recv;
    uint32_t recv_offset = 0;
    uint8_t expected_segment = 0;  // 0: expecting FIRST/ONLY; 1: inside a SEND; 2: inside a WRITE
    uint64_t write_va = 0;
    uint32_t write_rkey = 0;
    uint32_t write_remaining = 0;
    uint32_t write_total = 0;
    uint32_t write_generation = 0;  // of the region at the WRITE's first packet (re-registration)
    bool uc_dropping = false;  // UC: rest of a message whose packet was lost
    std::vector<ResponderResource> resources;
    size_t next_resource = 0;
    RingBuffer<ResponseJob> responses;
    uint32_t queued_reads = 0;  // new (not replayed) READ responses in `responses`
};

enum class TimerKind : uint8_t { Retransmit = 0, Rnr = 1, CongestionRate = 2, Pacing = 3, OdpBound = 4 };

// Accesses to on-demand regions that came back Pending (odp_wait.cpp, docs/host_interface.md):
// since when each side waits, whether the QP is parked until the backend has news, and the
// timer of the time bound after which the access fails.
// Each kind of access waits on its own: one going through says nothing of another.
enum class OdpSide : uint8_t {
    Gather,        // the requester's payload from a local SGE (packet not sent)
    Landing,       // a READ response or atomic result into a local SGE (response dropped)
    ReadResponse,  // the responder's READ data (response held)
    Incoming,      // WRITE/SEND data into memory (RNR NAK, the requester retries)
};
inline constexpr size_t kOdpSides = 4;

struct OdpWait {
    uint8_t waiting = 0;  // bit per OdpSide
    bool parked = false;  // waiting for Engine::odp_resume() (or its timer)
    bool listed = false;  // its QPN is on EngineCore::odp_parked (until the next odp_resume())
    std::array<uint64_t, kOdpSides> since{};
    Timer bound;
    bool waits(OdpSide s) const noexcept { return (waiting >> static_cast<unsigned>(s)) & 1u; }
};

struct QueuePair {
    uint32_t qpn = 0;
    QpInitAttr init;
    QpAttributes attr;
    QpState state = QpState::Reset;
    SendQueue sq;
    RecvQueue rq;  // unused with an SRQ

    RequesterState req;
    CompleterState comp;
    ResponderState resp;

    bool in_ready = false;  // on the engine's ready list
    bool pause_parked = false;  // waiting for its priority's PFC/PAUSE to end (pause_path.cpp)
    OdpWait odp;
    std::optional<QpCongestion> cc;  // emplaced at creation
    QpCounters counters;

    bool is_rc() const noexcept { return init.qp_type == QpType::Rc; }
    bool is_uc() const noexcept { return init.qp_type == QpType::Uc; }
    bool is_ud() const noexcept { return init.qp_type == QpType::Ud; }
    uint32_t mtu() const noexcept { return mtu_bytes(attr.path_mtu); }
    bool can_send() const noexcept { return state == QpState::Rts || state == QpState::Sqd; }
    bool can_receive() const noexcept {
        return state == QpState::Rtr || state == QpState::Rts || state == QpState::Sqd || state == QpState::Sqe;
    }
};

}  // namespace rnic::transport
