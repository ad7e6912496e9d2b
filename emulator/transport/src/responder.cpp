#include "responder.hpp"

#include <endian.h>

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

constexpr uint8_t kExpectStart = 0, kInSend = 1, kInWrite = 2;
constexpr uint32_t kGrhSize = 40;
// ACKs and NAKs a QP may owe at once besides its READ and atomic responses. Legitimate traffic
// needs one between two READs at most (consecutive ACKs coalesce); a peer that provokes more
// (duplicates, RNR storms) loses the surplus, and its requester retries as after a lost ACK.
constexpr size_t kMaxQueuedAcks = 64;

uint8_t ack_syndrome() {
    return AethSyndrome::ack(kCreditsInvalid).encode();
}

// The RNR NAK of an on-demand page that is not there yet: a copy that outlasted the backend's
// wait (about a millisecond) or waits behind one rarely ends within the 10 us a QP's
// min_rnr_timer often asks for, so the requester is told to wait at least 0.32 ms (IBA table
// 45, code 10): fewer useless retries while the page fault lasts. Code 0 is the longest
// (655.36 ms) and stays.
uint8_t odp_rnr_timer(uint8_t min_rnr_timer) {
    constexpr uint8_t kOdpFloor = 10;
    return min_rnr_timer != 0 && min_rnr_timer < kOdpFloor ? kOdpFloor : min_rnr_timer;
}

bool is_read_or_atomic(OpKind k) {
    return k == OpKind::RdmaReadRequest || k == OpKind::CompareSwap || k == OpKind::FetchAdd ||
           k == OpKind::AtomicWrite || k == OpKind::Flush;
}

}  // namespace

void Responder::on_request(QueuePair& qp, const RoceFrame& f, std::span<const uint8_t> frame) {
    if (!qp.can_receive()) return;
    ++qp.counters.rx_packets;
    qp.counters.rx_bytes += f.payload.size();
    switch (qp.init.qp_type) {
        case QpType::Rc:
            on_rc_request(qp, f);
            break;
        case QpType::Uc:
            on_uc_request(qp, f);
            break;
        case QpType::Ud:
            on_ud_request(qp, f, frame);
            break;
        default:
            break;
    }
}

// ---------------------------------------------------------------------------------------------
// RC: IBA 9.7.4-9.7.5

void Responder::on_rc_request(QueuePair& qp, const RoceFrame& f) {
    ResponderState& r = qp.resp;
    const int32_t d = psn_diff(f.bth.psn, r.epsn);
    if (d < 0) {
        on_duplicate(qp, f);
        return;
    }
    if (d > 0) {
        // Out of sequence: drop, and NAK only the first packet of the gap (C9-111) so the
        // requester goes back once, not once per packet in flight.
        ++qp.counters.out_of_sequence;
        if (!r.nak_sent) {
            r.nak_sent = true;
            ++qp.counters.seq_naks_sent;
            queue_ack(qp, r.epsn, AethSyndrome::nak(NakCode::PsnSequenceError).encode());
        }
        return;
    }
    r.nak_sent = false;
    Outcome o = execute(qp, f);
    if (o == Outcome::Pending) {
        // An ODP page fault at the responder: RNR NAK, as mlx5 answers one; the requester sends
        // the packet again after its RNR timer. Past the time bound: remote access error.
        if (core_.odp_wait(qp, OdpSide::Incoming)) {
            ++core_.counters.odp_rnr_naks;
            ++qp.counters.rnr_naks_sent;
            queue_ack(qp, f.bth.psn, AethSyndrome::rnr_nak(odp_rnr_timer(qp.attr.min_rnr_timer)).encode());
            return;
        }
        o = Outcome::AccessError;
    } else if (o == Outcome::Done) {
        core_.odp_done(qp, OdpSide::Incoming);
    }
    switch (o) {
        case Outcome::Done:
            if (is_read_or_atomic(f.info->kind)) return;  // do_read/do_atomic advanced the PSN and queued the response
            r.epsn = psn_add(r.epsn, 1);
            if (f.bth.ack_req) queue_ack(qp, f.bth.psn, ack_syndrome());
            return;
        case Outcome::Rnr:
            ++qp.counters.rnr_naks_sent;
            ++qp.counters.out_of_buffer;
            queue_ack(qp, f.bth.psn, AethSyndrome::rnr_nak(qp.attr.min_rnr_timer).encode());
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
    if (qp.resp.recv.active) complete_recv(qp, WcOpcode::Recv, qp.resp.recv_offset, f, status);
    // The NAK must leave before the QP stops talking: queue it, then go to error keeping it.
    queue_ack(qp, f.bth.psn, syndrome);
    core_.move_to_error(qp, /*keep_responses=*/true);
    core_.mark_ready(qp);
}

void Responder::on_duplicate(QueuePair& qp, const RoceFrame& f) {
    ++qp.counters.duplicate_requests;
    ResponderState& rs = qp.resp;
    const uint32_t psn = f.bth.psn;
    const OpKind kind = f.info->kind;
    if (is_read_or_atomic(kind)) {
        for (const ResponderResource& r : rs.resources) {
            if (!r.valid || !psn_in_window(psn, r.first_psn, r.npkts)) continue;
            if (r.atomic) {
                // Answered from the saved result: an atomic is never applied twice (C9-140).
                if (psn != r.first_psn) return;
                if (r.empty_response) {  // ATOMIC WRITE / FLUSH (oA19-14, oA19-15)
                    ResponseJob job;
                    job.kind = ResponseJob::Kind::EmptyReadResponse;
                    job.replay = true;
                    job.psn = psn;
                    job.msn = rs.msn;
                    job.syndrome = ack_syndrome();
                    queue_response(qp, job);
                    return;
                }
                ResponseJob job;
                job.kind = ResponseJob::Kind::AtomicAck;
                job.replay = true;
                job.psn = psn;
                job.original = r.original;
                job.msn = rs.msn;
                job.syndrome = ack_syndrome();
                queue_response(qp, job);
                return;
            }
            if (kind != OpKind::RdmaReadRequest) return;
            // Re-execute from the requested PSN (C9-104): its RETH says what is still wanted.
            const Reth& reth = *f.ext.reth;
            if (core_.memory->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteRead,
                                           true, qp.qpn) != mem::AccessError::None)
                return;
            // A response to the same READ still queued is superseded: the requester wants the
            // data from this PSN on, once.
            rs.responses.erase_if([&](const ResponseJob& j) {
                const bool gone =
                    j.kind == ResponseJob::Kind::ReadResponse && psn_in_window(j.psn, r.first_psn, r.npkts);
                if (gone && !j.replay) --rs.queued_reads;
                return gone;
            });
            ResponseJob job;
            job.replay = true;
            job.kind = ResponseJob::Kind::ReadResponse;
            job.psn = psn;
            job.va = reth.va;
            job.rkey = reth.rkey;
            job.length = job.total_length = reth.dma_length;
            job.msn = rs.msn;
            job.syndrome = ack_syndrome();
            queue_response(qp, job);
            return;
        }
        return;
    }
    // SEND/WRITE already executed: acknowledge again without re-executing (C9-105).
    queue_ack(qp, psn_add(rs.epsn, kPsnMask), ack_syndrome());
}

Responder::Outcome Responder::execute(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    const uint8_t expected = qp.resp.expected_segment;
    // Packets must continue the message in progress, or start a new one (C9-90..C9-93).
    if (expected == kExpectStart && !info.starts_message()) return Outcome::InvalidRequest;
    if (expected == kInSend && (info.kind != OpKind::Send || info.starts_message())) return Outcome::InvalidRequest;
    if (expected == kInWrite && (info.kind != OpKind::RdmaWrite || info.starts_message()))
        return Outcome::InvalidRequest;
    // Every packet but the last of a message carries exactly one MTU of payload (C9-86/87).
    if (!info.ends_message() && f.payload.size() != qp.mtu()) return Outcome::InvalidRequest;
    if (info.ends_message() && f.payload.size() > qp.mtu()) return Outcome::InvalidRequest;

    switch (info.kind) {
        case OpKind::Send:
            return do_send(qp, f);
        case OpKind::RdmaWrite:
            return do_write(qp, f);
        case OpKind::RdmaReadRequest:
            return qp.is_rc() ? do_read(qp, f) : Outcome::InvalidRequest;
        case OpKind::CompareSwap:
        case OpKind::FetchAdd:
            return qp.is_rc() ? do_atomic(qp, f) : Outcome::InvalidRequest;
        case OpKind::AtomicWrite:
            return qp.is_rc() ? do_atomic_write(qp, f) : Outcome::InvalidRequest;
        case OpKind::Flush:
            return qp.is_rc() ? do_flush(qp, f) : Outcome::InvalidRequest;
        default:
            return Outcome::InvalidRequest;
    }
}

Responder::Outcome Responder::do_send(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    ResponderState& r = qp.resp;
    if (info.starts_message()) {
        if (!core_.claim_recv(qp)) return Outcome::Rnr;
        r.recv_offset = 0;
    } else if (!r.recv.active) {
        return Outcome::InvalidRequest;  // a middle or last packet with no message started
    }
    if (r.recv_offset + f.payload.size() > core_.claimed_recv(qp).capacity()) return Outcome::LengthError;
    if (const SgeCopy c = scatter(qp, r.recv_offset, f.payload); c != SgeCopy::Ok) {
        if (c == SgeCopy::Failed) return Outcome::AccessError;
        // The packet comes again: a first packet claims its WQE again then.
        if (info.starts_message()) core_.give_back_recv(qp);
        return Outcome::Pending;
    }
    r.recv_offset += static_cast<uint32_t>(f.payload.size());
    r.expected_segment = info.ends_message() ? kExpectStart : kInSend;
    if (!info.ends_message()) return Outcome::Done;

    if (f.ext.ieth) {
        // SEND with invalidate: the named rkey stops working before the completion is seen.
        if (core_.memory->invalidate(f.ext.ieth->rkey, qp.init.pd) != mem::AccessError::None) {
            r.expected_segment = kExpectStart;
            return Outcome::InvalidRequest;
        }
    }
    complete_recv(qp, WcOpcode::Recv, r.recv_offset, f);
    r.msn = msn_add(r.msn, 1);
    return Outcome::Done;
}

Responder::Outcome Responder::do_write(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    ResponderState& r = qp.resp;
    if (info.starts_message()) {
        const Reth& reth = *f.ext.reth;
        if (!(qp.attr.qp_access_flags & mem::kAccessRemoteWrite)) return Outcome::AccessError;
        if (core_.memory->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteWrite,
                                       true, qp.qpn) != mem::AccessError::None)
            return Outcome::AccessError;
        r.write_va = reth.va;
        r.write_rkey = reth.rkey;
        r.write_remaining = reth.dma_length;
        r.write_total = reth.dma_length;
        r.write_generation = core_.memory->generation(reth.rkey);
    } else if (core_.memory->generation(r.write_rkey) != r.write_generation) {
        // The region was re-registered since the first packet: the rest must not land through
        // the new translation (memory_rereg.cpp).
        return Outcome::AccessError;
    }
    if (f.payload.size() > r.write_remaining) return Outcome::InvalidRequest;
    if (info.ends_message() && f.payload.size() != r.write_remaining) return Outcome::InvalidRequest;
    // WRITE with immediate needs a receive WQE, checked before any byte lands so an RNR retry
    // of this packet finds memory as it was.
    const bool with_imm = f.ext.immdt.has_value();
    if (with_imm && !core_.claim_recv(qp)) return Outcome::Rnr;
    if (!f.payload.empty()) {
        const mem::AccessError e = core_.memory->copy_in(r.write_rkey, qp.init.pd, r.write_va, f.payload, true, qp.qpn);
        if (e != mem::AccessError::None) {
            if (with_imm) core_.give_back_recv(qp);
            return e == mem::AccessError::Pending ? Outcome::Pending : Outcome::AccessError;
        }
    }
    r.write_va += f.payload.size();
    r.write_remaining -= static_cast<uint32_t>(f.payload.size());
    r.expected_segment = info.ends_message() ? kExpectStart : kInWrite;
    if (info.ends_message()) {
        // byte_len of a WRITE with immediate is the length of the whole WRITE, as in rxe.
        if (with_imm) complete_recv(qp, WcOpcode::RecvRdmaWithImm, r.write_total, f);
        r.msn = msn_add(r.msn, 1);
    }
    return Outcome::Done;
}

Responder::Outcome Responder::do_read(QueuePair& qp, const RoceFrame& f) {
    const Reth& reth = *f.ext.reth;
    ResponderState& r = qp.resp;
    if (!(qp.attr.qp_access_flags & mem::kAccessRemoteRead)) return Outcome::AccessError;
    if (core_.memory->check_access(reth.rkey, qp.init.pd, reth.va, reth.dma_length, mem::kAccessRemoteRead, true,
                                   qp.qpn) != mem::AccessError::None)
        return Outcome::AccessError;
    // More READs in flight than the responder resources the requester was granted is an
    // invalid request (C9-150); replays of duplicates are not new resources.
    if (r.queued_reads >= std::max<uint32_t>(1, qp.attr.max_dest_rd_atomic)) return Outcome::InvalidRequest;

    const uint32_t npkts = std::max<uint32_t>(1, (reth.dma_length + qp.mtu() - 1) / qp.mtu());
    ResponderResource& res = r.resources[r.next_resource++ % r.resources.size()];
    res = {true, false, f.bth.psn, npkts, reth.va, reth.rkey, reth.dma_length, 0};
    ResponseJob job;
    job.kind = ResponseJob::Kind::ReadResponse;
    job.psn = f.bth.psn;
    job.va = reth.va;
    job.rkey = reth.rkey;
    job.length = job.total_length = reth.dma_length;
    r.msn = msn_add(r.msn, 1);
    job.msn = r.msn;
    job.syndrome = ack_syndrome();
    queue_response(qp, job);
    r.epsn = psn_add(r.epsn, npkts);  // a READ consumes one PSN per response packet
    return Outcome::Done;
}

Responder::Outcome Responder::do_atomic(QueuePair& qp, const RoceFrame& f) {
    const AtomicEth& a = *f.ext.atomic_eth;
    ResponderState& r = qp.resp;
    if (a.va % 8 != 0) return Outcome::InvalidRequest;  // C9-147: misaligned atomics are invalid
    if (!(qp.attr.qp_access_flags & mem::kAccessRemoteAtomic)) return Outcome::AccessError;
    const mem::AtomicResult res = f.info->kind == OpKind::CompareSwap
                                      ? core_.memory->compare_and_swap(a.rkey, qp.init.pd, a.va, a.compare, a.swap_add, qp.qpn)
                                      : core_.memory->fetch_and_add(a.rkey, qp.init.pd, a.va, a.swap_add, qp.qpn);
    if (res.error == mem::AccessError::Misaligned) return Outcome::InvalidRequest;
    if (res.error != mem::AccessError::None) return Outcome::AccessError;
    ++qp.counters.atomics_executed;
    ResponderResource& saved = r.resources[r.next_resource++ % r.resources.size()];
    saved = {true, true, f.bth.psn, 1, a.va, a.rkey, 8, res.original};
    ResponseJob job;
    job.kind = ResponseJob::Kind::AtomicAck;
    job.psn = f.bth.psn;
    job.original = res.original;
    r.msn = msn_add(r.msn, 1);
    job.msn = r.msn;
    job.syndrome = ack_syndrome();
    queue_response(qp, job);
    r.epsn = psn_add(r.epsn, 1);
    return Outcome::Done;
}

// ---------------------------------------------------------------------------------------------
// UC: IBA 9.8.3. No ACKs; a lost packet loses its whole message, the next FIRST/ONLY resyncs.

void Responder::on_uc_request(QueuePair& qp, const RoceFrame& f) {
    const OpcodeInfo& info = *f.info;
    ResponderState& r = qp.resp;
    if (f.bth.psn != r.epsn) {
        ++qp.counters.out_of_sequence;
        if (r.expected_segment != kExpectStart || r.recv.active) {
            // The partial message is discarded; its receive WQE serves the next one.
            if (r.recv.active) core_.give_back_recv(qp);
            r.expected_segment = kExpectStart;
            ++qp.counters.uc_dropped_messages;
        }
        r.uc_dropping = !info.starts_message();
    }
    r.epsn = psn_add(f.bth.psn, 1);
    if (r.uc_dropping) {
        if (info.ends_message()) r.uc_dropping = false;
        return;
    }
    const Outcome o = execute(qp, f);
    if (o == Outcome::Done) return;
    // No receive WQE, a bad rkey, an on-demand page not there yet (UC has no RNR NAK) or a
    // malformed message: the message is silently dropped.
    if (o == Outcome::Rnr) ++qp.counters.out_of_buffer;
    if (o == Outcome::AccessError) ++qp.counters.remote_access_errors;
    if (o == Outcome::LengthError && r.recv.active)
        complete_recv(qp, WcOpcode::Recv, r.recv_offset, f, WcStatus::LocLenErr);
    else if (r.recv.active)
        core_.give_back_recv(qp);
    r.expected_segment = kExpectStart;
    r.uc_dropping = !info.ends_message();
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
    if (!core_.claim_recv(qp)) {
        ++qp.counters.out_of_buffer;
        return;
    }
    // RoCEv2 GRH area: IPv6 header as is; for IPv4, 20 zero bytes then the IPv4 header,
    // which is what rdma-core's ibv_create_ah_from_wc expects.
    grh_.fill(0);
    const size_t ip_header = f.l4_offset - f.l3_offset;
    if (f.ip_version == 4)
        std::memcpy(grh_.data() + 20, frame.data() + f.l3_offset, std::min<size_t>(20, ip_header));
    else
        std::memcpy(grh_.data(), frame.data() + f.l3_offset, kGrhSize);
    const uint32_t total = kGrhSize + static_cast<uint32_t>(f.payload.size());
    if (total > core_.claimed_recv(qp).capacity()) {
        complete_recv(qp, WcOpcode::Recv, 0, f, WcStatus::LocLenErr);
        return;
    }
    SgeCopy c = scatter(qp, 0, grh_);
    if (c == SgeCopy::Ok) c = scatter(qp, kGrhSize, f.payload);
    if (c == SgeCopy::Pending) {
        // An on-demand page of the receive buffer is not there yet: dropped as for no WQE (UD
        // has no RNR NAK); the WQE serves the next datagram.
        ++qp.counters.out_of_buffer;
        core_.give_back_recv(qp);
        return;
    }
    if (c != SgeCopy::Ok) {
        complete_recv(qp, WcOpcode::Recv, 0, f, WcStatus::LocProtErr);
        return;
    }
    complete_recv(qp, WcOpcode::Recv, total, f);
}

// ---------------------------------------------------------------------------------------------

SgeCopy Responder::scatter(QueuePair& qp, uint32_t offset, std::span<const uint8_t> data) {
    return scatter_to_sges(*core_.memory, qp.init.pd, core_.claimed_recv(qp).sges, offset, data);
}

void Responder::complete_recv(QueuePair& qp, WcOpcode opcode, uint32_t byte_len, const RoceFrame& f, WcStatus status) {
    WorkCompletion wc;
    wc.wr_id = core_.claimed_recv(qp).wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.byte_len = byte_len;
    wc.qp_num = qp.qpn;
    wc.src_qp = f.ext.deth ? f.ext.deth->src_qp : qp.attr.dest_qp_num;
    if (f.ext.immdt) {
        wc.imm_data = htobe32(f.ext.immdt->value);  // ibv_wc's __be32: the wire's bytes
        wc.wc_flags |= WcFlag::WithImm;
    }
    if (f.ext.ieth) {
        wc.imm_data = f.ext.ieth->rkey;
        wc.wc_flags |= WcFlag::WithInv;
    }
    if (qp.is_ud()) {
        wc.wc_flags |= WcFlag::Grh;
        // IBA A17.4.5.1: a RoCEv2 UD completion tells whether the frame was IPv4 or IPv6, so the
        // consumer knows where the destination address lies in the 40-byte GRH area. ibv_wc has
        // no field for it; Mellanox NICs report it in the SL (bits 2:0: 1 IPv6, 2 IPv4), and UCX's
        // ud_verbs reads it there to check the destination GID (with 0 it compares an IPv4
        // frame's GRH area as an IPv6 header and drops every packet). SL means nothing else on a
        // RoCE receive.
        wc.sl = f.ip_version == 4 ? 2 : 1;
    }
    core_.consume_recv(qp);
    core_.complete(qp, qp.init.recv_cq, wc);
}

void Responder::queue_response(QueuePair& qp, const ResponseJob& job) {
    ResponderState& r = qp.resp;
    if (job.kind == ResponseJob::Kind::Ack && r.responses.size() >= kMaxQueuedAcks + 2 * r.resources.size()) {
        ++qp.counters.responses_dropped;
        return;
    }
    r.responses.push_back(job);
    if (job.kind == ResponseJob::Kind::ReadResponse && !job.replay) ++r.queued_reads;
    core_.mark_ready(qp);
}

void Responder::queue_ack(QueuePair& qp, uint32_t psn, uint8_t syndrome) {
    auto& responses = qp.resp.responses;
    // Coalesce: a later ACK supersedes one still waiting at the tail (C9-113 allows ACKing
    // several requests at once).
    if (!responses.empty() && responses.back().kind == ResponseJob::Kind::Ack &&
        AethSyndrome::decode(responses.back().syndrome).type == AckType::Ack &&
        AethSyndrome::decode(syndrome).type == AckType::Ack) {
        if (psn_after(psn, responses.back().psn)) responses.back().psn = psn;
        responses.back().msn = qp.resp.msn;
        return;
    }
    ResponseJob job;
    job.kind = ResponseJob::Kind::Ack;
    job.psn = psn;
    job.syndrome = syndrome;
    job.msn = qp.resp.msn;
    queue_response(qp, job);
}

void Responder::pop_response(QueuePair& qp) noexcept {
    ResponderState& r = qp.resp;
    if (r.responses.front().kind == ResponseJob::Kind::ReadResponse && !r.responses.front().replay) --r.queued_reads;
    r.responses.pop_front();
}

size_t Responder::emit(QueuePair& qp, FrameSink& sink, size_t budget) {
    size_t sent = 0;
    auto& responses = qp.resp.responses;
    while (sent < budget && !responses.empty()) {
        ResponseJob& job = responses.front();
        if (job.kind == ResponseJob::Kind::ReadResponse) {
            const Emit e = emit_read_response(qp, job, sink);
            if (e == Emit::NoRoom || e == Emit::FillPending) break;
            if (e != Emit::Sent) continue;  // the job became a NAK: it goes out next
            ++sent;
            if (job.length == 0 && job.first_sent) pop_response(qp);
            continue;
        }
        FrameSpec spec = path_spec(core_.config, qp, qp.attr.ah_attr, qp.attr.dest_qp_num);
        spec.bth.psn = job.psn;
        spec.ext.aeth = Aeth{job.syndrome, job.msn};
        const bool atomic = job.kind == ResponseJob::Kind::AtomicAck;
        const bool empty_read = job.kind == ResponseJob::Kind::EmptyReadResponse;
        if (atomic) {
            spec.bth.opcode = op::kRcAtomicAcknowledge;
            spec.ext.atomic_ack_eth = AtomicAckEth{job.original};
        } else if (empty_read) {
            spec.bth.opcode = op::kRcReadResponseOnly;
        } else {
            spec.bth.opcode = op::kRcAcknowledge;
        }
        const Emit e = emit_frame(core_, sink, spec);
        if (e == Emit::NoRoom) break;
        if (e == Emit::Sent) {
            if (empty_read)
                ++qp.counters.read_responses_sent;
            else if (!atomic)
                ++qp.counters.acks_sent;
            ++qp.counters.tx_packets;
            ++sent;
        }
        pop_response(qp);
    }
    return sent;
}

Emit Responder::emit_read_response(QueuePair& qp, ResponseJob& job, FrameSink& sink) {
    const uint32_t mtu = qp.mtu();
    const uint32_t len = std::min(mtu, job.length);
    const bool first = !job.first_sent;
    const bool last = job.length <= mtu;
    FrameSpec spec = path_spec(core_.config, qp, qp.attr.ah_attr, qp.attr.dest_qp_num);
    spec.bth.psn = job.psn;
    spec.bth.opcode = first && last ? op::kRcReadResponseOnly
                      : first       ? op::kRcReadResponseFirst
                      : last        ? op::kRcReadResponseLast
                                    : op::kRcReadResponseMiddle;
    if (first || last) spec.ext.aeth = Aeth{job.syndrome, job.msn};
    // A region re-registered between two response packets fails the READ (memory_rereg.cpp).
    const uint32_t generation = core_.memory->generation(job.rkey);
    if (first) job.generation = generation;
    const bool same_region = generation == job.generation;
    const Emit e = emit_frame(core_, sink, spec, len, [&](std::span<uint8_t> out) {
        if (!same_region) return SgeCopy::Failed;
        const mem::AccessError a = core_.memory->copy_out(job.rkey, qp.init.pd, job.va, out, true, qp.qpn);
        return a == mem::AccessError::None      ? SgeCopy::Ok
               : a == mem::AccessError::Pending ? SgeCopy::Pending
                                                : SgeCopy::Failed;
    });
    if (e == Emit::FillPending) {
        // The data is on a page of an on-demand region that is not there yet: the response is
        // held (an RNR NAK is no answer to a READ, IBA 9.7.5.2.8: RNR NAKs are for requests that
        // consume a receive WQE or write memory) and the QP waits off the ready list, as mlx5's
        // responder waits for its page fault. The requester's ACK timer may ask again meanwhile:
        // a duplicate READ replaces this job (on_duplicate). Past the bound: remote access error.
        if (core_.odp_wait(qp, OdpSide::ReadResponse)) {
            core_.odp_park(qp);
            return e;
        }
    } else if (e == Emit::Sent) {
        core_.odp_done(qp, OdpSide::ReadResponse);
    }
    if (e == Emit::FillFailed || e == Emit::Invalid || e == Emit::FillPending) {
        // The region went away between request and response: a remote access error.
        if (!job.replay) --qp.resp.queued_reads;
        job.replay = true;  // no longer counted as a READ in flight
        job.kind = ResponseJob::Kind::Ack;
        job.syndrome = AethSyndrome::nak(NakCode::RemoteAccessError).encode();
        return e;
    }
    if (e != Emit::Sent) return e;
    ++qp.counters.tx_packets;
    ++qp.counters.read_responses_sent;
    qp.counters.tx_bytes += len;
    job.first_sent = true;
    job.va += len;
    job.length -= len;
    job.psn = psn_add(job.psn, 1);
    return Emit::Sent;
}

}  // namespace rnic::transport
