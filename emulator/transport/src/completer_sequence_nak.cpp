// PSN-sequence-error NAKs and RNR rounds (IBA 9.7.5.2.5, 9.7.5.2.8).
//
// A responder that RNR-NAKs PSN P keeps expecting P; the packets P+1.. the requester already
// had in flight then reach it out of sequence, and it NAKs the gap once: a sequence NAK for the
// same P (rxe does this, and so does our responder: C9-111, one NAK per gap). That NAK reports
// no loss: the requester already goes back to P when its RNR timer expires. Charging it to
// retry_cnt, as a genuine sequence error is, made every RNR round cost one transport retry, so a
// receiver slower than retry_cnt RNR timers per message failed the QP with RETRY_EXC_ERR even
// with rnr_retry 7 (infinite). rxe avoids it differently (one charged retry per stretch without
// progress, and retry_cnt 7 taken as infinite); here the echo is recognised and ignored.
#include "completer.hpp"
#include "engine_core.hpp"

namespace rnic::transport {

void Completer::on_sequence_nak(QueuePair& qp, uint32_t psn) {
    ++qp.counters.seq_naks_received;
    // An RNR NAK for this PSN is pending (nothing acknowledged since): the requester is either
    // waiting out the RNR timer, whose retransmission starts at `psn`, or has already gone back
    // to `psn` since. Either way the NAK asks for nothing new. Acting on it would not help:
    // rewinding inside the wait changes nothing, and arming the ACK timer there could let it
    // expire inside the wait and be charged; rewinding after the wait resends the same packets
    // twice, each copy drawing its own RNR NAK and echo from a still-unready responder, which
    // multiplies the traffic round after round. If the retransmission from `psn` is lost, the
    // responder (having NAKed this gap once already, C9-111) stays silent and the ACK timeout
    // recovers, charged to retry_cnt as any timeout: so no sequence of these NAKs can loop.
    if (qp.comp.rnr_nak_pending) return;
    ++qp.counters.packet_seq_err;
    retry(qp, psn, WcStatus::RetryExcErr);
}

}  // namespace rnic::transport
