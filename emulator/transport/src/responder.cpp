#include "responder.hpp"

#include <algorithm>
#include <cstring>

#include "frame_builder.hpp"
#include "sge_copy.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/wire/aeth.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {

using namespace rnic::wire;

namespace {

constexpr uint8_t kExpectStart = 0, kInSend = 1, kInWrite = 2;
constexpr uint32_t kGrhSize = 40;

uint8_t ack_syndrome() { return AethSyndrome::ack(kCreditsInvalid).encode(); }

}  // namespace

void Responder::on_request(QueuePair& qp, const RoceFrame& f, std::span<const uint8_t> frame) {
    if (!qp.can_receive()) return;
    ++qp.counters.rx_packets;
    qp.counters.rx_bytes += f.payload.size();
    switch (qp.init.qp_type) {
        case QpType::Rc: on_rc_request(qp, f); break;
        case QpType::Uc: on_uc_request(qp, f); break;
        case QpType::Ud: on_ud_request(qp, f, frame); break;
        default: break;
    }
}

// ---------------------------------------------------------------------------------------------
// RC: IBA 9.7.4-9.7.5

void Responder::on_rc_request(QueuePair& qp, const RoceFrame& f) {
    const int32_t d = psn_diff(f.bth.psn, qp.epsn);
    if (d < 0) {
        on_duplicate(qp, f);
        return;
    }
    if (d > 0) {
        // Out of sequence: drop, and NAK only the first packet of the gap (C9-111) so the
        // requester goes back once, not once per packet in flight.
        ++qp.counters.out_of_sequence;
        if (!qp.nak_sent) {
            qp.nak_sent = true;
            ++qp.counters.seq_naks_sent;
            queue_nak(qp, qp.epsn, AethSyndrome::nak(NakCode::PsnSequenceError).encode());
        }
        return;
    }
    qp.nak_sent = false;
    const Outcome o = execute(qp, f);
    switch (o) {
        case Outcome::Done:
            if (f.info->kind == OpKind::RdmaReadRequest || f.info->kind == OpKind::CompareSwap ||
                f.info->kind == OpKind::FetchAdd)
                return;  // do_read/do_atomic advanced the PSN and queued the response
            qp.epsn = psn_add(qp.epsn, 1);
            if (f.bth.ack_req) queue_ack(qp, f.bth.psn, ack_syndrome());
            return;
        case Outcome::Rnr:
            ++qp.counters.rnr_naks_sent;
            ++qp.counters.out_of_buffer;
            queue_nak(qp, f.bth.psn, AethSyndrome::rnr_nak(qp.attr.min_rnr_timer).encode());
            return;
        case Outcome::Drop:
            return;
        default:
            fatal(qp, f, o);
            return;
    }
}

// Class B/C errors (IBA 9.9.3): NAK the request, complete any receive in progress with an
// error, and move the responder's QP to the error state, as rxe does.
void Responder::fatal(QueuePair& qp, const RoceFrame& f, Outcome o) {
    uint8_t syndrome = AethSyndrome::nak(NakCode::InvalidRequest).encode();
    WcStatus status = WcStatus::RemInvReqErr;
    if (o == Outcome::AccessError) {
        syndrome = AethSyndrome::nak(NakCode::RemoteAccessError).encode();
        status = WcStatus::RemAccessErr;
        ++qp.counters.remote_access_errors;
    } else if (o == Outcome::LengthError) {
        status = WcStatus::LocLenErr;
        ++qp.counters.remote_invalid_request_errors;
    } else {
        ++qp.counters.remote_invalid_request_errors;
    }
    if (qp.recv_in_progress) {
        complete_recv(qp, *qp.recv_in_progress, WcOpcode::Recv, qp.recv_offset, f, status);
        qp.recv_in_progress.reset();
    }
    // The NAK must leave before the QP stops talking: build it now, then go to error.
    queue_nak(qp, f.bth.psn, syndrome);
    std::deque<ResponseJob> pending;
    pending.swap(qp.responses);
    e_.move_to_error(qp);
    qp.responses.swap(pending);
    e_.mark_ready(qp);
}

void Responder::on_duplicate(QueuePair& qp, const RoceFrame& f) {
    ++qp.counters.duplicate_requests;
    const uint32_t psn = f.bth.psn;
    const OpKind kind = f.info->kind;
    if (kind == OpKind::RdmaReadRequest || kind == OpKind::CompareSwap || kind == OpKind::FetchAdd) {
        for (const ResponderResource& r : qp.resources) {
            if (!r.valid || !psn_in_window(psn, r.first_psn, r.npkts)) continue;
            if (r.atomic) {
                // Answered from the saved result: an atomic is never applied twice (C9-140).
                if (psn != r.first_psn) return;
                ResponseJob job;
                job.kind = ResponseJob::Kind::AtomicAck;
                job.replay = true;
                job.psn = psn;
                job.original = r.original;
                job.msn = qp.msn;
                job.syndrome = ack_syndrome();
                qp.responses.push_back(job);
                e_.mark_ready(qp);
                return;
            }
            if (kind != OpKind::RdmaReadRequest) return;
            // Re-execute from the requested PSN (C9-104): its RETH says what is still wanted.
            const Reth& reth = *f.ext.reth;
            if (e_.memory_->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteRead,
                                         true) != mem::AccessError::None)
                return;
            // A response to the same READ still queued is superseded: the requester wants the
            // data from this PSN on, once.
            std::erase_if(qp.responses, [&](const ResponseJob& j) {
                return j.kind == ResponseJob::Kind::ReadResponse && psn_in_window(j.psn, r.first_psn, r.npkts);
            });
            ResponseJob job;
            job.replay = true;
            job.kind = ResponseJob::Kind::ReadResponse;
            job.psn = psn;
            job.va = reth.va;
            job.rkey = reth.rkey;
            job.length = job.total_length = reth.dma_length;
            job.msn = qp.msn;
            job.syndrome = ack_syndrome();
            qp.responses.push_back(job);
            e_.mark_ready(qp);
            return;
        }
        return;
    }
    // SEND/WRITE already executed: acknowledge again without re-executing (C9-105).
    queue_ack(qp, psn_add(qp.epsn, kPsnMask), ack_syndrome());
}

Responder::Outcome Responder::execute(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    // Packets must continue the message in progress, or start a new one (C9-90..C9-93).
    if (qp.expected_segment == kExpectStart && !info.starts_message()) return Outcome::InvalidRequest;
    if (qp.expected_segment == kInSend && (info.kind != OpKind::Send || info.starts_message()))
        return Outcome::InvalidRequest;
    if (qp.expected_segment == kInWrite && (info.kind != OpKind::RdmaWrite || info.starts_message()))
        return Outcome::InvalidRequest;
    // Every packet but the last of a message carries exactly one MTU of payload (C9-86/87).
    if (!info.ends_message() && f.payload.size() != qp.mtu()) return Outcome::InvalidRequest;
    if (info.ends_message() && f.payload.size() > qp.mtu()) return Outcome::InvalidRequest;

    switch (info.kind) {
        case OpKind::Send: return do_send(qp, f);
        case OpKind::RdmaWrite: return do_write(qp, f);
        case OpKind::RdmaReadRequest: return qp.is_rc() ? do_read(qp, f) : Outcome::InvalidRequest;
        case OpKind::CompareSwap:
        case OpKind::FetchAdd: return qp.is_rc() ? do_atomic(qp, f) : Outcome::InvalidRequest;
        default: return Outcome::InvalidRequest;
    }
}

Responder::Outcome Responder::do_send(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    if (info.starts_message()) {
        RecvWr wqe;
        bool from_srq = false;
        if (!e_.take_recv_wqe(qp, wqe, from_srq)) return Outcome::Rnr;
        qp.recv_in_progress = std::move(wqe);
        qp.recv_from_srq = from_srq;
        qp.recv_offset = 0;
    }
    const RecvWr& wqe = *qp.recv_in_progress;
    if (qp.recv_offset + f.payload.size() > capacity(wqe)) return Outcome::LengthError;
    if (!scatter(qp, wqe, qp.recv_offset, f.payload)) return Outcome::AccessError;
    qp.recv_offset += static_cast<uint32_t>(f.payload.size());
    qp.expected_segment = info.ends_message() ? kExpectStart : kInSend;
    if (!info.ends_message()) return Outcome::Done;

    if (f.ext.ieth) {
        // SEND with invalidate: the named rkey stops working before the completion is seen.
        if (e_.memory_->invalidate(f.ext.ieth->rkey, qp.init.pd) != mem::AccessError::None) {
            qp.expected_segment = kExpectStart;
            return Outcome::InvalidRequest;
        }
    }
    complete_recv(qp, wqe, WcOpcode::Recv, qp.recv_offset, f);
    qp.recv_in_progress.reset();
    qp.msn = msn_add(qp.msn, 1);
    return Outcome::Done;
}

Responder::Outcome Responder::do_write(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    if (info.starts_message()) {
        const Reth& reth = *f.ext.reth;
        if (!(qp.attr.qp_access_flags & mem::kAccessRemoteWrite)) return Outcome::AccessError;
        if (e_.memory_->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteWrite, true) !=
            mem::AccessError::None)
            return Outcome::AccessError;
        qp.write_va = reth.va;
        qp.write_rkey = reth.rkey;
        qp.write_remaining = reth.dma_length;
        qp.write_total = reth.dma_length;
    }
    if (f.payload.size() > qp.write_remaining) return Outcome::InvalidRequest;
    if (info.ends_message() && f.payload.size() != qp.write_remaining) return Outcome::InvalidRequest;
    // WRITE with immediate needs a receive WQE, checked before any byte lands so an RNR retry
    // of this packet finds memory as it was.
    RecvWr wqe;
    bool from_srq = false;
    const bool with_imm = f.ext.immdt.has_value();
    if (with_imm && !e_.take_recv_wqe(qp, wqe, from_srq)) return Outcome::Rnr;
    if (!f.payload.empty() &&
        e_.memory_->copy_in(qp.write_rkey, qp.init.pd, qp.write_va, f.payload, true) != mem::AccessError::None) {
        if (with_imm) (from_srq ? e_.srqs_.at(*qp.init.srq).wqes : qp.rq).push_front(std::move(wqe));
        return Outcome::AccessError;
    }
    qp.write_va += f.payload.size();
    qp.write_remaining -= static_cast<uint32_t>(f.payload.size());
    qp.expected_segment = info.ends_message() ? kExpectStart : kInWrite;
    if (info.ends_message()) {
        // byte_len of a WRITE with immediate is the length of the whole WRITE, as in rxe.
        if (with_imm) complete_recv(qp, wqe, WcOpcode::RecvRdmaWithImm, qp.write_total, f);
        qp.msn = msn_add(qp.msn, 1);
    }
    return Outcome::Done;
}

Responder::Outcome Responder::do_read(QueuePair& qp, const RoceFrame& f) {
    const Reth& reth = *f.ext.reth;
    if (!(qp.attr.qp_access_flags & mem::kAccessRemoteRead)) return Outcome::AccessError;
    if (e_.memory_->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteRead, true) !=
        mem::AccessError::None)
        return Outcome::AccessError;
    // More READs in flight than the responder resources the requester was granted is an
    // invalid request (C9-150); replays of duplicates are not new resources.
    size_t pending = 0;
    for (const ResponseJob& j : qp.responses)
        if (j.kind == ResponseJob::Kind::ReadResponse && !j.replay) ++pending;
    if (pending >= std::max<uint32_t>(1, qp.attr.max_dest_rd_atomic)) return Outcome::InvalidRequest;

    const uint32_t npkts = std::max<uint32_t>(1, (reth.dma_length + qp.mtu() - 1) / qp.mtu());
    ResponderResource& r = qp.resources[qp.next_resource++ % qp.resources.size()];
    r = {true, false, f.bth.psn, npkts, reth.va, reth.rkey, reth.dma_length, 0};
    ResponseJob job;
    job.kind = ResponseJob::Kind::ReadResponse;
    job.psn = f.bth.psn;
    job.va = reth.va;
    job.rkey = reth.rkey;
    job.length = job.total_length = reth.dma_length;
    qp.msn = msn_add(qp.msn, 1);
    job.msn = qp.msn;
    job.syndrome = ack_syndrome();
    qp.responses.push_back(job);
    qp.epsn = psn_add(qp.epsn, npkts);  // a READ consumes one PSN per response packet
    e_.mark_ready(qp);
    return Outcome::Done;
}

Responder::Outcome Responder::do_atomic(QueuePair& qp, const RoceFrame& f) {
    const AtomicEth& a = *f.ext.atomic_eth;
    if (a.va % 8 != 0) return Outcome::InvalidRequest;  // C9-147: misaligned atomics are invalid
    if (!(qp.attr.qp_access_flags & mem::kAccessRemoteAtomic)) return Outcome::AccessError;
    const mem::AtomicResult res = f.info->kind == OpKind::CompareSwap
                                      ? e_.memory_->compare_and_swap(a.rkey, qp.init.pd, a.va, a.compare, a.swap_add)
                                      : e_.memory_->fetch_and_add(a.rkey, qp.init.pd, a.va, a.swap_add);
    if (res.error == mem::AccessError::Misaligned) return Outcome::InvalidRequest;
    if (res.error != mem::AccessError::None) return Outcome::AccessError;
    ++qp.counters.atomics_executed;
    ResponderResource& r = qp.resources[qp.next_resource++ % qp.resources.size()];
    r = {true, true, f.bth.psn, 1, a.va, a.rkey, 8, res.original};
    ResponseJob job;
    job.kind = ResponseJob::Kind::AtomicAck;
    job.psn = f.bth.psn;
    job.original = res.original;
    qp.msn = msn_add(qp.msn, 1);
    job.msn = qp.msn;
    job.syndrome = ack_syndrome();
    qp.responses.push_back(job);
    qp.epsn = psn_add(qp.epsn, 1);
    e_.mark_ready(qp);
    return Outcome::Done;
}

// ---------------------------------------------------------------------------------------------
// UC: IBA 9.8.3. No ACKs; a lost packet loses its whole message, the next FIRST/ONLY resyncs.

void Responder::on_uc_request(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    if (f.bth.psn != qp.epsn) {
        ++qp.counters.out_of_sequence;
        if (qp.expected_segment != kExpectStart || qp.recv_in_progress) {
            // The partial message is discarded; its receive WQE serves the next one.
            if (qp.recv_in_progress) {
                if (qp.recv_from_srq) e_.srqs_.at(*qp.init.srq).wqes.push_front(*qp.recv_in_progress);
                else qp.rq.push_front(*qp.recv_in_progress);
                qp.recv_in_progress.reset();
            }
            qp.expected_segment = kExpectStart;
            ++qp.counters.uc_dropped_messages;
        }
        qp.epsn = f.bth.psn;
        qp.uc_dropping = !info.starts_message();
    }
    qp.epsn = psn_add(f.bth.psn, 1);
    if (qp.uc_dropping) {
        if (info.ends_message()) qp.uc_dropping = false;
        return;
    }
    const Outcome o = execute(qp, f);
    if (o == Outcome::Done) return;
    // No receive WQE, a bad rkey or a malformed message: the message is silently dropped.
    if (o == Outcome::Rnr) ++qp.counters.out_of_buffer;
    if (o == Outcome::AccessError) ++qp.counters.remote_access_errors;
    if (o == Outcome::LengthError && qp.recv_in_progress) {
        complete_recv(qp, *qp.recv_in_progress, WcOpcode::Recv, qp.recv_offset, f, WcStatus::LocLenErr);
        qp.recv_in_progress.reset();
    }
    qp.expected_segment = kExpectStart;
    qp.uc_dropping = !info.ends_message();
    ++qp.counters.uc_dropped_messages;
}

// ---------------------------------------------------------------------------------------------
// UD: IBA 9.8.4. Q_Key checked; the receive buffer starts with the 40-byte GRH.

void Responder::on_ud_request(QueuePair& qp, const RoceFrame& f, std::span<const uint8_t> frame) {
    if (f.info->transport != Transport::UD) return;
    if (f.ext.deth->qkey != qp.attr.qkey) {  // C10-15: silently dropped
        ++qp.counters.ud_qkey_violations;
        return;
    }
    RecvWr wqe;
    bool from_srq = false;
    if (!e_.take_recv_wqe(qp, wqe, from_srq)) {
        ++qp.counters.out_of_buffer;
        return;
    }
    // RoCEv2 GRH area: IPv6 header as is; for IPv4, 20 zero bytes then the IPv4 header,
    // which is what rdma-core's ibv_create_ah_from_wc expects.
    grh_.assign(kGrhSize, 0);
    const size_t ip_header = f.l4_offset - f.l3_offset;
    if (f.ip_version == 4)
        std::memcpy(grh_.data() + 20, frame.data() + f.l3_offset, std::min<size_t>(20, ip_header));
    else
        std::memcpy(grh_.data(), frame.data() + f.l3_offset, kGrhSize);
    const uint32_t total = kGrhSize + static_cast<uint32_t>(f.payload.size());
    if (total > capacity(wqe)) {
        complete_recv(qp, wqe, WcOpcode::Recv, 0, f, WcStatus::LocLenErr);
        return;
    }
    if (!scatter(qp, wqe, 0, grh_) || !scatter(qp, wqe, kGrhSize, f.payload)) {
        complete_recv(qp, wqe, WcOpcode::Recv, 0, f, WcStatus::LocProtErr);
        return;
    }
    complete_recv(qp, wqe, WcOpcode::Recv, total, f);
}

// ---------------------------------------------------------------------------------------------

uint64_t Responder::capacity(const RecvWr& wqe) {
    uint64_t n = 0;
    for (const Sge& s : wqe.sg_list) n += s.length;
    return n;
}

bool Responder::scatter(QueuePair& qp, const RecvWr& wqe, uint32_t offset, std::span<const uint8_t> data) {
    return scatter_to_sges(*e_.memory_, qp.init.pd, wqe.sg_list, offset, data);
}

void Responder::complete_recv(QueuePair& qp, const RecvWr& wqe, WcOpcode opcode, uint32_t byte_len,
                              const RoceFrame& f, WcStatus status) {
    WorkCompletion wc;
    wc.wr_id = wqe.wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.byte_len = byte_len;
    wc.qp_num = qp.qpn;
    wc.src_qp = f.ext.deth ? f.ext.deth->src_qp : qp.attr.dest_qp_num;
    if (f.ext.immdt) {
        wc.imm_data = f.ext.immdt->value;
        wc.wc_flags |= WcFlag::WithImm;
    }
    if (f.ext.ieth) {
        wc.imm_data = f.ext.ieth->rkey;
        wc.wc_flags |= WcFlag::WithInv;
    }
    if (qp.is_ud()) wc.wc_flags |= WcFlag::Grh;
    e_.complete(qp, qp.init.recv_cq, wc);
}

void Responder::queue_ack(QueuePair& qp, uint32_t psn, uint8_t syndrome) {
    // Coalesce: a later ACK supersedes one still waiting at the tail (C9-113 allows ACKing
    // several requests at once).
    if (!qp.responses.empty() && qp.responses.back().kind == ResponseJob::Kind::Ack &&
        AethSyndrome::decode(qp.responses.back().syndrome).type == AckType::Ack &&
        AethSyndrome::decode(syndrome).type == AckType::Ack) {
        if (psn_after(psn, qp.responses.back().psn)) qp.responses.back().psn = psn;
        qp.responses.back().msn = qp.msn;
        return;
    }
    ResponseJob job;
    job.kind = ResponseJob::Kind::Ack;
    job.psn = psn;
    job.syndrome = syndrome;
    job.msn = qp.msn;
    qp.responses.push_back(job);
    e_.mark_ready(qp);
}

void Responder::queue_nak(QueuePair& qp, uint32_t psn, uint8_t syndrome) { queue_ack(qp, psn, syndrome); }

size_t Responder::emit(QueuePair& qp, FrameSink& sink, size_t budget) {
    size_t sent = 0;
    while (sent < budget && !qp.responses.empty()) {
        ResponseJob& job = qp.responses.front();
        if (job.kind == ResponseJob::Kind::ReadResponse) {
            if (!emit_read_response(qp, job, sink)) {
                // Became a NAK (its memory failed): send it now, not when a retry wakes this QP.
                if (job.kind != ResponseJob::Kind::ReadResponse) continue;
                break;
            }
            ++sent;
            if (job.length == 0 && job.first_sent) qp.responses.pop_front();
            continue;
        }
        FrameSpec spec = path_spec(e_.config_, qp, qp.attr.ah_attr, qp.attr.dest_qp_num);
        spec.bth.psn = job.psn;
        spec.ext.aeth = Aeth{job.syndrome, job.msn};
        if (job.kind == ResponseJob::Kind::AtomicAck) {
            spec.bth.opcode = op::kRcAtomicAcknowledge;
            spec.ext.atomic_ack_eth = AtomicAckEth{job.original};
        } else {
            spec.bth.opcode = op::kRcAcknowledge;
            ++qp.counters.acks_sent;
        }
        if (!emit_frame(sink, spec)) break;
        ++qp.counters.tx_packets;
        ++sent;
        qp.responses.pop_front();
    }
    return sent;
}

bool Responder::emit_read_response(QueuePair& qp, ResponseJob& job, FrameSink& sink) {
    const uint32_t mtu = qp.mtu();
    const uint32_t len = std::min(mtu, job.length);
    const bool first = !job.first_sent;
    const bool last = job.length <= mtu;
    FrameSpec spec = path_spec(e_.config_, qp, qp.attr.ah_attr, qp.attr.dest_qp_num);
    spec.bth.psn = job.psn;
    spec.bth.opcode = first && last ? op::kRcReadResponseOnly
                      : first       ? op::kRcReadResponseFirst
                      : last        ? op::kRcReadResponseLast
                                    : op::kRcReadResponseMiddle;
    if (first || last) spec.ext.aeth = Aeth{job.syndrome, job.msn};
    payload_.resize(len);
    if (len && e_.memory_->copy_out(job.rkey, qp.init.pd, job.va, payload_, true) != mem::AccessError::None) {
        // The region went away between request and response: a remote access error.
        job.kind = ResponseJob::Kind::Ack;
        job.syndrome = AethSyndrome::nak(NakCode::RemoteAccessError).encode();
        return false;
    }
    spec.payload = payload_;
    if (!emit_frame(sink, spec)) return false;
    ++qp.counters.tx_packets;
    ++qp.counters.read_responses_sent;
    qp.counters.tx_bytes += len;
    job.first_sent = true;
    job.va += len;
    job.length -= len;
    job.psn = psn_add(job.psn, 1);
    return true;
}

}  // namespace rnic::transport
