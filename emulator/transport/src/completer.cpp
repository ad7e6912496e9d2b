#include "completer.hpp"

#include <algorithm>
#include <cstring>

#include "engine_core.hpp"
#include "frame_builder.hpp"
#include "rnic/wire/aeth.hpp"
#include "rnic/wire/psn.hpp"
#include "sge_copy.hpp"

namespace rnic::transport {

using namespace rnic::wire;

namespace {

bool before(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a - b) < 0;
}

}  // namespace

void Completer::advance_ack_cursor(QueuePair& qp) noexcept {
    uint32_t& c = qp.comp.ack_cursor;
    if (before(c, qp.sq.head())) c = qp.sq.head();
    while (c != qp.sq.tail() && qp.sq.at(c).finished()) ++c;
}

SendWqe* Completer::wqe_at(QueuePair& qp, uint32_t psn, uint32_t* where) {
    advance_ack_cursor(qp);
    for (uint32_t pos = qp.comp.ack_cursor; pos != qp.sq.tail(); ++pos) {
        SendWqe& w = qp.sq.at(pos);
        if (!w.started()) break;  // PSNs are assigned in queue order
        if (w.finished() || w.npkts == 0 || !psn_in_window(psn, w.first_psn, w.npkts)) continue;
        if (where) *where = pos;
        return &w;
    }
    return nullptr;
}

void Completer::arm_timer(QueuePair& qp) {
    const uint64_t t = ack_timeout_ns(qp.attr.timeout);
    if (t == 0 || qp.comp.una_psn == qp.req.next_psn) {
        core_.cancel(qp.comp.retransmit);
        return;
    }
    core_.arm(qp.comp.retransmit, core_.now + t);
}

// Forward progress resets the retry budget (IBA 9.7.6.1.3: retry_cnt counts consecutive
// failures) and restarts the ACK timer.
void Completer::progress(QueuePair& qp) {
    qp.comp.retry_left = qp.attr.retry_cnt;
    qp.comp.rnr_retry_left = qp.attr.rnr_retry;
    qp.comp.read_gap_reported = false;
    qp.comp.rnr_nak_pending = false;
    arm_timer(qp);
}

bool Completer::ack_through(QueuePair& qp, uint32_t psn) {
    CompleterState& c = qp.comp;
    // Only PSNs inside the outstanding window mean anything; older ones are stale duplicates.
    if (!psn_in_window(psn, c.una_psn, psn_distance(c.una_psn, qp.req.next_psn))) return true;
    bool complete_data = true;
    uint32_t new_una = psn_add(psn, 1);
    advance_ack_cursor(qp);
    for (uint32_t pos = c.ack_cursor; pos != qp.sq.tail(); ++pos) {
        SendWqe& w = qp.sq.at(pos);
        if (!w.started()) break;
        if (w.finished() || w.npkts == 0) continue;
        if (psn_after(w.first_psn, psn)) break;
        if (w.info().read_or_atomic()) {
            // An ACK beyond a READ/atomic whose response never came: the response was lost
            // (IBA 9.7.5.1.6, implied NAK). Everything before it is acknowledged.
            new_una = psn_add(w.first_psn, w.read_bytes / qp.mtu());
            complete_data = false;
            break;
        }
        if (!psn_before_or_equal(w.last_psn(), psn)) break;
        w.state = WqeState::Done;
    }
    advance_ack_cursor(qp);
    if (psn_after(new_una, c.una_psn)) {
        c.una_psn = new_una;
        progress(qp);
    }
    return complete_data;
}

void Completer::ack_before(QueuePair& qp, uint32_t pos) {
    for (uint32_t p = qp.comp.ack_cursor; p != pos; ++p) {
        SendWqe& prior = qp.sq.at(p);
        if (prior.started() && !prior.finished() && !prior.info().read_or_atomic()) prior.state = WqeState::Done;
    }
}

void Completer::on_response(QueuePair& qp, const RoceFrame& f) {
    if (!qp.is_rc() || !(qp.state == QpState::Rts || qp.state == QpState::Sqd || qp.state == QpState::Sqe)) return;
    // Nothing outstanding, or a response for a PSN never sent: a ghost (IBA C9-176), dropped.
    if (qp.req.next_psn == qp.comp.una_psn || !psn_before(f.bth.psn, qp.req.next_psn)) return;
    // A landing waits for an on-demand page: the responses behind the dropped one are dropped too
    // (not seen as a gap to ask again for); the READ is asked for again on resume (odp_wait.cpp).
    if (qp.odp.parked && qp.odp.waits(OdpSide::Landing) && f.info->kind != OpKind::Acknowledge) return;
    switch (f.info->kind) {
        case OpKind::Acknowledge:
            on_ack(qp, f);
            break;
        case OpKind::RdmaReadResponse:
            on_read_response(qp, f);
            break;
        case OpKind::AtomicAcknowledge:
            on_atomic_ack(qp, f);
            break;
        default:
            break;
    }
    retire(qp);
}

void Completer::on_ack(QueuePair& qp, const RoceFrame& f) {
    const uint32_t psn = f.bth.psn;
    const AethSyndrome syn = AethSyndrome::decode(f.ext.aeth->syndrome);
    CompleterState& c = qp.comp;
    switch (syn.type) {
        case AckType::Ack:
            ++qp.counters.acks_received;
            if (!ack_through(qp, psn) && !c.read_gap_reported) {
                ++qp.counters.implied_nak_seq_err;
                c.read_gap_reported = true;
                retry(qp, c.una_psn, WcStatus::RetryExcErr);
            }
            break;
        case AckType::RnrNak: {
            ++qp.counters.rnr_naks_received;
            ack_through(qp, psn_add(psn, kPsnMask));  // everything before psn
            if (psn != c.una_psn) break;              // stale
            // rnr_retry 7 means retry forever (IBA 9.7.5.2.8).
            if (qp.attr.rnr_retry != 7) {
                if (c.rnr_retry_left == 0) {
                    ++qp.counters.rnr_nak_retry_err;
                    fail_at(qp, psn, WcStatus::RnrRetryExcErr);
                    return;
                }
                --c.rnr_retry_left;
            }
            c.rnr_nak_pending = true;
            core_.arm(c.rnr, core_.now + rnr_timer_ns(syn.value));
            core_.cancel(c.retransmit);
            core_.requester.rewind(qp, psn);
            break;
        }
        case AckType::Nak:
            ack_through(qp, psn_add(psn, kPsnMask));
            if (psn != c.una_psn) break;
            switch (syn.nak_code()) {
                case NakCode::PsnSequenceError:
                    on_sequence_nak(qp, psn);
                    break;
                case NakCode::InvalidRequest:
                    ++qp.counters.remote_invalid_request_errors;
                    fail_at(qp, psn, WcStatus::RemInvReqErr);
                    break;
                case NakCode::RemoteAccessError:
                    ++qp.counters.remote_access_errors;
                    fail_at(qp, psn, WcStatus::RemAccessErr);
                    break;
                default:
                    ++qp.counters.remote_operational_errors;
                    fail_at(qp, psn, WcStatus::RemOpErr);
                    break;
            }
            break;
        case AckType::Reserved:
            break;
    }
}

void Completer::on_read_response(QueuePair& qp, const RoceFrame& f) {
    const uint32_t psn = f.bth.psn;
    CompleterState& c = qp.comp;
    if (psn != c.una_psn) {
        // Responses arrive in order; a later PSN means one was lost: ask again from the gap,
        // once per gap (IBA 9.7.5.1.6). Earlier PSNs are duplicates of responses already used.
        if (psn_after(psn, c.una_psn) && !c.read_gap_reported) {
            ++qp.counters.implied_nak_seq_err;
            c.read_gap_reported = true;
            retry(qp, c.una_psn, WcStatus::RetryExcErr);
        }
        return;
    }
    uint32_t pos = 0;
    SendWqe* w = wqe_at(qp, psn, &pos);
    if (!w) return;
    const WrClass kind = w->info().kind;
    if (kind != WrClass::Read && kind != WrClass::AtomicWrite && kind != WrClass::Flush) return;
    if (f.ext.aeth && AethSyndrome::decode(f.ext.aeth->syndrome).type != AckType::Ack) return;
    ack_before(qp, pos);
    if (kind != WrClass::Read) {
        // ATOMIC WRITE and FLUSH are answered by one READ RESPONSE ONLY without payload
        // (IBTA 1.5, as rxe answers them).
        if (f.info->segment != Segment::Only || !f.payload.empty()) {
            fail_at(qp, psn, WcStatus::BadRespErr);
            return;
        }
        w->state = WqeState::Done;
        --qp.req.outstanding_rd_atomic;
        c.una_psn = psn_add(psn, 1);
        core_.mark_ready(qp);
        progress(qp);
        return;
    }
    const uint32_t offset = psn_distance(w->first_psn, psn) * qp.mtu();
    const uint32_t expected = std::min(qp.mtu(), w->length - std::min(offset, w->length));
    const bool last = f.info->ends_message();
    // Every packet but the last carries exactly one MTU (IBA C9-176 length checks).
    if ((last ? f.payload.size() != expected : f.payload.size() != qp.mtu()) || offset + f.payload.size() > w->length) {
        fail_at(qp, psn, WcStatus::BadRespErr);
        return;
    }
    if (!place(qp, pos, psn, offset, f.payload)) return;
    w->read_bytes = offset + static_cast<uint32_t>(f.payload.size());
    c.una_psn = psn_add(psn, 1);
    if (last) {
        if (psn != w->last_psn()) {
            fail_at(qp, psn, WcStatus::BadRespErr);
            return;
        }
        w->state = WqeState::Done;
        --qp.req.outstanding_rd_atomic;
        core_.mark_ready(qp);  // max_rd_atomic or a fence may have been waiting on it
    }
    progress(qp);
}

void Completer::on_atomic_ack(QueuePair& qp, const RoceFrame& f) {
    const uint32_t psn = f.bth.psn;
    if (psn != qp.comp.una_psn) return;
    uint32_t pos = 0;
    SendWqe* w = wqe_at(qp, psn, &pos);
    if (!w || w->info().kind != WrClass::Atomic) return;
    if (AethSyndrome::decode(f.ext.aeth->syndrome).type != AckType::Ack) return;
    ack_before(qp, pos);
    // The original value lands in the local buffer in host byte order, as rxe and mlx5 do.
    const uint64_t original = f.ext.atomic_ack_eth->original;
    uint8_t bytes[8];
    std::memcpy(bytes, &original, 8);
    if (!place(qp, pos, psn, 0, bytes)) return;
    w->state = WqeState::Done;
    --qp.req.outstanding_rd_atomic;
    qp.comp.una_psn = psn_add(psn, 1);
    core_.mark_ready(qp);
    progress(qp);
}

bool Completer::place(QueuePair& qp, uint32_t pos, uint32_t psn, uint32_t offset, std::span<const uint8_t> data) {
    const SgeCopy r = scatter_to_sges(*core_.memory, qp.init.pd, qp.sq.sges(pos), offset, data);
    if (r == SgeCopy::Ok) {
        core_.odp_done(qp, OdpSide::Landing);
        return true;
    }
    // An on-demand page of the local buffer is not there yet: the response is dropped (not
    // consumed, una_psn stays) and the QP parked; on resume the READ is asked for again from
    // this PSN (an atomic is answered again from the responder's saved result, C9-140).
    if (r == SgeCopy::Pending && core_.odp_wait(qp, OdpSide::Landing)) {
        core_.odp_park(qp);
        return false;
    }
    fail_at(qp, psn, WcStatus::LocProtErr);
    return false;
}

void Completer::retry(QueuePair& qp, uint32_t psn, WcStatus exhausted) {
    if (qp.comp.retry_left == 0) {
        fail_at(qp, psn, exhausted);
        return;
    }
    --qp.comp.retry_left;
    core_.requester.rewind(qp, psn);
    arm_timer(qp);
}

void Completer::on_timeout(QueuePair& qp) {
    if (qp.comp.una_psn == qp.req.next_psn || !qp.is_rc()) return;
    // Waiting for our own memory is no loss: the READ is asked for again on resume, and the
    // wait has its own bound (odp_wait.cpp). Not charged to retry_cnt.
    if (qp.odp.parked && qp.odp.waits(OdpSide::Landing)) {
        arm_timer(qp);
        return;
    }
    ++qp.counters.local_ack_timeout_err;
    retry(qp, qp.comp.una_psn, WcStatus::RetryExcErr);
}

void Completer::on_rnr_timer(QueuePair& qp) {
    arm_timer(qp);
    core_.mark_ready(qp);
}

void Completer::fail_at(QueuePair& qp, uint32_t psn, WcStatus status) {
    if (SendWqe* w = wqe_at(qp, psn)) w->fail(status);
    fail(qp);
}

void Completer::fail(QueuePair& qp) {
    retire(qp);  // successes before the failed WQE complete normally
    core_.move_to_send_queue_error(qp);
}

void Completer::retire(QueuePair& qp) {
    SendQueue& sq = qp.sq;
    while (!sq.empty() && sq.at(sq.head()).finished()) {
        const SendWqe& w = sq.at(sq.head());
        if (w.state == WqeState::Failed) break;  // left for the error flush, which reports it
        const bool signaled = qp.init.sq_sig_all || (w.send_flags & SendFlag::Signaled);
        if (signaled) {
            WorkCompletion wc;
            wc.wr_id = w.wr_id;
            wc.status = WcStatus::Success;
            wc.opcode = w.info().completes_as;
            wc.qp_num = qp.qpn;
            if (w.info().kind == WrClass::Read) wc.byte_len = w.length;
            if (w.info().kind == WrClass::Atomic || w.info().kind == WrClass::AtomicWrite) wc.byte_len = 8;
            if (w.info().kind == WrClass::Flush) wc.byte_len = w.length;
            core_.complete(qp, qp.init.send_cq, wc);
        } else {
            ++core_.room_seq;
        }
        sq.pop_front();
    }
    // A late ACK can finish WQEs the requester was about to resend after a rewind.
    if (before(qp.req.cursor, sq.head())) {
        qp.req.cursor = sq.head();
        qp.req.cursor_pkt = 0;
    }
    if (before(qp.comp.ack_cursor, sq.head())) qp.comp.ack_cursor = sq.head();
    // SQD: once nothing started is outstanding, the drain is over (IBA 10.3.1 SQ Drain).
    if (qp.state == QpState::Sqd && qp.attr.en_sqd_async_notify && qp.comp.una_psn == qp.req.next_psn &&
        !qp.comp.sqd_notified) {
        qp.comp.sqd_notified = true;
        core_.raise_event(EventType::SqDrained, qp.qpn);
    }
}

}  // namespace rnic::transport
