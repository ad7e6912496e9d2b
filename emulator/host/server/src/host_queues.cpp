// The data path, once per poll turn: WQEs from the work-queue rings whose doorbells rang into the
// engine, the completions of the CQs the engine updated into their rings (and channels), its
// async events to their sessions, and replies that waited for ARP. Each step looks only at the
// queues and CQs that have something: doorbell bits name the queues, the engine names the CQs.
// Nothing here trusts the shared memory: each WQE is copied once before it is checked, and
// indices are checked against the ring size.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "rnic/host/abi/doorbell.hpp"
#include "service_impl.hpp"

namespace rnic::host::server {
namespace {

namespace tp = rnic::transport;
using abi::RingView;

// WQEs one queue may hand the engine per turn, and queues served per turn: a client with deep
// queues on many QPs shares the turn instead of taking it, and the rest waits one turn.
constexpr uint32_t kWqesPerQueueTurn = 256;
constexpr size_t kQueuesPerTurn = 1024;
// WQEs all queues of one session may read per turn. WQEs the daemon rejects cost their client
// nothing (no data moves, no engine queue fills), so without this a client with 1000 QPs
// re-publishing 256 bad WQEs each made every turn 6.7 ms long for everyone (measured).
constexpr uint32_t kWqesPerSessionTurn = 1024;
// Full CQ rings looked at again per turn (round robin): a client that does not poll costs a
// bounded amount each turn until its CQ overflows.
constexpr size_t kBackloggedCqsPerTurn = 256;

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

// Reads the receive WQE at `slot` (RQ and SRQ share the layout) into `w` and, when its SGE count
// fits the queue and the ring's stride, into `wr` with the user's wr_id (an RQ's caller replaces
// it with the ring index). False: the WQE is malformed and must not reach the engine.
bool decode_recv_wqe(const uint8_t* slot, uint32_t max_sge, uint32_t stride, abi::RecvWqe& w, tp::RecvWr& wr) {
    std::memcpy(&w, slot, sizeof w);
    if (w.num_sge > max_sge || sizeof w + size_t{w.num_sge} * sizeof(abi::Sge) > stride) return false;
    wr.wr_id = w.wr_id;
    wr.sg_list.clear();
    for (uint32_t i = 0; i < w.num_sge; ++i) {
        abi::Sge g;
        std::memcpy(&g, slot + sizeof w + i * sizeof g, sizeof g);
        wr.sg_list.push_back({g.addr, g.length, g.lkey});
    }
    return true;
}

// Decodes the send WQE at `slot` into `wr` (wr_id = the ring index). False: malformed.
bool decode_send_wqe(const uint8_t* slot, const WorkQueue& sq, uint32_t index, abi::SendWqe& w, tp::SendWr& wr) {
    std::memcpy(&w, slot, sizeof w);
    const bool inl = w.send_flags & tp::SendFlag::Inline;
    const auto op = static_cast<tp::WrOpcode>(w.opcode);
    if (!tp::is_known(op)) return false;
    if (inl ? (w.inline_length > sq.max_inline || abi::kSendWqeHeader + w.inline_length > sq.ring.entry_size())
            : w.num_sge > sq.max_sge)
        return false;
    wr.wr_id = index;  // the engine completes ring indices; the user's wr_id stays with the queue
    wr.opcode = op;
    wr.send_flags = w.send_flags;
    wr.imm_data = w.imm_data;
    wr.invalidate_rkey = (op == tp::WrOpcode::SendWithInv || op == tp::WrOpcode::LocalInv) ? w.imm_data : 0;
    wr.remote_addr = w.remote_addr;
    wr.rkey = w.rkey;
    wr.compare_add = w.compare_add;
    wr.swap = w.swap;
    wr.flush_type = w.flush_type;
    wr.flush_level = w.flush_level;
    wr.ah = w.ah;
    wr.remote_qpn = w.remote_qpn;
    wr.remote_qkey = w.remote_qkey;
    // BIND_MW's fields (queue_entries.hpp); the engine checks every one of them.
    wr.bind = op == tp::WrOpcode::BindMw
                  ? tp::MwBindInfo{w.imm_data, static_cast<uint32_t>(w.swap), w.remote_addr, w.compare_add,
                                   static_cast<uint32_t>(w.swap >> 32)}
                  : tp::MwBindInfo{};
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
    return true;
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
    if (!to_reset) {
        // WQEs posted before this state opened the queue (an SQ before RTS) are read now.
        wake_queue({qp.qpn, false}, qp.waiting);
        return;
    }
    // RESET empties the queues (IBA 10.3.1) and, as rxe does, starts their rings over at index
    // 0: the client resets its own producer and retired counts when the reply arrives.
    for (WorkQueue* q : {&qp.sq, &qp.rq}) {
        if (!q->ring.valid()) continue;
        q->consumed = 0;
        q->broken = false;
        q->ring.header().producer.store(0, std::memory_order_relaxed);
        q->ring.header().consumer.store(0, std::memory_order_relaxed);
        q->ring.header().error.store(0, std::memory_order_release);
    }
}

// A queue is on the pending list once at most (and on the room list once at most, room_listed):
// neither list grows with doorbells. A queue waiting for room that rings again is served at once,
// since its other queue (an RQ beside a full SQ) may have work; its room-list entry is skipped
// once its flag no longer says ForRoom.
void HostService::Impl::wake_queue(QueueRef ref, Waiting& waiting) {
    if (waiting == Waiting::Pending) return;
    waiting = Waiting::Pending;
    pending.push_back(ref);
}

namespace {

// One turn's share of a work queue's new WQEs: `post(slot, index)` hands the WQE at ring index
// `index` to the engine and returns its errno (a rejected WQE's completion or event is its
// business); ENOMEM leaves the WQE in the ring for when the engine has room.
enum class RingTurn : uint8_t { Done, More, Full, Corrupt };

// At most a queue's share of the turn and what is left of its session's (Session::wqe_budget).
template <class Post>
RingTurn read_ring(WorkQueue& q, Session& owner, ServiceCounters& counters, Post&& post) {
    const uint32_t ready = q.ring.ready(q.consumed);
    if (ready == RingView::kCorrupt) return RingTurn::Corrupt;
    const uint32_t share = std::min({ready, kWqesPerQueueTurn, owner.wqe_budget});
    RingTurn result = share < ready ? RingTurn::More : RingTurn::Done;
    const uint32_t start = q.consumed;
    for (uint32_t left = share; left > 0; --left) {
        const int rc = post(static_cast<const uint8_t*>(q.ring.entry(q.consumed)), q.consumed);
        if (rc == ENOMEM) {
            ++counters.wqes_engine_full;
            result = RingTurn::Full;
            break;
        }
        ++(rc == 0 ? counters.wqes_posted : counters.wqes_rejected);
        ++q.consumed;
    }
    if (q.consumed != start) q.ring.release(q.consumed);
    owner.wqe_budget -= q.consumed - start;
    return result;
}

HostService::Impl::Served served(RingTurn t) {
    using Served = HostService::Impl::Served;
    return t == RingTurn::More ? Served::More : t == RingTurn::Full ? Served::Full : Served::Done;
}

}  // namespace

HostService::Impl::Served HostService::Impl::serve_send_queue(HostQp& qp) {
    WorkQueue& sq = qp.sq;
    if (!sq_open(qp.state) || !sq.ring.valid() || sq.broken) return Served::Done;
    const RingTurn t = read_ring(sq, *qp.owner, counters, [&](const uint8_t* slot, uint32_t index) {
        abi::SendWqe w;
        int rc = EINVAL;
        if (decode_send_wqe(slot, sq, index, w, send_scratch)) {
            // UD: the AH handle must be the session's own.
            rc = qp.type == tp::QpType::Ud && !qp.owner->ahs.count(w.ah) ? EINVAL
                                                                         : engine.post_send(qp.qpn, send_scratch);
        }
        if (rc == ENOMEM) return rc;
        sq.wr_ids[index & (sq.ring.size() - 1)] = w.wr_id;
        if (rc != 0) {
            const auto op = tp::wc_opcode_for(static_cast<tp::WrOpcode>(w.opcode)).value_or(tp::WcOpcode::Send);
            add_local_cqe(qp.send_cq, local_error(w.wr_id, qp.qpn, index, op));
        }
        return rc;
    });
    if (t == RingTurn::Corrupt) stop_queue(qp, sq, "send");
    return served(t);
}

HostService::Impl::Served HostService::Impl::serve_recv_queue(HostQp& qp) {
    WorkQueue& rq = qp.rq;
    if (qp.srq != 0 || qp.state == tp::QpState::Reset || !rq.ring.valid() || rq.broken) return Served::Done;
    const RingTurn t = read_ring(rq, *qp.owner, counters, [&](const uint8_t* slot, uint32_t index) {
        abi::RecvWqe w;
        int rc = EINVAL;
        if (decode_recv_wqe(slot, rq.max_sge, rq.ring.entry_size(), w, recv_scratch)) {
            recv_scratch.wr_id = index;  // the engine completes ring indices; the user's wr_id stays here
            rc = engine.post_recv(qp.qpn, recv_scratch);
        }
        if (rc == ENOMEM) return rc;
        rq.wr_ids[index & (rq.ring.size() - 1)] = w.wr_id;
        if (rc != 0) add_local_cqe(qp.recv_cq, local_error(w.wr_id, qp.qpn, index, tp::WcOpcode::Recv));
        return rc;
    });
    if (t == RingTurn::Corrupt) stop_queue(qp, rq, "receive");
    return served(t);
}

HostService::Impl::Served HostService::Impl::serve_srq(HostSrq& srq) {
    WorkQueue& q = srq.wq;
    if (!q.ring.valid() || q.broken) return Served::Done;
    const RingTurn t = read_ring(q, *srq.owner, counters, [&](const uint8_t* slot, uint32_t) {
        // SRQ slots are reused as soon as they are consumed while the engine may hold the WQE for
        // long: the engine keeps the user's wr_id itself (nothing retires SRQ slots by index).
        abi::RecvWqe w;
        const int rc = decode_recv_wqe(slot, q.max_sge, q.ring.entry_size(), w, recv_scratch)
                           ? engine.post_srq_recv(srq.handle, recv_scratch)
                           : EINVAL;
        // No CQ to complete a rejected WQE on: it is dropped and the owner told.
        if (rc != 0 && rc != ENOMEM) push_async(*srq.owner, static_cast<uint32_t>(tp::EventType::SrqErr), srq.handle);
        return rc;
    });
    if (t == RingTurn::Corrupt) {
        q.broken = true;
        q.ring.header().error.store(1, std::memory_order_release);
        ++counters.corrupt_rings;
        spdlog::warn("SRQ {} (session {}): corrupt ring; no longer read", srq.handle, srq.owner->id);
        push_async(*srq.owner, static_cast<uint32_t>(tp::EventType::SrqErr), srq.handle);
    }
    return served(t);
}

void HostService::Impl::add_local_cqe(uint32_t cq_handle, const abi::Cqe& cqe) {
    const auto it = cqs.find(cq_handle);
    if (it == cqs.end()) return;
    HostCq& cq = *it->second;
    // The daemon's own completions count against the CQ's capacity as the engine's do: a client
    // that posts bad WQEs and never polls overruns its CQ (IBV_EVENT_CQ_ERR, the completion lost)
    // instead of growing the daemon's memory by a CQE per WQE.
    if (cq.local.size() >= cq.cqe) {
        ++counters.cqes_overrun;
        raise_cq_error(cq);
        return;
    }
    cq.local.push_back(cqe);
    backlog_cq(cq);
}

void HostService::Impl::raise_cq_error(HostCq& cq) {
    if (cq.overrun) return;  // one event per CQ, whoever overran it first
    cq.overrun = true;
    cq.ring.header().error.store(1, std::memory_order_release);
    push_async(*cq.owner, static_cast<uint32_t>(tp::EventType::CqErr), cq.handle);
}

void HostService::Impl::backlog_cq(HostCq& cq) {
    if (cq.backlogged) return;
    cq.backlogged = true;
    cq_backlog.push_back(cq.handle);
}

size_t HostService::Impl::scan_work_queues() {
    // The doorbells: each session's bits name the queues that rang since the last turn.
    for (auto& [id, s] : sessions) {
        s->wqe_budget = kWqesPerSessionTurn;
        if (!s->doorbells) continue;
        Session& session = *s;
        const auto slots = static_cast<uint32_t>(session.doorbell_targets.size());
        const bool rang = abi::take_doorbells(*session.doorbells, slots, [&](uint32_t slot) {
            if (slot >= session.doorbell_targets.size()) return;
            const QueueRef ref = session.doorbell_targets[slot];
            if (ref.handle == 0) return;  // a bit for a slot the session does not use
            if (ref.srq) {
                if (auto it = srqs.find(ref.handle); it != srqs.end()) wake_queue(ref, it->second->waiting);
            } else if (auto it = qps.find(ref.handle); it != qps.end()) {
                wake_queue(ref, it->second->waiting);
            }
        });
        if (rang && latency_trace) note_doorbell_stamp(session);
    }
    // Queues the engine had no room for try again once work left it (a completion, or an
    // unsignaled WQE retired without one), not every turn.
    if (!waiting_for_room.empty() && engine.room_seq() != room_seq) {
        room_seq = engine.room_seq();
        auto retry = [this](QueueRef ref, auto& q) {
            q.room_listed = false;
            if (q.waiting != Waiting::ForRoom) return;
            q.waiting = Waiting::No;
            wake_queue(ref, q.waiting);
        };
        for (const QueueRef& ref : waiting_for_room) {
            if (ref.srq) {
                if (auto it = srqs.find(ref.handle); it != srqs.end()) retry(ref, *it->second);
            } else if (auto it = qps.find(ref.handle); it != qps.end()) {
                retry(ref, *it->second);
            }
        }
        waiting_for_room.clear();
    }
    size_t work = 0;
    // The queues waiting now, each once; whatever is left goes to the back for the next turn.
    for (size_t n = std::min(pending.size(), kQueuesPerTurn); n > 0; --n) {
        const QueueRef ref = pending.front();
        pending.pop_front();
        Waiting* waiting = nullptr;
        bool* room_listed = nullptr;
        Served served = Served::Done;
        uint32_t before = 0, after = 0;
        if (ref.srq) {
            const auto it = srqs.find(ref.handle);
            if (it == srqs.end()) continue;
            HostSrq& srq = *it->second;
            waiting = &srq.waiting;
            room_listed = &srq.room_listed;
            before = srq.wq.consumed;
            served = serve_srq(srq);
            after = srq.wq.consumed;
        } else {
            const auto it = qps.find(ref.handle);
            if (it == qps.end()) continue;
            HostQp& qp = *it->second;
            waiting = &qp.waiting;
            room_listed = &qp.room_listed;
            before = qp.sq.consumed + qp.rq.consumed;
            const Served s = serve_send_queue(qp);
            const Served r = serve_recv_queue(qp);
            served = s == Served::Full || r == Served::Full   ? Served::Full
                     : s == Served::More || r == Served::More ? Served::More
                                                              : Served::Done;
            after = qp.sq.consumed + qp.rq.consumed;
        }
        work += after - before;
        *waiting = Waiting::No;
        if (served == Served::More) {
            wake_queue(ref, *waiting);
        } else if (served == Served::Full) {
            // A doorbell may wake a queue that waits for room (its other queue may have work);
            // listed once, or every doorbell on a full queue would add an entry until the
            // device's next completion.
            *waiting = Waiting::ForRoom;
            if (!*room_listed) waiting_for_room.push_back(ref);
            *room_listed = true;
        }
    }
    return work;
}

bool HostService::Impl::doorbells_pending() const {
    if (!pending.empty()) return true;
    for (const auto& [id, s] : sessions)
        if (s->doorbells && abi::doorbells_waiting(*s->doorbells)) return true;
    return false;
}

size_t HostService::Impl::deliver_cq(HostCq& cq) {
    const uint32_t start = cq.produced;
    bool notify_solicited = false;
    uint32_t room = cq.ring.free_slots(cq.produced);
    bool engine_drained = false;
    while (room > 0) {
        const size_t want = std::min<size_t>(room, wc_scratch.size());
        const int n = engine.poll_cq(cq.handle, std::span(wc_scratch.data(), want));
        if (n <= 0) {
            engine_drained = true;
            break;
        }
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
                c.wr_id = wc.wr_id;  // the engine kept the user's (serve_srq)
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
            c.wqe_index = tp::is_recv(wc.opcode) && qp.srq != 0 ? 0 : index;
            c.completion_ts_ns = now_ns;
            // The engine does not report the SE bit: receives and errors count as solicited.
            if (wc.status != tp::WcStatus::Success || tp::is_recv(wc.opcode)) notify_solicited = true;
            std::memcpy(cq.ring.entry(cq.produced++), &c, sizeof c);
            --room;
        }
        if (static_cast<size_t>(n) < want) {
            engine_drained = true;
            break;
        }
    }
    while (room > 0 && !cq.local.empty()) {
        cq.local.front().completion_ts_ns = now_ns;
        std::memcpy(cq.ring.entry(cq.produced++), &cq.local.front(), sizeof(abi::Cqe));
        cq.local.pop_front();
        notify_solicited = true;
        --room;
    }
    // The ring is full while the engine (or `local`) may hold more: look again on later turns.
    if (!engine_drained || !cq.local.empty()) backlog_cq(cq);
    if (cq.produced == start) return 0;
    cq.ring.publish(cq.produced);
    // Arming (docs/host_interface.md): after publishing, so a client that armed and then
    // polled empty is woken by these entries.
    auto& hdr = cq.ring.header();
    if (abi::take_arm_after_publish(hdr, notify_solicited)) {
        hdr.events.fetch_add(1, std::memory_order_release);
        ++counters.cq_events;
        if (cq.channel_ref) cq.channel_ref->notify();
    }
    return cq.produced - start;
}

size_t HostService::Impl::deliver_completions() {
    size_t delivered = 0;
    engine.take_updated_cqs(updated_cqs);
    for (uint32_t handle : updated_cqs)
        if (auto it = cqs.find(handle); it != cqs.end()) delivered += deliver_cq(*it->second);
    // Full rings, round robin, a bounded number per turn; each goes back on the list if still full.
    for (size_t n = std::min(cq_backlog.size(), kBackloggedCqsPerTurn); n > 0; --n) {
        const uint32_t handle = cq_backlog.front();
        cq_backlog.pop_front();
        const auto it = cqs.find(handle);
        if (it == cqs.end()) continue;
        it->second->backlogged = false;
        delivered += deliver_cq(*it->second);
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
                if (auto it = cqs.find(ev.object); it != cqs.end()) raise_cq_error(*it->second);
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
    if (deferred_sessions == 0) return 0;
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
