// The QP context (what an RNIC keeps in its QPC/ICM): attributes, the send queue with the
// requester's cursor and retransmission state, and the responder's sequence state.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "rnic/transport/counters.hpp"
#include "rnic/transport/work_request.hpp"

namespace rnic::transport {

struct SendWqe {
    SendWr wr;
    uint32_t length = 0;     // total bytes of the message (READ: bytes to fetch)
    bool psn_assigned = false;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;      // PSNs the operation consumes (READ: one per response packet)
    bool sent = false;       // every packet went out at least once
    bool done = false;       // acknowledged / data arrived
    WcStatus status = WcStatus::Success;
    uint32_t read_bytes = 0;  // READ data placed so far
    uint64_t atomic_original = 0;

    uint32_t last_psn() const noexcept { return (first_psn + npkts - 1) & 0xFFFFFF; }
    bool is_read_or_atomic() const noexcept {
        return wr.opcode == WrOpcode::RdmaRead || wr.opcode == WrOpcode::AtomicCmpAndSwp ||
               wr.opcode == WrOpcode::AtomicFetchAndAdd;
    }
};

// A response the responder owes the requester, emitted in order at transmit time.
struct ResponseJob {
    enum class Kind : uint8_t { Ack, ReadResponse, AtomicAck } kind = Kind::Ack;
    uint32_t psn = 0;       // PSN of the (first) response packet
    uint8_t syndrome = 0;   // ACK/NAK/RNR syndrome
    uint32_t msn = 0;
    // READ response
    uint32_t rkey = 0;
    uint64_t va = 0;
    uint32_t length = 0;    // bytes still to send
    uint32_t total_length = 0;
    bool first_sent = false;
    bool replay = false;    // answers a duplicate request: not a new responder resource
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
};

struct QueuePair {
    uint32_t qpn = 0;
    QpInitAttr init;
    QpAttributes attr;
    QpState state = QpState::Reset;

    // ---- requester ----
    std::deque<SendWqe> sq;
    size_t cursor = 0;        // index in sq of the next WQE to (re)transmit
    uint32_t cursor_pkt = 0;  // packet index within that WQE
    uint32_t next_psn = 0;    // next PSN never yet assigned
    uint32_t una_psn = 0;     // oldest PSN not yet acknowledged
    uint32_t highest_sent_psn = 0;  // to tell retransmissions from first transmissions
    bool sent_any = false;
    uint32_t outstanding_rd_atomic = 0;
    uint8_t retry_left = 0;
    uint8_t rnr_retry_left = 0;
    std::optional<uint64_t> retransmit_deadline;
    std::optional<uint64_t> rnr_deadline;  // waiting out an RNR NAK
    bool read_gap_reported = false;        // one retransmission per lost READ response
    bool sqd_notified = false;

    // ---- responder ----
    std::deque<RecvWr> rq;
    uint32_t epsn = 0;  // expected PSN
    uint32_t msn = 0;
    bool nak_sent = false;  // one sequence NAK per gap (IBA C9-111)
    std::optional<RecvWr> recv_in_progress;  // multi-packet SEND
    uint32_t recv_offset = 0;
    bool recv_from_srq = false;
    uint8_t expected_segment = 0;  // 0: expecting FIRST/ONLY; 1: inside a SEND; 2: inside a WRITE
    uint64_t write_va = 0;
    uint32_t write_rkey = 0;
    uint32_t write_remaining = 0;
    uint32_t write_total = 0;
    bool uc_dropping = false;  // UC: rest of a message whose packet was lost
    std::vector<ResponderResource> resources;
    size_t next_resource = 0;
    std::deque<ResponseJob> responses;

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
