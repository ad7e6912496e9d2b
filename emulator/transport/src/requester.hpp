// The requester: turns send WQEs into request packets (segmentation to the path MTU, PSN
// assignment, AckReq), honours the send window, fences and max_rd_atomic, and rewinds to a
// PSN when the completer decides to retransmit (go-back-N).
#pragma once

#include <cstdint>
#include <vector>

#include "queue_pair.hpp"
#include "rnic/transport/engine.hpp"

namespace rnic::transport {

class Requester {
public:
    explicit Requester(Engine& engine) : e_(engine) {}

    // Emits up to `budget` request packets; returns how many.
    size_t emit(QueuePair& qp, FrameSink& sink, size_t budget);
    // Resume transmission at `psn` (inside the outstanding window).
    void rewind(QueuePair& qp, uint32_t psn);
    bool has_work(const QueuePair& qp) const;

private:
    enum class Step { Sent, Skip, Blocked, Failed };
    Step start_wqe(QueuePair& qp, SendWqe& w);
    bool send_packet(QueuePair& qp, SendWqe& w, FrameSink& sink);
    bool gather(QueuePair& qp, const SendWqe& w, uint32_t offset, uint32_t length);
    uint8_t opcode_for(const QueuePair& qp, const SendWqe& w, uint32_t pkt) const;

    Engine& e_;
    std::vector<uint8_t> payload_;
};

}  // namespace rnic::transport
