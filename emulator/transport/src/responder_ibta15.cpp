// The responder's side of the IBTA 1.5 operations, as Linux rxe (6.2+) executes them:
// ATOMIC WRITE (RETH + 8 bytes stored as one word) and FLUSH (FETH + RETH). Both take a
// responder resource like an atomic, are never executed twice (a duplicate is answered from
// the saved resource, oA19-14/15), and are answered with an RDMA READ RESPONSE ONLY carrying
// no payload.
#include <cstring>

#include "engine_core.hpp"
#include "responder.hpp"
#include "rnic/wire/aeth.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {

using namespace rnic::wire;

void Responder::answer_empty_read(QueuePair& qp, uint32_t psn, const ResponderResource& saved) {
    ResponderState& r = qp.resp;
    r.resources[r.next_resource++ % r.resources.size()] = saved;
    ResponseJob job;
    job.kind = ResponseJob::Kind::EmptyReadResponse;
    job.psn = psn;
    r.msn = msn_add(r.msn, 1);
    job.msn = r.msn;
    job.syndrome = AethSyndrome::ack(kCreditsInvalid).encode();
    job.replay = true;  // not a READ in flight: nothing to count in queued_reads
    queue_response(qp, job);
    r.epsn = psn_add(r.epsn, 1);
}

Responder::Outcome Responder::do_atomic_write(QueuePair& qp, const RoceFrame& f) {
    const Reth& reth = *f.ext.reth;
    // rxe: the QP must grant REMOTE_WRITE, else the opcode is unsupported (class C, invalid
    // request); a QP granted no responder resources cannot take it either.
    if (!(qp.attr.qp_access_flags & mem::kAccessRemoteWrite)) return Outcome::InvalidRequest;
    if (qp.attr.max_dest_rd_atomic == 0) return Outcome::InvalidRequest;
    const mem::AccessError key = core_.memory->check_access(reth.rkey, qp.init.pd, reth.va, 8,
                                                            mem::kAccessRemoteWrite, true);
    if (key != mem::AccessError::None) return Outcome::AccessError;
    // Exactly 8 bytes, announced and carried (rxe: length error, an invalid request NAK).
    if (reth.dma_length != 8 || f.payload.size() != 8) return Outcome::InvalidRequest;
    uint64_t value = 0;
    std::memcpy(&value, f.payload.data(), 8);  // the bytes land as they came
    const mem::AccessError e = core_.memory->atomic_write(reth.rkey, qp.init.pd, reth.va, value, qp.qpn);
    if (e == mem::AccessError::Misaligned) return Outcome::InvalidRequest;  // C9-147's rule, as rxe
    if (e != mem::AccessError::None) return Outcome::AccessError;
    ++qp.counters.atomic_writes_executed;
    answer_empty_read(qp, f.bth.psn, {true, true, f.bth.psn, 1, reth.va, reth.rkey, 8, 0, true});
    return Outcome::Done;
}

Responder::Outcome Responder::do_flush(QueuePair& qp, const RoceFrame& f) {
    const Feth& feth = *f.ext.feth;
    const Reth& reth = *f.ext.reth;
    // rxe check_qp_attr_access: each placement type asked for needs its FLUSH right on the QP.
    const bool global = feth.placement & Feth::kPlacementGlobal;
    const bool persistent = feth.placement & Feth::kPlacementPersistent;
    if ((global && !(qp.attr.qp_access_flags & mem::kAccessFlushGlobal)) ||
        (persistent && !(qp.attr.qp_access_flags & mem::kAccessFlushPersistent)))
        return Outcome::InvalidRequest;
    if (qp.attr.max_dest_rd_atomic == 0) return Outcome::InvalidRequest;
    const bool whole = feth.selectivity == Feth::kSelectRegion;
    const mem::AccessError e =
        core_.memory->flush(reth.rkey, qp.init.pd, reth.va, reth.dma_length, feth.placement, whole);
    if (e != mem::AccessError::None) return Outcome::AccessError;
    ++qp.counters.flushes_executed;
    answer_empty_read(qp, f.bth.psn, {true, true, f.bth.psn, 1, reth.va, reth.rkey, reth.dma_length, 0, true});
    return Outcome::Done;
}

}  // namespace rnic::transport
