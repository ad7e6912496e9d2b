// The completer: consumes ACKs, NAKs, READ responses and atomic ACKs, retires WQEs in order
// into the send CQ, and owns the retransmission decisions (timeout, sequence NAK, RNR NAK,
// implied NAK) with their retry budgets and timers.
#pragma once

#include <cstdint>
#include <span>

#include "queue_pair.hpp"
#include "rnic/wire/packet.hpp"

namespace rnic::transport {

class EngineCore;

class Completer {
public:
    explicit Completer(EngineCore& core) : core_(core) {}

    void on_response(QueuePair& qp, const wire::RoceFrame& f);
    // The ACK timer fired.
    void on_timeout(QueuePair& qp);
    // The RNR wait is over: retransmit.
    void on_rnr_timer(QueuePair& qp);
    void arm_timer(QueuePair& qp);
    // Completes every finished WQE at the head of the send queue, in order.
    void retire(QueuePair& qp);
    // The head-most failed WQE completes with its error; the QP enters the error state.
    void fail(QueuePair& qp);
    // The WQE holding `psn` fails with `status`; then fail().
    void fail_at(QueuePair& qp, uint32_t psn, WcStatus status);

private:
    void on_ack(QueuePair& qp, const wire::RoceFrame& f);
    void on_read_response(QueuePair& qp, const wire::RoceFrame& f);
    void on_atomic_ack(QueuePair& qp, const wire::RoceFrame& f);
    // A PSN-sequence-error NAK for una_psn (completer_sequence_nak.cpp).
    void on_sequence_nak(QueuePair& qp, uint32_t psn);
    // Everything up to and including `psn` is acknowledged; false if a READ/atomic in that
    // range lacks its data (an implied NAK).
    bool ack_through(QueuePair& qp, uint32_t psn);
    // Everything before the READ/atomic at `pos` is implicitly acknowledged by its response.
    void ack_before(QueuePair& qp, uint32_t pos);
    // The unacknowledged WQE holding `psn`, searched from the oldest one not finished.
    SendWqe* wqe_at(QueuePair& qp, uint32_t psn, uint32_t* pos = nullptr);
    void advance_ack_cursor(QueuePair& qp) noexcept;
    void progress(QueuePair& qp);
    void retry(QueuePair& qp, uint32_t psn, WcStatus exhausted);
    // Lands a READ response's data or an atomic's original value in the WQE's SGEs. False: the
    // response is not consumed (failed: the QP is in error; or parked on an on-demand page).
    bool place(QueuePair& qp, uint32_t pos, uint32_t psn, uint32_t offset, std::span<const uint8_t> data);

    EngineCore& core_;
};

}  // namespace rnic::transport
