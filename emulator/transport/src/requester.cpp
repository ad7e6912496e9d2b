#include "requester.hpp"

#include <algorithm>
#include <cstring>

#include "completer.hpp"
#include "frame_builder.hpp"
#include "sge_copy.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {
namespace {

using namespace rnic::wire;

bool is_send(WrOpcode op) {
    return op == WrOpcode::Send || op == WrOpcode::SendWithImm || op == WrOpcode::SendWithInv;
}
bool is_atomic(WrOpcode op) { return op == WrOpcode::AtomicCmpAndSwp || op == WrOpcode::AtomicFetchAndAdd; }

uint32_t packets_for(uint32_t length, uint32_t mtu) { return std::max<uint32_t>(1, (length + mtu - 1) / mtu); }

}  // namespace

bool Requester::has_work(const QueuePair& qp) const {
    return qp.can_send() && !qp.rnr_deadline && qp.cursor < qp.sq.size();
}

void Requester::rewind(QueuePair& qp, uint32_t psn) {
    for (size_t i = 0; i < qp.sq.size(); ++i) {
        SendWqe& w = qp.sq[i];
        if (!w.psn_assigned || w.npkts == 0) continue;
        if (!psn_in_window(psn, w.first_psn, w.npkts)) continue;
        if (i < qp.cursor || (i == qp.cursor && psn_distance(w.first_psn, psn) < qp.cursor_pkt)) {
            ++qp.counters.retransmits;
        }
        qp.cursor = i;
        qp.cursor_pkt = psn_distance(w.first_psn, psn);
        if (w.wr.opcode == WrOpcode::RdmaRead) w.read_bytes = qp.cursor_pkt * qp.mtu();
        e_.mark_ready(qp);
        return;
    }
}

// Assigns PSNs to a WQE the first time it reaches the head of transmission, once the window,
// the fence and max_rd_atomic allow it; validates its local buffers.
Requester::Step Requester::start_wqe(QueuePair& qp, SendWqe& w) {
    if (qp.state == QpState::Sqd) return Step::Blocked;  // SQD: finish what started, begin nothing
    const WrOpcode op = w.wr.opcode;
    if ((w.wr.send_flags & SendFlag::Fence) && qp.outstanding_rd_atomic > 0) return Step::Blocked;
    if (w.is_read_or_atomic() && qp.outstanding_rd_atomic >= std::max<uint32_t>(1, qp.attr.max_rd_atomic))
        return Step::Blocked;
    if (qp.is_rc() && psn_distance(qp.una_psn, qp.next_psn) >= e_.config_.tuning.max_inflight_packets)
        return Step::Blocked;

    const uint32_t pd = qp.init.pd;
    if (op == WrOpcode::LocalInv) {
        const auto err = e_.memory_->invalidate(w.wr.invalidate_rkey, pd);
        w.done = true;
        w.status = err == mem::AccessError::None ? WcStatus::Success : WcStatus::LocProtErr;
        return Step::Skip;
    }
    // Local buffers: READ responses and atomic results land in them, so those need LOCAL_WRITE.
    const mem::AccessFlags need = (op == WrOpcode::RdmaRead || is_atomic(op)) ? mem::kAccessLocalWrite : 0;
    if (!(w.wr.send_flags & SendFlag::Inline)) {
        for (const Sge& s : w.wr.sg_list) {
            if (e_.memory_->check_access(s.lkey, pd, s.addr, s.length, need, false) != mem::AccessError::None) {
                w.done = true;
                w.status = WcStatus::LocProtErr;
                return Step::Failed;
            }
        }
    }
    w.psn_assigned = true;
    w.first_psn = qp.next_psn;
    w.npkts = is_atomic(op) ? 1 : packets_for(w.length, qp.mtu());
    qp.next_psn = psn_add(qp.next_psn, qp.is_ud() ? 1 : w.npkts);
    if (w.is_read_or_atomic()) ++qp.outstanding_rd_atomic;
    return Step::Sent;
}

bool Requester::gather(QueuePair& qp, const SendWqe& w, uint32_t offset, uint32_t length) {
    payload_.resize(length);
    if (w.wr.send_flags & SendFlag::Inline) {
        std::memcpy(payload_.data(), w.wr.inline_data.data() + offset, length);
        return true;
    }
    return gather_from_sges(*e_.memory_, qp.init.pd, w.wr.sg_list, offset, payload_);
}

uint8_t Requester::opcode_for(const QueuePair& qp, const SendWqe& w, uint32_t pkt) const {
    const WrOpcode op = w.wr.opcode;
    if (qp.is_ud()) return op == WrOpcode::SendWithImm ? wire::op::kUdSendOnlyImm : wire::op::kUdSendOnly;
    const bool only = w.npkts == 1, first = pkt == 0, last = pkt + 1 == w.npkts;
    uint8_t code = 0;
    if (op == WrOpcode::RdmaRead) return wire::op::kRcReadRequest;
    if (op == WrOpcode::AtomicCmpAndSwp) return wire::op::kRcCompareSwap;
    if (op == WrOpcode::AtomicFetchAndAdd) return wire::op::kRcFetchAdd;
    if (is_send(op)) {
        if (op == WrOpcode::SendWithInv && (only || last))
            return only ? wire::op::kRcSendOnlyInv : wire::op::kRcSendLastInv;
        const bool imm = op == WrOpcode::SendWithImm;
        code = only ? (imm ? wire::op::kRcSendOnlyImm : wire::op::kRcSendOnly)
               : first ? wire::op::kRcSendFirst
               : last  ? (imm ? wire::op::kRcSendLastImm : wire::op::kRcSendLast)
                       : wire::op::kRcSendMiddle;
    } else {
        const bool imm = op == WrOpcode::RdmaWriteWithImm;
        code = only ? (imm ? wire::op::kRcWriteOnlyImm : wire::op::kRcWriteOnly)
               : first ? wire::op::kRcWriteFirst
               : last  ? (imm ? wire::op::kRcWriteLastImm : wire::op::kRcWriteLast)
                       : wire::op::kRcWriteMiddle;
    }
    return qp.is_uc() ? static_cast<uint8_t>(code + wire::op::kUcBase) : code;
}

bool Requester::send_packet(QueuePair& qp, SendWqe& w, FrameSink& sink) {
    const uint32_t pkt = qp.cursor_pkt;
    const uint32_t mtu = qp.mtu();
    const WrOpcode op = w.wr.opcode;
    const AddressVector& av = qp.is_ud() ? e_.ahs_.at(w.wr.ah) : qp.attr.ah_attr;
    const uint32_t dest_qpn = qp.is_ud() ? w.wr.remote_qpn : qp.attr.dest_qp_num;
    FrameSpec spec = path_spec(e_.config_, qp, av, dest_qpn);
    spec.bth.opcode = opcode_for(qp, w, pkt);
    spec.bth.psn = psn_add(w.first_psn, pkt);
    const OpcodeInfo& info = opcode_info(spec.bth.opcode);
    const uint32_t offset = pkt * mtu;

    if (op == WrOpcode::RdmaRead) {
        // A resumed READ asks only for what is still missing (IBA 9.7.5.1.3 / C9-78).
        spec.ext.reth = Reth{w.wr.remote_addr + offset, w.wr.rkey, w.length - std::min(offset, w.length)};
    } else if (is_atomic(op)) {
        const bool cas = op == WrOpcode::AtomicCmpAndSwp;
        spec.ext.atomic_eth = AtomicEth{w.wr.remote_addr, w.wr.rkey, cas ? w.wr.swap : w.wr.compare_add,
                                        cas ? w.wr.compare_add : 0};
    } else {
        const uint32_t len = std::min(mtu, w.length - std::min(offset, w.length));
        if (!gather(qp, w, offset, len)) {
            w.done = true;
            w.status = WcStatus::LocProtErr;
            return false;
        }
        spec.payload = payload_;
        if (info.has(kExtReth)) spec.ext.reth = Reth{w.wr.remote_addr, w.wr.rkey, w.length};
        if (info.has(kExtImmDt)) spec.ext.immdt = ImmDt{w.wr.imm_data};
        if (info.has(kExtIeth)) spec.ext.ieth = Ieth{w.wr.invalidate_rkey};
        if (info.has(kExtDeth)) {
            // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
            const uint32_t qkey = (w.wr.remote_qkey & 0x80000000u) ? qp.attr.qkey : w.wr.remote_qkey;
            spec.ext.deth = Deth{qkey, 0, qp.qpn};
        }
        spec.bth.solicited = info.ends_message() && (w.wr.send_flags & SendFlag::Solicited);
    }
    if (qp.is_rc()) {
        const uint32_t interval = e_.config_.tuning.ack_request_interval;
        spec.bth.ack_req = info.ends_message() || op == WrOpcode::RdmaRead || is_atomic(op) ||
                           (interval != 0 && (pkt + 1) % interval == 0);
    }
    if (!emit_frame(sink, spec)) return false;
    ++qp.counters.tx_packets;
    qp.counters.tx_bytes += spec.payload.size();
    return true;
}

size_t Requester::emit(QueuePair& qp, FrameSink& sink, size_t budget) {
    size_t sent = 0;
    while (sent < budget && has_work(qp)) {
        SendWqe& w = qp.sq[qp.cursor];
        if (w.done) {  // completed out of band (LOCAL_INV) but not yet retired
            ++qp.cursor;
            qp.cursor_pkt = 0;
            continue;
        }
        if (!w.psn_assigned) {
            const Step s = start_wqe(qp, w);
            if (s == Step::Blocked) break;
            if (s == Step::Skip) {
                ++qp.cursor;
                qp.cursor_pkt = 0;
                e_.completer_->retire(qp);
                continue;
            }
            if (s == Step::Failed) {
                e_.completer_->fail(qp);
                break;
            }
        }
        const uint32_t psn = psn_add(w.first_psn, qp.cursor_pkt);
        const bool resend = qp.sent_any && psn_before_or_equal(psn, qp.highest_sent_psn);
        if (!send_packet(qp, w, sink)) {
            if (w.done) e_.completer_->fail(qp);
            break;
        }
        if (resend) {
            ++qp.counters.retransmitted_packets;
        } else {
            qp.highest_sent_psn = w.wr.opcode == WrOpcode::RdmaRead ? w.last_psn() : psn;
            qp.sent_any = true;
        }
        ++sent;
        // One READ request covers all its response PSNs.
        qp.cursor_pkt = w.wr.opcode == WrOpcode::RdmaRead ? w.npkts : qp.cursor_pkt + 1;
        if (qp.cursor_pkt >= w.npkts) {
            w.sent = true;
            ++qp.cursor;
            qp.cursor_pkt = 0;
            if (!qp.is_rc()) {  // UC and UD complete once on the wire (IBA 9.8.3, 9.8.4)
                w.done = true;
                e_.completer_->retire(qp);
            }
        }
        if (qp.is_rc() && !qp.retransmit_deadline) e_.completer_->arm_timer(qp);
    }
    return sent;
}

}  // namespace rnic::transport
