#include "requester.hpp"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "engine_core.hpp"
#include "frame_builder.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/psn.hpp"
#include "sge_copy.hpp"

namespace rnic::transport {
namespace {

using namespace rnic::wire;

uint32_t packets_for(uint32_t length, uint32_t mtu) {
    return std::max<uint32_t>(1, (length + mtu - 1) / mtu);
}

// Position a comes before position b in the send queue (free-running counters).
bool before(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a - b) < 0;
}

}  // namespace

void Requester::next_wqe(QueuePair& qp) noexcept {
    ++qp.req.cursor;
    qp.req.cursor_pkt = 0;
}

void Requester::ask_again(QueuePair& qp) {
    if (!qp.is_rc() || qp.req.packets_without_ack_request == 0 || !qp.req.sent_any) return;
    if (qp.comp.una_psn == qp.req.next_psn) return;  // everything is acknowledged already
    rewind(qp, qp.req.highest_sent_psn);
}

void Requester::rewind(QueuePair& qp, uint32_t psn) {
    // Only WQEs the peer has not acknowledged can hold `psn`: start at the oldest of them.
    for (uint32_t pos = qp.comp.ack_cursor; pos != qp.sq.tail(); ++pos) {
        SendWqe& w = qp.sq.at(pos);
        if (!w.started()) return;
        if (w.npkts == 0 || !psn_in_window(psn, w.first_psn, w.npkts)) continue;
        const uint32_t pkt = psn_distance(w.first_psn, psn);
        if (before(pos, qp.req.cursor) || (pos == qp.req.cursor && pkt < qp.req.cursor_pkt)) ++qp.counters.retransmits;
        qp.req.cursor = pos;
        qp.req.cursor_pkt = pkt;
        if (w.opcode == WrOpcode::RdmaRead) w.read_bytes = pkt * qp.mtu();
        core_.mark_ready(qp);
        return;
    }
}

// Assigns PSNs to a WQE the first time it reaches the head of transmission, once the window,
// the fence and max_rd_atomic allow it; validates its local buffers.
Requester::Step Requester::start_wqe(QueuePair& qp, SendWqe& w, uint32_t pos) {
    if (qp.state == QpState::Sqd) return Step::Blocked;  // SQD: finish what started, begin nothing
    const WrInfo& info = w.info();
    if ((w.send_flags & SendFlag::Fence) && qp.req.outstanding_rd_atomic > 0) return Step::Blocked;
    if (info.read_or_atomic() && qp.req.outstanding_rd_atomic >= std::max<uint32_t>(1, qp.attr.max_rd_atomic))
        return Step::Blocked;
    if (qp.is_rc() && psn_distance(qp.comp.una_psn, qp.req.next_psn) >= core_.config.tuning.max_inflight_packets)
        return Step::Blocked;

    const uint32_t pd = qp.init.pd;
    if (info.kind == WrClass::LocalInv || info.kind == WrClass::BindMw) return local_operation(qp, w);
    // Local buffers: READ responses and atomic results land in them, so those need LOCAL_WRITE.
    const mem::AccessFlags need = info.writes_local() ? mem::kAccessLocalWrite : 0;
    if (!(w.send_flags & SendFlag::Inline)) {
        for (const Sge& s : qp.sq.sges(pos)) {
            if (core_.memory->check_access(s.lkey, pd, s.addr, s.length, need, false) != mem::AccessError::None) {
                w.fail(WcStatus::LocProtErr);
                return Step::Failed;
            }
        }
    }
    w.state = WqeState::Started;
    w.first_psn = qp.req.next_psn;
    w.npkts = info.single_packet() ? 1 : packets_for(w.length, qp.mtu());
    qp.req.next_psn = psn_add(qp.req.next_psn, qp.is_ud() ? 1 : w.npkts);
    if (info.read_or_atomic()) ++qp.req.outstanding_rd_atomic;
    return Step::Started;
}

// LOCAL_INV and BIND_MW change the protection table and complete at once; a refused one completes
// with rxe's status (LOCAL_INV: IBV_WC_LOC_QP_OP_ERR, BIND_MW: IBV_WC_MW_BIND_ERR) and, as in
// rxe's requester, takes the QP to the error state.
Requester::Step Requester::local_operation(QueuePair& qp, SendWqe& w) {
    if (w.info().kind == WrClass::LocalInv) {
        if (core_.memory->invalidate(w.invalidate_rkey, qp.init.pd) != mem::AccessError::None) {
            w.fail(WcStatus::LocQpOpErr);
            return Step::Failed;
        }
    } else {
        mem::MwBind b;
        b.mw_rkey = w.bind.mw_rkey;
        b.new_rkey = w.rkey;
        b.mr_lkey = w.bind.mr_lkey;
        b.addr = w.bind.addr;
        b.length = w.bind.length;
        b.access = w.bind.access;
        if (core_.memory->bind_mw(b, qp.init.pd, qp.qpn) != 0) {
            w.fail(WcStatus::MwBindErr);
            return Step::Failed;
        }
    }
    w.state = WqeState::Done;
    return Step::Skip;
}

uint8_t Requester::opcode_for(const QueuePair& qp, const SendWqe& w, uint32_t pkt) const noexcept {
    const WrInfo& info = w.info();
    if (qp.is_ud()) return info.with_imm ? wire::op::kUdSendOnlyImm : wire::op::kUdSendOnly;
    switch (info.kind) {
        case WrClass::Read:
            return wire::op::kRcReadRequest;
        case WrClass::Atomic:
            return w.opcode == WrOpcode::AtomicCmpAndSwp ? wire::op::kRcCompareSwap : wire::op::kRcFetchAdd;
        case WrClass::AtomicWrite:
            return wire::op::kRcAtomicWrite;
        case WrClass::Flush:
            return wire::op::kRcFlush;
        default:
            break;
    }
    const bool only = w.npkts == 1, first = pkt == 0, last = pkt + 1 == w.npkts;
    uint8_t code = 0;
    if (info.kind == WrClass::Send) {
        if (info.with_inv && (only || last)) return only ? wire::op::kRcSendOnlyInv : wire::op::kRcSendLastInv;
        code = only    ? (info.with_imm ? wire::op::kRcSendOnlyImm : wire::op::kRcSendOnly)
               : first ? wire::op::kRcSendFirst
               : last  ? (info.with_imm ? wire::op::kRcSendLastImm : wire::op::kRcSendLast)
                       : wire::op::kRcSendMiddle;
    } else {
        code = only    ? (info.with_imm ? wire::op::kRcWriteOnlyImm : wire::op::kRcWriteOnly)
               : first ? wire::op::kRcWriteFirst
               : last  ? (info.with_imm ? wire::op::kRcWriteLastImm : wire::op::kRcWriteLast)
                       : wire::op::kRcWriteMiddle;
    }
    return qp.is_uc() ? static_cast<uint8_t>(code + wire::op::kUcBase) : code;
}

// A message's last packet may leave the ACK request to a later message (IBA 9.7.5.1.1: the
// responder acknowledges AckReq packets and may cover earlier ones with one ACK). Only when that
// later message is already queued and will be sent without waiting for an ACK: the QP is in RTS,
// the window stays far from full, and fewer than ack_request_coalesce packets in a row went
// without a request. A QP moved to SQD meanwhile asks again for its last packet (ask_again()). A message
// with nothing queued behind it always asks, so a ping-pong's latency is untouched and the last
// packet of a burst is acknowledged at once. Halves to tenths the ACKs of a stream of small
// messages: a frame, a sendto() and a wake-up on each side per ACK saved.
bool Requester::coalesced_ack_request(const QueuePair& qp, uint32_t pos) const noexcept {
    const uint32_t limit = core_.config.tuning.ack_request_coalesce;
    if (limit <= 1 || qp.req.packets_without_ack_request + 1 >= limit) return false;
    // The next message's payload waits for an on-demand page: it may not go out soon.
    if (qp.odp.waiting != 0 && qp.odp.waits(OdpSide::Gather)) return false;
    if (qp.state != QpState::Rts || pos + 1 == qp.sq.tail()) return false;
    if (psn_distance(qp.comp.una_psn, qp.req.next_psn) >= core_.config.tuning.max_inflight_packets / 2) return false;
    const SendWqe& next = qp.sq.at(pos + 1);
    // A READ or atomic behind may be held by max_rd_atomic, and a fenced WQE by the READs before
    // it: the messages before must not wait for them. LOCAL_INV and BIND_MW send nothing.
    const WrInfo& info = next.info();
    return !info.read_or_atomic() && !(next.send_flags & SendFlag::Fence) && info.kind != WrClass::LocalInv &&
           info.kind != WrClass::BindMw;
}

Requester::Sent Requester::send_packet(QueuePair& qp, SendWqe& w, uint32_t pos, FrameSink& sink) {
    const uint32_t pkt = qp.req.cursor_pkt;
    const uint32_t mtu = qp.mtu();
    const WrInfo& wr = w.info();
    const AddressVector& av = qp.is_ud() ? w.av : qp.attr.ah_attr;
    const uint32_t dest_qpn = qp.is_ud() ? w.remote_qpn : qp.attr.dest_qp_num;
    FrameSpec spec = path_spec(core_.config, qp, av, dest_qpn);
    spec.bth.opcode = opcode_for(qp, w, pkt);
    spec.bth.psn = psn_add(w.first_psn, pkt);
    const OpcodeInfo& info = opcode_info(spec.bth.opcode);
    const uint32_t offset = pkt * mtu;
    uint32_t payload = 0;

    if (wr.kind == WrClass::Read) {
        // A resumed READ asks only for what is still missing (IBA 9.7.5.1.3 / C9-78).
        spec.ext.reth = Reth{w.remote_addr + offset, w.rkey, w.length - std::min(offset, w.length)};
    } else if (wr.kind == WrClass::Atomic) {
        const bool cas = w.opcode == WrOpcode::AtomicCmpAndSwp;
        spec.ext.atomic_eth = AtomicEth{w.remote_addr, w.rkey, cas ? w.swap : w.compare_add, cas ? w.compare_add : 0};
    } else if (wr.kind == WrClass::Flush) {
        // oA19-2: no payload. The RETH names the range (ignored by the responder for level 1).
        spec.ext.feth = Feth{w.flush_type, w.flush_level, 0};
        spec.ext.reth = Reth{w.remote_addr, w.rkey, w.length};
    } else if (wr.kind == WrClass::AtomicWrite) {
        payload = 8;
        spec.ext.reth = Reth{w.remote_addr, w.rkey, 8};
    } else {
        payload = std::min(mtu, w.length - std::min(offset, w.length));
        if (info.has(kExtReth)) spec.ext.reth = Reth{w.remote_addr, w.rkey, w.length};
        // The WR's immediate is in network order (ibv_send_wr's __be32): its bytes go out as
        // they are, and ImmDt holds the value they read as.
        if (info.has(kExtImmDt)) spec.ext.immdt = ImmDt{be32toh(w.imm_data)};
        if (info.has(kExtIeth)) spec.ext.ieth = Ieth{w.invalidate_rkey};
        if (info.has(kExtDeth)) {
            // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
            const uint32_t qkey = (w.remote_qkey & 0x80000000u) ? qp.attr.qkey : w.remote_qkey;
            spec.ext.deth = Deth{qkey, 0, qp.qpn};
        }
        spec.bth.solicited = info.ends_message() && (w.send_flags & SendFlag::Solicited);
    }
    if (qp.is_rc()) {
        const uint32_t interval = core_.config.tuning.ack_request_interval;
        spec.bth.ack_req = (info.ends_message() && !coalesced_ack_request(qp, pos)) || wr.read_or_atomic() ||
                           (interval != 0 && (pkt + 1) % interval == 0);
    }
    const bool inl = w.send_flags & SendFlag::Inline;
    const Emit e = emit_frame(core_, sink, spec, payload, [&](std::span<uint8_t> out) {
        if (wr.kind == WrClass::AtomicWrite && !inl && w.num_sge == 0) {
            std::memcpy(out.data(), &w.compare_add, 8);  // ibv_wr_atomic_write's bytes, as given
            return SgeCopy::Ok;
        }
        if (inl) {
            std::memcpy(out.data(), qp.sq.inline_data(pos).data() + offset, out.size());
            return SgeCopy::Ok;
        }
        return gather_from_sges(*core_.memory, qp.init.pd, qp.sq.sges(pos), offset, out);
    });
    switch (e) {
        case Emit::Sent:
            break;
        case Emit::NoRoom:
            return Sent::NoRoom;
        case Emit::FillPending:
            return Sent::Pending;
        case Emit::FillFailed:
        case Emit::Invalid:
            w.fail(WcStatus::LocProtErr);
            return Sent::Failed;
    }
    // Counted once the packet is out: one held back (no room, an on-demand page not there yet)
    // asked for nothing yet.
    if (qp.is_rc()) qp.req.packets_without_ack_request = spec.bth.ack_req ? 0 : qp.req.packets_without_ack_request + 1;
    ++qp.counters.tx_packets;
    qp.counters.tx_bytes += payload;
    return Sent::Yes;
}

size_t Requester::emit(QueuePair& qp, FrameSink& sink, size_t budget) {
    size_t sent = 0;
    RequesterState& rq = qp.req;
    while (sent < budget && has_work(qp)) {
        const uint32_t pos = rq.cursor;
        SendWqe& w = qp.sq.at(pos);
        if (w.finished()) {  // completed out of band (LOCAL_INV) but not yet retired
            next_wqe(qp);
            continue;
        }
        if (!w.started()) {
            const Step s = start_wqe(qp, w, pos);
            if (s == Step::Blocked) break;
            if (s == Step::Skip) {
                next_wqe(qp);
                core_.completer.retire(qp);
                continue;
            }
            if (s == Step::Failed) {
                core_.completer.fail(qp);
                break;
            }
        }
        const uint32_t psn = psn_add(w.first_psn, rq.cursor_pkt);
        const bool resend = rq.sent_any && psn_before_or_equal(psn, rq.highest_sent_psn);
        const Sent result = send_packet(qp, w, pos, sink);
        if (result == Sent::NoRoom) break;
        if (result == Sent::Pending) {
            // An on-demand page of the payload is not there yet: nothing is sent, the QP waits
            // off the ready list (odp_wait.cpp); past the time bound, a local protection error.
            const bool new_wait = !qp.odp.waits(OdpSide::Gather);
            if (core_.odp_wait(qp, OdpSide::Gather)) {
                core_.odp_park(qp);
                // The message before may have left its ACK request to this one: ask again for
                // it now (coalesced_ack_request does not while this wait lasts), so it is
                // acknowledged instead of timing out behind a page fault.
                if (new_wait) ask_again(qp);
            } else {
                w.fail(WcStatus::LocProtErr);
                core_.completer.fail(qp);
            }
            break;
        }
        core_.odp_done(qp, OdpSide::Gather);
        if (result == Sent::Failed) {
            core_.completer.fail(qp);
            break;
        }
        if (resend) {
            ++qp.counters.retransmitted_packets;
        } else {
            rq.highest_sent_psn = w.opcode == WrOpcode::RdmaRead ? w.last_psn() : psn;
            rq.sent_any = true;
        }
        ++sent;
        // One READ request covers all its response PSNs.
        rq.cursor_pkt = w.opcode == WrOpcode::RdmaRead ? w.npkts : rq.cursor_pkt + 1;
        if (rq.cursor_pkt >= w.npkts) {
            if (w.state == WqeState::Started) w.state = WqeState::Sent;
            next_wqe(qp);
            if (!qp.is_rc()) {  // UC and UD complete once on the wire (IBA 9.8.3, 9.8.4)
                w.state = WqeState::Done;
                core_.completer.retire(qp);
            }
        }
        if (qp.is_rc() && !qp.comp.retransmit.armed()) core_.completer.arm_timer(qp);
    }
    return sent;
}

}  // namespace rnic::transport
