// The responder: PSN checking (expected, duplicate, out of sequence), receive-queue
// consumption, RDMA WRITE/READ/atomic execution with protection checks, RNR and error NAKs,
// coalesced ACKs, and the responses it owes, emitted at transmit time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "queue_pair.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/packet.hpp"

namespace rnic::transport {

class Responder {
public:
    explicit Responder(Engine& engine) : e_(engine) {}

    void on_request(QueuePair& qp, const wire::RoceFrame& f, std::span<const uint8_t> frame);
    size_t emit(QueuePair& qp, FrameSink& sink, size_t budget);
    bool has_work(const QueuePair& qp) const { return !qp.responses.empty(); }

private:
    enum class Outcome { Done, Rnr, InvalidRequest, AccessError, LengthError, Drop };

    void on_rc_request(QueuePair& qp, const wire::RoceFrame& f);
    void on_uc_request(QueuePair& qp, const wire::RoceFrame& f);
    void on_ud_request(QueuePair& qp, const wire::RoceFrame& f, std::span<const uint8_t> frame);
    void on_duplicate(QueuePair& qp, const wire::RoceFrame& f);
    Outcome execute(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_send(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_write(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_read(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_atomic(QueuePair& qp, const wire::RoceFrame& f);
    bool scatter(QueuePair& qp, const RecvWr& wqe, uint32_t offset, std::span<const uint8_t> data);
    static uint64_t capacity(const RecvWr& wqe);
    void complete_recv(QueuePair& qp, const RecvWr& wqe, WcOpcode opcode, uint32_t byte_len, const wire::RoceFrame& f,
                       WcStatus status = WcStatus::Success);
    void queue_ack(QueuePair& qp, uint32_t psn, uint8_t syndrome);
    void queue_nak(QueuePair& qp, uint32_t psn, uint8_t syndrome);
    void fatal(QueuePair& qp, const wire::RoceFrame& f, Outcome outcome);
    bool emit_read_response(QueuePair& qp, ResponseJob& job, FrameSink& sink);

    Engine& e_;
    std::vector<uint8_t> payload_;
    std::vector<uint8_t> grh_;
};

}  // namespace rnic::transport
