// The completer: consumes ACKs, NAKs, READ responses and atomic ACKs, retires WQEs in order
// into the send CQ, and owns the retransmission decisions (timeout, sequence NAK, RNR NAK,
// implied NAK) with their retry budgets.
#pragma once

#include <cstdint>
#include <span>

#include "queue_pair.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/packet.hpp"

namespace rnic::transport {

class Completer {
public:
    explicit Completer(Engine& engine) : e_(engine) {}

    void on_response(QueuePair& qp, const wire::RoceFrame& f);
    void on_timer(QueuePair& qp, uint64_t now);
    void arm_timer(QueuePair& qp);
    // Completes every finished WQE at the head of the send queue, in order.
    void retire(QueuePair& qp);
    // The head-most failed WQE completes with its error; the QP enters the error state.
    void fail(QueuePair& qp);

private:
    void on_ack(QueuePair& qp, const wire::RoceFrame& f);
    void on_read_response(QueuePair& qp, const wire::RoceFrame& f);
    void on_atomic_ack(QueuePair& qp, const wire::RoceFrame& f);
    // Everything up to and including `psn` is acknowledged; false if a READ/atomic in that
    // range lacks its data (an implied NAK).
    bool ack_through(QueuePair& qp, uint32_t psn);
    SendWqe* wqe_at(QueuePair& qp, uint32_t psn);
    void progress(QueuePair& qp);
    void retry(QueuePair& qp, uint32_t psn, WcStatus exhausted);
    void fail_at(QueuePair& qp, uint32_t psn, WcStatus status);
    bool place(QueuePair& qp, const SendWqe& w, uint32_t offset, std::span<const uint8_t> data);

    Engine& e_;
};

}  // namespace rnic::transport
