// The requester: turns send WQEs into request packets (segmentation to the path MTU, PSN
// assignment, AckReq), honours the send window, fences and max_rd_atomic, and rewinds to a
// PSN when the completer decides to retransmit (go-back-N).
#pragma once

#include <cstddef>
#include <cstdint>

#include "queue_pair.hpp"
#include "rnic/common/frame_sink.hpp"

namespace rnic::transport {

class EngineCore;
using common::FrameSink;

class Requester {
public:
    explicit Requester(EngineCore& core) : core_(core) {}

    // Emits up to `budget` request packets; returns how many.
    size_t emit(QueuePair& qp, FrameSink& sink, size_t budget);
    // Resume transmission at `psn` (inside the outstanding window).
    void rewind(QueuePair& qp, uint32_t psn);
    // The last packet sent asked for no ACK and no later message will (the QP left RTS): send
    // it again with the request; the responder acknowledges a duplicate without executing it.
    void ask_again(QueuePair& qp);
    bool has_work(const QueuePair& qp) const noexcept {
        return qp.can_send() && !qp.comp.rnr.armed() && qp.req.cursor != qp.sq.tail();
    }

private:
    enum class Step { Started, Skip, Blocked, Failed };
    Step start_wqe(QueuePair& qp, SendWqe& w, uint32_t pos);
    Step local_operation(QueuePair& qp, SendWqe& w);
    enum class Sent { Yes, NoRoom, Failed, Pending };
    Sent send_packet(QueuePair& qp, SendWqe& w, uint32_t pos, FrameSink& sink);
    bool coalesced_ack_request(const QueuePair& qp, uint32_t pos) const noexcept;
    uint8_t opcode_for(const QueuePair& qp, const SendWqe& w, uint32_t pkt) const noexcept;
    void next_wqe(QueuePair& qp) noexcept;

    EngineCore& core_;
};

}  // namespace rnic::transport
