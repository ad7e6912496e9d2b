// The responder: PSN checking (expected, duplicate, out of sequence), receive-queue
// consumption, RDMA WRITE/READ/atomic execution with protection checks, RNR and error NAKs,
// coalesced ACKs, and the responses it owes, emitted at transmit time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "queue_pair.hpp"
#include "sge_copy.hpp"
#include "rnic/common/frame_sink.hpp"
#include "rnic/wire/packet.hpp"

namespace rnic::transport {

class EngineCore;
enum class Emit : uint8_t;  // frame_builder.hpp
using common::FrameSink;

class Responder {
public:
    explicit Responder(EngineCore& core) : core_(core) {}

    void on_request(QueuePair& qp, const wire::RoceFrame& f, std::span<const uint8_t> frame);
    size_t emit(QueuePair& qp, FrameSink& sink, size_t budget);
    bool has_work(const QueuePair& qp) const noexcept { return !qp.resp.responses.empty(); }

private:
    // Pending: an on-demand page the data lands in is not there yet (odp_wait.cpp).
    enum class Outcome { Done, Rnr, InvalidRequest, AccessError, LengthError, Drop, Pending };

    void on_rc_request(QueuePair& qp, const wire::RoceFrame& f);
    void on_uc_request(QueuePair& qp, const wire::RoceFrame& f);
    void on_ud_request(QueuePair& qp, const wire::RoceFrame& f, std::span<const uint8_t> frame);
    void on_duplicate(QueuePair& qp, const wire::RoceFrame& f);
    Outcome execute(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_send(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_write(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_read(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_atomic(QueuePair& qp, const wire::RoceFrame& f);
    // IBTA 1.5 (responder_ibta15.cpp)
    Outcome do_atomic_write(QueuePair& qp, const wire::RoceFrame& f);
    Outcome do_flush(QueuePair& qp, const wire::RoceFrame& f);
    void answer_empty_read(QueuePair& qp, uint32_t psn, const ResponderResource& saved);
    SgeCopy scatter(QueuePair& qp, uint32_t offset, std::span<const uint8_t> data);
    // Completes the claimed receive WQE (which is used up).
    void complete_recv(QueuePair& qp, WcOpcode opcode, uint32_t byte_len, const wire::RoceFrame& f,
                       WcStatus status = WcStatus::Success);
    void queue_response(QueuePair& qp, const ResponseJob& job);
    void queue_ack(QueuePair& qp, uint32_t psn, uint8_t syndrome);
    void fatal(QueuePair& qp, const wire::RoceFrame& f, Outcome outcome);
    Emit emit_read_response(QueuePair& qp, ResponseJob& job, FrameSink& sink);
    void pop_response(QueuePair& qp) noexcept;

    EngineCore& core_;
    std::array<uint8_t, 40> grh_{};
};

}  // namespace rnic::transport
