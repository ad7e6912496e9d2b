#include "completer.hpp"

#include <algorithm>
#include <cstring>

#include "frame_builder.hpp"
#include "requester.hpp"
#include "sge_copy.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/wire/aeth.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {

using namespace rnic::wire;

SendWqe* Completer::wqe_at(QueuePair& qp, uint32_t psn) {
    for (SendWqe& w : qp.sq)
        if (w.psn_assigned && w.npkts && psn_in_window(psn, w.first_psn, w.npkts)) return &w;
    return nullptr;
}

void Completer::arm_timer(QueuePair& qp) {
    const uint64_t t = ack_timeout_ns(qp.attr.timeout);
    if (t == 0 || qp.una_psn == qp.next_psn) {
        qp.retransmit_deadline.reset();
        return;
    }
    qp.retransmit_deadline = e_.now_ + t;
}

// Forward progress resets the retry budget (IBA 9.7.6.1.3: retry_cnt counts consecutive
// failures) and restarts the ACK timer.
void Completer::progress(QueuePair& qp) {
    qp.retry_left = qp.attr.retry_cnt;
    qp.rnr_retry_left = qp.attr.rnr_retry;
    qp.read_gap_reported = false;
    qp.retransmit_deadline.reset();
    arm_timer(qp);
}

bool Completer::ack_through(QueuePair& qp, uint32_t psn) {
    // Only PSNs inside the outstanding window mean anything; older ones are stale duplicates.
    if (!psn_in_window(psn, qp.una_psn, psn_distance(qp.una_psn, qp.next_psn))) return true;
    bool complete_data = true;
    uint32_t new_una = psn_add(psn, 1);
    for (SendWqe& w : qp.sq) {
        if (!w.psn_assigned || w.done || w.npkts == 0) continue;
        if (psn_after(w.first_psn, psn)) break;
        if (w.is_read_or_atomic()) {
            // An ACK beyond a READ/atomic whose response never came: the response was lost
            // (IBA 9.7.5.1.6, implied NAK). Everything before it is acknowledged.
            new_una = psn_add(w.first_psn, w.read_bytes / qp.mtu());
            complete_data = false;
            break;
        }
        if (psn_before_or_equal(w.last_psn(), psn)) w.done = true;
    }
    if (psn_after(new_una, qp.una_psn) || !complete_data) {
        if (psn_after(new_una, qp.una_psn)) {
            qp.una_psn = new_una;
            progress(qp);
        }
    }
    return complete_data;
}

void Completer::on_response(QueuePair& qp, const RoceFrame& f) {
    if (!qp.is_rc() || !(qp.state == QpState::Rts || qp.state == QpState::Sqd || qp.state == QpState::Sqe)) return;
    // A response for a PSN never sent is a ghost (IBA C9-176): drop it.
    if (!psn_before(f.bth.psn, qp.next_psn) && qp.next_psn != qp.una_psn) return;
    if (qp.next_psn == qp.una_psn) return;
    switch (f.info->kind) {
        case OpKind::Acknowledge: on_ack(qp, f); break;
        case OpKind::RdmaReadResponse: on_read_response(qp, f); break;
        case OpKind::AtomicAcknowledge: on_atomic_ack(qp, f); break;
        default: break;
    }
    retire(qp);
}

void Completer::on_ack(QueuePair& qp, const RoceFrame& f) {
    const uint32_t psn = f.bth.psn;
    const AethSyndrome syn = AethSyndrome::decode(f.ext.aeth->syndrome);
    switch (syn.type) {
        case AckType::Ack:
            ++qp.counters.acks_received;
            if (!ack_through(qp, psn) && !qp.read_gap_reported) {
                ++qp.counters.implied_nak_seq_err;
                qp.read_gap_reported = true;
                retry(qp, qp.una_psn, WcStatus::RetryExcErr);
            }
            break;
        case AckType::RnrNak: {
            ++qp.counters.rnr_naks_received;
            ack_through(qp, psn_add(psn, kPsnMask));  // everything before psn
            if (psn != qp.una_psn) break;  // stale
            // rnr_retry 7 means retry forever (IBA 9.7.5.2.8).
            if (qp.attr.rnr_retry != 7) {
                if (qp.rnr_retry_left == 0) {
                    ++qp.counters.rnr_nak_retry_err;
                    fail_at(qp, psn, WcStatus::RnrRetryExcErr);
                    return;
                }
                --qp.rnr_retry_left;
            }
            qp.rnr_deadline = e_.now_ + rnr_timer_ns(syn.value);
            qp.retransmit_deadline.reset();
            e_.requester_->rewind(qp, psn);
            break;
        }
        case AckType::Nak:
            ack_through(qp, psn_add(psn, kPsnMask));
            if (psn != qp.una_psn) break;
            switch (syn.nak_code()) {
                case NakCode::PsnSequenceError:
                    ++qp.counters.seq_naks_received;
                    ++qp.counters.packet_seq_err;
                    retry(qp, psn, WcStatus::RetryExcErr);
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
    if (psn != qp.una_psn) {
        // Responses arrive in order; a later PSN means one was lost: ask again from the gap,
        // once per gap (IBA 9.7.5.1.6). Earlier PSNs are duplicates of responses already used.
        if (psn_after(psn, qp.una_psn) && !qp.read_gap_reported) {
            ++qp.counters.implied_nak_seq_err;
            qp.read_gap_reported = true;
            retry(qp, qp.una_psn, WcStatus::RetryExcErr);
        }
        return;
    }
    SendWqe* w = wqe_at(qp, psn);
    if (!w || w->wr.opcode != WrOpcode::RdmaRead || w->done) return;
    if (f.ext.aeth && AethSyndrome::decode(f.ext.aeth->syndrome).type != AckType::Ack) return;
    // Everything before this READ is implicitly acknowledged by its response.
    for (SendWqe& prior : qp.sq) {
        if (&prior == w) break;
        if (prior.psn_assigned && !prior.is_read_or_atomic()) prior.done = true;
    }
    const uint32_t offset = psn_distance(w->first_psn, psn) * qp.mtu();
    const uint32_t expected = std::min(qp.mtu(), w->length - std::min(offset, w->length));
    const bool last = f.info->ends_message();
    // Every packet but the last carries exactly one MTU (IBA C9-176 length checks).
    if ((last ? f.payload.size() != expected : f.payload.size() != qp.mtu()) ||
        offset + f.payload.size() > w->length) {
        fail_at(qp, psn, WcStatus::BadRespErr);
        return;
    }
    if (!place(qp, *w, offset, f.payload)) {
        fail_at(qp, psn, WcStatus::LocProtErr);
        return;
    }
    w->read_bytes = offset + static_cast<uint32_t>(f.payload.size());
    qp.una_psn = psn_add(psn, 1);
    if (last) {
        if (psn != w->last_psn()) {
            fail_at(qp, psn, WcStatus::BadRespErr);
            return;
        }
        w->done = true;
        --qp.outstanding_rd_atomic;
        e_.mark_ready(qp);  // max_rd_atomic or a fence may have been waiting on it
    }
    progress(qp);
}

void Completer::on_atomic_ack(QueuePair& qp, const RoceFrame& f) {
    const uint32_t psn = f.bth.psn;
    if (psn != qp.una_psn) return;
    SendWqe* w = wqe_at(qp, psn);
    if (!w || w->done || !(w->wr.opcode == WrOpcode::AtomicCmpAndSwp || w->wr.opcode == WrOpcode::AtomicFetchAndAdd))
        return;
    if (AethSyndrome::decode(f.ext.aeth->syndrome).type != AckType::Ack) return;
    for (SendWqe& prior : qp.sq) {
        if (&prior == w) break;
        if (prior.psn_assigned && !prior.is_read_or_atomic()) prior.done = true;
    }
    // The original value lands in the local buffer in host byte order, as rxe and mlx5 do.
    const uint64_t original = f.ext.atomic_ack_eth->original;
    uint8_t bytes[8];
    std::memcpy(bytes, &original, 8);
    if (!place(qp, *w, 0, bytes)) {
        fail_at(qp, psn, WcStatus::LocProtErr);
        return;
    }
    w->atomic_original = original;
    w->done = true;
    --qp.outstanding_rd_atomic;
    qp.una_psn = psn_add(psn, 1);
    e_.mark_ready(qp);
    progress(qp);
}

bool Completer::place(QueuePair& qp, const SendWqe& w, uint32_t offset, std::span<const uint8_t> data) {
    return scatter_to_sges(*e_.memory_, qp.init.pd, w.wr.sg_list, offset, data);
}

void Completer::retry(QueuePair& qp, uint32_t psn, WcStatus exhausted) {
    if (qp.retry_left == 0) {
        fail_at(qp, psn, exhausted);
        return;
    }
    --qp.retry_left;
    e_.requester_->rewind(qp, psn);
    arm_timer(qp);
}

void Completer::on_timer(QueuePair& qp, uint64_t now) {
    if (!qp.retransmit_deadline || *qp.retransmit_deadline > now) return;
    qp.retransmit_deadline.reset();
    if (qp.una_psn == qp.next_psn || !qp.is_rc()) return;
    retry(qp, qp.una_psn, WcStatus::RetryExcErr);
}

void Completer::fail_at(QueuePair& qp, uint32_t psn, WcStatus status) {
    if (SendWqe* w = wqe_at(qp, psn)) {
        w->done = true;
        w->status = status;
    }
    fail(qp);
}

void Completer::fail(QueuePair& qp) {
    retire(qp);  // successes before the failed WQE complete normally
    e_.move_to_send_queue_error(qp);
}

void Completer::retire(QueuePair& qp) {
    while (!qp.sq.empty() && qp.sq.front().done) {
        SendWqe& w = qp.sq.front();
        if (w.status != WcStatus::Success) return;  // left for the error flush, which reports it
        const bool signaled = qp.init.sq_sig_all || (w.wr.send_flags & SendFlag::Signaled);
        if (signaled) {
            WorkCompletion wc;
            wc.wr_id = w.wr.wr_id;
            wc.status = WcStatus::Success;
            wc.opcode = wc_opcode_for(w.wr.opcode).value_or(WcOpcode::Send);
            wc.qp_num = qp.qpn;
            if (w.wr.opcode == WrOpcode::RdmaRead) wc.byte_len = w.length;
            if (w.wr.opcode == WrOpcode::AtomicCmpAndSwp || w.wr.opcode == WrOpcode::AtomicFetchAndAdd)
                wc.byte_len = 8;
            e_.complete(qp, qp.init.send_cq, wc);
        }
        qp.sq.pop_front();
        if (qp.cursor > 0) --qp.cursor;
        else qp.cursor_pkt = 0;
    }
    // SQD: once nothing started is outstanding, the drain is over (IBA 10.3.1 SQ Drain).
    if (qp.state == QpState::Sqd && qp.attr.en_sqd_async_notify && qp.una_psn == qp.next_psn && !qp.sqd_notified) {
        qp.sqd_notified = true;
        e_.raise_event(EventType::SqDrained, qp.qpn);
    }
}

}  // namespace rnic::transport
