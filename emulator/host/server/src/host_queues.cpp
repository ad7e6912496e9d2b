// The data path, once per poll turn: WQEs from the work-queue rings into the engine, the
// engine's completions into the CQ rings (and their channels), its async events to their
// sessions, and replies that waited for ARP. Nothing here trusts the shared memory: each WQE is
// copied once before it is checked, and indices are checked against the ring size.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>

#include "service_impl.hpp"

namespace rnic::host::server {
namespace {

namespace tp = rnic::transport;
using abi::RingView;

bool sq_open(tp::QpState s) {
    // Before RTS the engine refuses sends; the WQEs wait in the ring, as they would in a NIC's
    // queue that is not yet scheduled.
    return s == tp::QpState::Rts || s == tp::QpState::Sqd || s == tp::QpState::Sqe || s == tp::QpState::Err;
}

abi::Cqe local_error(uint64_t wr_id, uint32_t qpn, uint32_t index, tp::WcOpcode opcode) {
    abi::Cqe c{};
    c.wr_id = wr_id;
    c.status = static_cast<uint32_t>(tp::WcStatus::LocQpOpErr);
    c.opcode = static_cast<uint32_t>(opcode);
    c.qp_num = qpn;
    c.wqe_index = index;
    return c;
}

bool has_wqes(const WorkQueue& q) {
    return q.ring.valid() && !q.broken && q.ring.header().producer.load(std::memory_order_relaxed) != q.consumed;
}

// Reads the receive WQE at `slot` (RQ and SRQ share the layout) into `w` and, when its SGE count
// fits the queue and the ring's stride, into `wr` with the ring index as the engine's wr_id.
// False: the WQE is malformed and must not reach the engine.
bool decode_recv_wqe(const uint8_t* slot, uint32_t max_sge, uint32_t stride, uint32_t index, abi::RecvWqe& w,
                     tp::RecvWr& wr) {
    std::memcpy(&w, slot, sizeof w);
    if (w.num_sge > max_sge || sizeof w + size_t{w.num_sge} * sizeof(abi::Sge) > stride) return false;
    wr.wr_id = index;
    wr.sg_list.clear();
    for (uint32_t i = 0; i < w.num_sge; ++i) {
        abi::Sge g;
        std::memcpy(&g, slot + sizeof w + i * sizeof g, sizeof g);
        wr.sg_list.push_back({g.addr, g.length, g.lkey});
    }
    return true;
}

bool new_doorbell(const WorkQueue& q) {
    return q.ring.valid() && !q.broken && q.ring.header().producer.load(std::memory_order_relaxed) != q.seen;
}

}  // namespace

void HostService::Impl::stop_queue(HostQp& qp, WorkQueue& q, const char* which) {
    q.broken = true;
    q.ring.header().error.store(1, std::memory_order_release);
    ++counters.corrupt_rings;
    spdlog::warn("QP {:#x} (session {}): corrupt {} ring (producer {}, consumer {}, size {}); QP to error", qp.qpn,
                 qp.owner->id, which, q.ring.header().producer.load(std::memory_order_relaxed), q.consumed,
                 q.ring.size());
    qp_to_error(qp);
    push_async(*qp.owner, static_cast<uint32_t>(tp::EventType::QpFatal), qp.qpn);
}

void HostService::Impl::qp_to_error(HostQp& qp) {
    tp::QpAttributes err;
    err.qp_state = tp::QpState::Err;
    engine.modify_qp(qp.qpn, err, tp::QpAttr::State);
    qp.state = tp::QpState::Err;
    if (qp.sq.ring.valid()) qp.sq.ring.header().error.store(1, std::memory_order_release);
}

void HostService::Impl::after_modify(HostQp& qp) {
    tp::QpAttributes now{};
    if (engine.query_qp(qp.qpn, now) != 0) return;
    const bool to_reset = now.qp_state == tp::QpState::Reset && qp.state != tp::QpState::Reset;
    qp.state = now.qp_state;
    if (!to_reset) return;
    // RESET empties the queues (IBA 10.3.1) and, as rxe does, starts their rings over at index
    // 0: the client resets its own producer and retired counts when the reply arrives.
    for (WorkQueue* q : {&qp.sq, &qp.rq}) {
        if (!q->ring.valid()) continue;
        q->consumed = q->seen = 0;
        q->broken = false;
        q->ring.header().producer.store(0, std::memory_order_relaxed);
        q->ring.header().consumer.store(0, std::memory_order_relaxed);
        q->ring.header().error.store(0, std::memory_order_release);
    }
}

size_t HostService::Impl::scan_work_queues() {
    size_t work = 0;
    for (auto& [qpn, qpp] : qps) {
        HostQp& qp = *qpp;
        if (qp.state == tp::QpState::Reset) continue;
        // ---- send queue ----
        WorkQueue& sq = qp.sq;
        if (sq_open(qp.state) && has_wqes(sq)) {
            uint32_t ready = sq.ring.ready(sq.consumed);
            sq.seen = sq.consumed + ready;
            if (ready == RingView::kCorrupt) {
                stop_queue(qp, sq, "send");
                ++work;
                continue;
            }
            const uint32_t stride = sq.ring.entry_size();
            const uint32_t start = sq.consumed;
            for (; ready > 0; --ready) {
                const auto* slot = static_cast<const uint8_t*>(sq.ring.entry(sq.consumed));
                abi::SendWqe w;
                std::memcpy(&w, slot, sizeof w);
                tp::SendWr& wr = send_scratch;
                const bool inl = w.send_flags & tp::SendFlag::Inline;
                const auto op = static_cast<tp::WrOpcode>(w.opcode);
                bool valid = tp::is_known(op);
                if (inl)
                    valid =
                        valid && w.inline_length <= sq.max_inline && abi::kSendWqeHeader + w.inline_length <= stride;
                else
                    valid = valid && w.num_sge <= sq.max_sge;
                int rc = EINVAL;
                if (valid) {
                    wr.wr_id = sq.consumed;  // the engine completes ring indices; the user's wr_id stays here
                    wr.opcode = op;
                    wr.send_flags = w.send_flags;
                    wr.imm_data = w.imm_data;
                    wr.invalidate_rkey =
                        (op == tp::WrOpcode::SendWithInv || op == tp::WrOpcode::LocalInv) ? w.imm_data : 0;
                    wr.remote_addr = w.remote_addr;
                    wr.rkey = w.rkey;
                    wr.compare_add = w.compare_add;
                    wr.swap = w.swap;
                    wr.ah = w.ah;
                    wr.remote_qpn = w.remote_qpn;
                    wr.remote_qkey = w.remote_qkey;
                    wr.sg_list.clear();
                    wr.inline_data.clear();
                    if (inl) {
                        wr.inline_data.assign(slot + abi::kSendWqeHeader, slot + abi::kSendWqeHeader + w.inline_length);
                    } else {
                        for (uint32_t i = 0; i < w.num_sge; ++i) {
                            abi::Sge g;
                            std::memcpy(&g, slot + abi::kSendWqeHeader + i * sizeof g, sizeof g);
                            wr.sg_list.push_back({g.addr, g.length, g.lkey});
                        }
                    }
                    // UD: the AH handle must be the session's own.
                    if (qp.type == tp::QpType::Ud && !qp.owner->ahs.count(w.ah))
                        rc = EINVAL;
                    else
                        rc = engine.post_send(qp.qpn, wr);
                }
                if (rc == ENOMEM) {  // the engine's queue is full: try again next turn
                    ++counters.wqes_engine_full;
                    break;
                }
                sq.wr_ids[sq.consumed & (sq.ring.size() - 1)] = w.wr_id;
                if (rc != 0) {
                    ++counters.wqes_rejected;
                    const auto wc_op = tp::wc_opcode_for(op).value_or(tp::WcOpcode::Send);
                    if (auto it = cqs.find(qp.send_cq); it != cqs.end()) {
                        it->second->local.push_back(local_error(w.wr_id, qp.qpn, sq.consumed, wc_op));
                        local_cqes = true;
                    }
                } else {
                    ++counters.wqes_posted;
                }
                ++sq.consumed;
            }
            if (sq.consumed != start) {
                sq.ring.release(sq.consumed);
                work += sq.consumed - start;
            }
        }
        // ---- receive queue ----
        WorkQueue& rq = qp.rq;
        if (qp.srq == 0 && has_wqes(rq)) {
            uint32_t ready = rq.ring.ready(rq.consumed);
            rq.seen = rq.consumed + ready;
            if (ready == RingView::kCorrupt) {
                stop_queue(qp, rq, "receive");
                ++work;
                continue;
            }
            const uint32_t start = rq.consumed;
            const uint32_t stride = rq.ring.entry_size();
            for (; ready > 0; --ready) {
                const auto* slot = static_cast<const uint8_t*>(rq.ring.entry(rq.consumed));
                abi::RecvWqe w;
                const int rc = decode_recv_wqe(slot, rq.max_sge, stride, rq.consumed, w, recv_scratch)
                                   ? engine.post_recv(qp.qpn, recv_scratch)
                                   : EINVAL;
                if (rc == ENOMEM) {
                    ++counters.wqes_engine_full;
                    break;
                }
                rq.wr_ids[rq.consumed & (rq.ring.size() - 1)] = w.wr_id;
                if (rc != 0) {
                    ++counters.wqes_rejected;
                    if (auto it = cqs.find(qp.recv_cq); it != cqs.end()) {
                        it->second->local.push_back(local_error(w.wr_id, qp.qpn, rq.consumed, tp::WcOpcode::Recv));
                        local_cqes = true;
                    }
                } else {
                    ++counters.wqes_posted;
                }
                ++rq.consumed;
            }
            if (rq.consumed != start) {
                rq.ring.release(rq.consumed);
                work += rq.consumed - start;
            }
        }
    }
    for (auto& [handle, srqp] : srqs) {
        HostSrq& srq = *srqp;
        WorkQueue& q = srq.wq;
        if (!has_wqes(q)) continue;
        uint32_t ready = q.ring.ready(q.consumed);
        q.seen = q.consumed + ready;
        if (ready == RingView::kCorrupt) {
            q.broken = true;
            q.ring.header().error.store(1, std::memory_order_release);
            ++counters.corrupt_rings;
            spdlog::warn("SRQ {} (session {}): corrupt ring; no longer read", srq.handle, srq.owner->id);
            push_async(*srq.owner, static_cast<uint32_t>(tp::EventType::SrqErr), srq.handle);
            ++work;
            continue;
        }
        const uint32_t start = q.consumed;
        const uint32_t stride = q.ring.entry_size();
        for (; ready > 0; --ready) {
            const auto* slot = static_cast<const uint8_t*>(q.ring.entry(q.consumed));
            abi::RecvWqe w;
            const int rc = decode_recv_wqe(slot, q.max_sge, stride, q.consumed, w, recv_scratch)
                               ? engine.post_srq_recv(srq.handle, recv_scratch)
                               : EINVAL;
            if (rc == ENOMEM) {
                ++counters.wqes_engine_full;
                break;
            }
            if (rc != 0) {
                // No CQ to complete it on: the WQE is dropped and the owner told.
                ++counters.wqes_rejected;
                push_async(*srq.owner, static_cast<uint32_t>(tp::EventType::SrqErr), srq.handle);
            } else {
                srq.wr_ids[q.consumed] = w.wr_id;
                ++counters.wqes_posted;
            }
            ++q.consumed;
        }
        if (q.consumed != start) {
            q.ring.release(q.consumed);
            work += q.consumed - start;
        }
    }
    return work;
}

bool HostService::Impl::doorbells_pending() const {
    for (const auto& [qpn, qp] : qps) {
        if (qp->state == tp::QpState::Reset) continue;
        if (sq_open(qp->state) && new_doorbell(qp->sq)) return true;
        if (qp->srq == 0 && new_doorbell(qp->rq)) return true;
    }
    for (const auto& [h, srq] : srqs)
        if (new_doorbell(srq->wq)) return true;
    return false;
}

size_t HostService::Impl::deliver_completions() {
    const uint64_t seq = engine.completion_seq();
    if (seq == seen_completion_seq && !cq_backlog && !local_cqes) return 0;
    seen_completion_seq = seq;
    cq_backlog = false;
    local_cqes = false;
    size_t delivered = 0;
    for (auto& [handle, cqp] : cqs) {
        HostCq& cq = *cqp;
        const uint32_t start = cq.produced;
        bool notify_solicited = false;
        uint32_t room = cq.ring.free_slots(cq.produced);
        while (room > 0) {
            const size_t want = std::min<size_t>(room, wc_scratch.size());
            const int n = engine.poll_cq(cq.handle, std::span(wc_scratch.data(), want));
            if (n <= 0) break;
            for (int i = 0; i < n; ++i) {
                const tp::WorkCompletion& wc = wc_scratch[static_cast<size_t>(i)];
                const auto qit = qps.find(wc.qp_num);
                if (qit == qps.end()) {  // destroyed before its completions were delivered
                    ++counters.cqes_dropped;
                    continue;
                }
                HostQp& qp = *qit->second;
                const auto index = static_cast<uint32_t>(wc.wr_id);
                abi::Cqe c{};
                if (tp::is_recv(wc.opcode) && qp.srq != 0) {
                    const auto sit = srqs.find(qp.srq);
                    if (sit != srqs.end()) {
                        if (auto w = sit->second->wr_ids.find(index); w != sit->second->wr_ids.end()) {
                            c.wr_id = w->second;
                            sit->second->wr_ids.erase(w);
                        }
                    }
                } else if (tp::is_recv(wc.opcode)) {
                    c.wr_id = qp.rq.wr_ids.empty() ? 0 : qp.rq.wr_ids[index & (qp.rq.ring.size() - 1)];
                } else {
                    c.wr_id = qp.sq.wr_ids[index & (qp.sq.ring.size() - 1)];
                }
                c.status = static_cast<uint32_t>(wc.status);
                c.opcode = static_cast<uint32_t>(wc.opcode);
                c.vendor_err = wc.vendor_err;
                c.byte_len = wc.byte_len;
                c.imm_data = wc.imm_data;
                c.qp_num = wc.qp_num;
                c.src_qp = wc.src_qp;
                c.wc_flags = wc.wc_flags;
                c.pkey_index = wc.pkey_index;
                c.slid = wc.slid;
                c.sl = wc.sl;
                c.dlid_path_bits = wc.dlid_path_bits;
                c.wqe_index = index;
                c.completion_ts_ns = now_ns;
                // The engine does not report the SE bit: receives and errors count as solicited.
                if (wc.status != tp::WcStatus::Success || tp::is_recv(wc.opcode)) notify_solicited = true;
                std::memcpy(cq.ring.entry(cq.produced++), &c, sizeof c);
                --room;
            }
            if (static_cast<size_t>(n) < want) break;
        }
        if (room == 0) cq_backlog = true;  // the engine may hold more; look again next turn
        while (room > 0 && !cq.local.empty()) {
            cq.local.front().completion_ts_ns = now_ns;
            std::memcpy(cq.ring.entry(cq.produced++), &cq.local.front(), sizeof(abi::Cqe));
            cq.local.pop_front();
            notify_solicited = true;
            --room;
        }
        if (!cq.local.empty()) local_cqes = true;
        if (cq.produced == start) continue;
        cq.ring.publish(cq.produced);
        delivered += cq.produced - start;
        // Arming (docs/host_interface.md): after publishing, so a client that armed and then
        // polled empty is woken by these entries.
        auto& hdr = cq.ring.header();
        if (abi::take_arm_after_publish(hdr, notify_solicited)) {
            hdr.events.fetch_add(1, std::memory_order_release);
            ++counters.cq_events;
            if (cq.channel_ref) cq.channel_ref->notify();
        }
    }
    counters.cqes_delivered += delivered;
    return delivered;
}

size_t HostService::Impl::deliver_events() {
    if (!engine.has_async_events()) return 0;
    size_t n = 0;
    tp::AsyncEvent ev;
    while (engine.poll_async_event(ev)) {
        ++n;
        const auto type = static_cast<uint32_t>(ev.type);
        switch (ev.type) {
            case tp::EventType::QpFatal:
            case tp::EventType::QpReqErr:
            case tp::EventType::QpAccessErr:
            case tp::EventType::CommEst:
            case tp::EventType::SqDrained:
            case tp::EventType::PathMig:
            case tp::EventType::PathMigErr:
            case tp::EventType::QpLastWqeReached:
                if (auto it = qps.find(ev.object); it != qps.end()) {
                    if (ev.type == tp::EventType::QpFatal || ev.type == tp::EventType::QpReqErr ||
                        ev.type == tp::EventType::QpAccessErr)
                        it->second->state = tp::QpState::Err;
                    push_async(*it->second->owner, type, ev.object);
                }
                break;
            case tp::EventType::CqErr:
                if (auto it = cqs.find(ev.object); it != cqs.end()) {
                    it->second->ring.header().error.store(1, std::memory_order_release);
                    push_async(*it->second->owner, type, ev.object);
                }
                break;
            case tp::EventType::SrqErr:
            case tp::EventType::SrqLimitReached:
                if (auto it = srqs.find(ev.object); it != srqs.end()) {
                    if (ev.type == tp::EventType::SrqLimitReached) it->second->srq_limit = 0;  // disarmed
                    push_async(*it->second->owner, type, ev.object);
                }
                break;
            default:
                for (auto& [id, s] : sessions) push_async(*s, type, ev.object);
                break;
        }
    }
    return n;
}

size_t HostService::Impl::run_deferred() {
    size_t n = 0;
    std::vector<std::shared_ptr<Session>> waiting;
    for (auto& [id, s] : sessions)
        if (s->deferred) waiting.push_back(s);
    for (auto& s : waiting) {
        wire::MacAddr mac{};
        const Resolution r = resolver ? resolver(s->deferred->dgid, now_ns, mac) : Resolution::Unreachable;
        if (r == Resolution::Pending) continue;
        finish_deferred(*s, r, mac);
        read_next(s);
        ++n;
    }
    return n;
}

}  // namespace rnic::host::server
