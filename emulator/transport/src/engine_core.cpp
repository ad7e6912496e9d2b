// The services the units share: readiness, timers, completions, events, errors and receive
// WQEs. Nothing here walks a table.
#include "engine_core.hpp"

#include <algorithm>

namespace rnic::transport {
namespace {

mem::MemoryConfig memory_config(const EngineConfig& c) {
    mem::MemoryConfig m;
    m.max_mrs = c.limits.max_mr;
    m.max_mws = c.limits.max_mw;
    m.max_mr_size = c.limits.max_mr_size;
    m.mpt_cache = c.caches.mpt;
    m.mtt_cache = c.caches.mtt;
    return m;
}

// Handles of different kinds never collide: the tag sits above 28 bits of slot and generation.
constexpr uint32_t kHandleBits = 28;
constexpr uint32_t kPdTag = 1u << 28, kCqTag = 2u << 28, kSrqTag = 3u << 28, kAhTag = 4u << 28;
constexpr uint32_t kQpnBits = 24;

}  // namespace

EngineCore::EngineCore(EngineConfig c)
    : config(std::move(c)),
      memory(std::make_unique<mem::MemoryTable>(memory_config(config))),
      qpc_cache(std::make_unique<mem::CacheModel>(config.caches.qpc)),
      pds(config.limits.max_pd, 1, kHandleBits, kPdTag),
      cqs(config.limits.max_cq, 1, kHandleBits, kCqTag),
      srqs(config.limits.max_srq, 1, kHandleBits, kSrqTag),
      ahs(config.limits.max_ah, 1, kHandleBits, kAhTag),
      qps(config.limits.max_qp, config.first_qpn, kQpnBits, 0),
      timers(5 * size_t{config.limits.max_qp}) {
    ready.reserve(config.limits.max_qp);
    pending_cnps.reserve(config.limits.max_qp);
    pause_parked.reserve(config.limits.max_qp);  // a QP is parked at most once
    odp_parked.reserve(config.limits.max_qp);    // likewise
    odp_timed_out_qps.reserve(64);  // the daemon takes them every turn
    updated_cqs.reserve(config.limits.max_cq);
}

void EngineCore::release_qp_references(const QueuePair& qp) noexcept {
    if (auto* pd = pds.find(qp.init.pd)) --pd->users;
    if (auto* cq = cqs.find(qp.init.send_cq)) --cq->users;
    if (auto* cq = cqs.find(qp.init.recv_cq)) --cq->users;
    if (qp.init.srq)
        if (auto* srq = srqs.find(*qp.init.srq)) --srq->users;
}

void EngineCore::reset_qp(QueuePair& qp) {
    if (qp.resp.recv.active && qp.resp.recv.from_srq) give_back_recv(qp);
    cancel(qp.comp.retransmit);
    cancel(qp.comp.rnr);
    odp_clear_all(qp);
    cancel_congestion_timers(qp);
    qp.cc.emplace(config.congestion, config.port_rate_mbps);
    init_congestion_timers(qp);
    qp.sq.clear();
    qp.rq.clear();
    qp.req = RequesterState{};
    qp.comp.una_psn = 0;
    qp.comp.ack_cursor = 0;
    qp.comp.retry_left = qp.comp.rnr_retry_left = 0;
    qp.comp.read_gap_reported = qp.comp.sqd_notified = qp.comp.rnr_nak_pending = false;
    qp.resp.epsn = qp.resp.msn = 0;
    qp.resp.nak_sent = false;
    qp.resp.recv = {};
    qp.resp.recv_offset = 0;
    qp.resp.expected_segment = 0;
    qp.resp.write_va = 0;
    qp.resp.write_rkey = qp.resp.write_remaining = qp.resp.write_total = 0;
    qp.resp.uc_dropping = false;
    qp.resp.resources.assign(qp.resp.resources.size(), ResponderResource{});
    qp.resp.next_resource = 0;
    qp.resp.responses.clear();
    qp.resp.queued_reads = 0;
    qp.attr = QpAttributes{};
    qp.attr.cap = qp.init.cap;
    if (qp.is_ud()) qp.attr.path_mtu = config.limits.active_mtu;
    qp.state = QpState::Reset;
    qp.counters = QpCounters{};
}

void EngineCore::mark_ready(QueuePair& qp) {
    if (qp.in_ready) return;
    qp.in_ready = true;
    ready.push_back(qp.qpn);  // reserved for max_qp: never allocates
}

void EngineCore::charge(uint64_t ns) noexcept {
    busy_until = std::max(busy_until, now) + ns;
}

void EngineCore::touch_qpc(uint32_t qpn) noexcept {
    // The QP context lookup goes through the QPC cache like everything an RNIC keeps in ICM.
    if (qpc_cache->enabled() && !qpc_cache->access(qpn)) charge(qpc_cache->config().miss_cost_ns);
}

void EngineCore::complete(QueuePair& qp, uint32_t cq_handle, const WorkCompletion& wc) {
    ++qp.counters.completions;
    ++room_seq;
    if (wc.status != WcStatus::Success) ++qp.counters.error_completions;
    CompletionQueue* cq = cqs.find(cq_handle);
    if (!cq) return;
    const bool was_overflowed = cq->overflowed();
    if (!cq->push(wc)) {
        ++counters.cq_overflows;
        if (!was_overflowed) raise_event(EventType::CqErr, cq_handle);
        return;
    }
    if (!cq->updated) {
        cq->updated = true;
        updated_cqs.push_back(cq_handle);  // reserved for max_cq: never allocates
    }
}

void EngineCore::raise_event(EventType type, uint32_t object) {
    ++counters.async_events;
    events.push_back({type, object});
}

void EngineCore::move_to_send_queue_error(QueuePair& qp) {
    // UC and UD QPs keep receiving after a send-side error (IBA 10.3.1, SQE state): only the
    // send queue is flushed.
    if (qp.is_rc()) {
        move_to_error(qp);
        return;
    }
    qp.state = QpState::Sqe;
    qp.attr.qp_state = QpState::Sqe;
    flush_send_queue(qp);
}

// Outstanding send WRs complete in order: a failed one with its error, the rest flushed.
void EngineCore::flush_send_queue(QueuePair& qp) {
    SendQueue& sq = qp.sq;
    while (!sq.empty()) {
        const SendWqe& w = sq.at(sq.head());
        WorkCompletion wc;
        wc.wr_id = w.wr_id;
        wc.status = w.state == WqeState::Failed ? w.status : WcStatus::WrFlushErr;
        wc.opcode = w.info().completes_as;
        wc.qp_num = qp.qpn;
        complete(qp, qp.init.send_cq, wc);
        sq.pop_front();
    }
    qp.req.cursor = qp.comp.ack_cursor = sq.head();
    qp.req.cursor_pkt = 0;
    qp.req.outstanding_rd_atomic = 0;
    cancel(qp.comp.retransmit);
    cancel(qp.comp.rnr);
}

void EngineCore::move_to_error(QueuePair& qp, bool keep_responses) {
    if (qp.state == QpState::Err) return;
    qp.state = QpState::Err;
    qp.attr.qp_state = QpState::Err;
    // Nothing waits for an on-demand page any more: no bound to enforce, nothing to re-request.
    odp_clear_all(qp);
    flush_queues(qp, keep_responses);
}

// Every outstanding WR completes with IBV_WC_WR_FLUSH_ERR, in order (IBA 10.3.1 error state).
void EngineCore::flush_queues(QueuePair& qp, bool keep_responses) {
    flush_send_queue(qp);
    // A WQE an SRQ gave this QP for a message in progress is this QP's to complete.
    if (qp.resp.recv.active && qp.resp.recv.from_srq) {
        WorkCompletion wc;
        wc.wr_id = claimed_recv(qp).wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = qp.qpn;
        consume_recv(qp);
        complete(qp, qp.init.recv_cq, wc);
    }
    qp.resp.recv = {};
    while (!qp.rq.empty()) {
        const uint32_t slot = qp.rq.take();
        WorkCompletion wc;
        wc.wr_id = qp.rq.view(slot).wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = qp.qpn;
        qp.rq.release(slot);
        complete(qp, qp.init.recv_cq, wc);
    }
    if (!keep_responses) {
        qp.resp.responses.clear();
        qp.resp.queued_reads = 0;
    }
}

bool EngineCore::claim_recv(QueuePair& qp) {
    RecvClaim& claim = qp.resp.recv;
    if (claim.active) return true;
    if (qp.init.srq) {
        SharedReceiveQueue* srq = srqs.find(*qp.init.srq);
        if (!srq || srq->wqes.empty()) return false;
        claim = {true, true, srq->wqes.take()};
        after_srq_consume(*qp.init.srq, *srq);
        return true;
    }
    if (qp.rq.empty()) return false;
    claim = {true, false, qp.rq.front_slot()};  // stays the RQ's front until consumed
    return true;
}

RecvView EngineCore::claimed_recv(const QueuePair& qp) const noexcept {
    const RecvClaim& claim = qp.resp.recv;
    if (claim.from_srq) {
        // An SRQ cannot be destroyed while QPs are attached, so it is there.
        const SharedReceiveQueue* srq = srqs.find(*qp.init.srq);
        return srq ? srq->wqes.view(claim.slot) : RecvView{};
    }
    return qp.rq.view(claim.slot);
}

void EngineCore::consume_recv(QueuePair& qp) {
    RecvClaim& claim = qp.resp.recv;
    if (!claim.active) return;
    if (claim.from_srq) {
        if (SharedReceiveQueue* srq = srqs.find(*qp.init.srq)) srq->wqes.release(claim.slot);
    } else {
        qp.rq.release(qp.rq.take());
    }
    claim = {};
}

void EngineCore::give_back_recv(QueuePair& qp) {
    RecvClaim& claim = qp.resp.recv;
    if (claim.active && claim.from_srq)
        if (SharedReceiveQueue* srq = srqs.find(*qp.init.srq)) srq->wqes.give_back(claim.slot);
    claim = {};
}

void EngineCore::after_srq_consume(uint32_t handle, SharedReceiveQueue& srq) {
    // IBA 11.5.2.5: once armed, the limit event fires when the WQE count drops below it.
    if (srq.limit_armed && srq.wqes.size() < srq.attr.srq_limit) {
        srq.limit_armed = false;
        raise_event(EventType::SrqLimitReached, handle);
    }
}

}  // namespace rnic::transport
