// Accesses to on-demand regions that are not done yet (mem::OdpResult::Pending): the engine's
// side of an ODP page fault, after mlx5's (docs/host_interface.md, "On-demand regions"). The
// units call odp_wait() when an access came back Pending:
// - the responder answers a WRITE or SEND packet with an RNR NAK (the requester retries after
//   its RNR timer) and holds a READ response (it goes out when the data can be read);
// - the requester does not send the packet whose gather waits, the completer drops the READ
//   response or atomic result whose landing waits (the READ is asked for again on resume);
//   such a QP is parked off the ready list until Engine::odp_resume() or its timer.
// Each kind of access (OdpSide) has its time bound, counted from its first Pending and ended by
// one that goes through; past it the access fails as a bad address would (remote access error
// NAK, local protection error) and the QP goes to error. Nothing here blocks or makes calls.
#include "engine_core.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {

namespace {

uint8_t bit(OdpSide s) noexcept {
    return static_cast<uint8_t>(1u << static_cast<unsigned>(s));
}

}  // namespace

bool EngineCore::odp_wait(QueuePair& qp, OdpSide side) {
    uint64_t& since = qp.odp.since[static_cast<size_t>(side)];
    if (!qp.odp.waits(side)) {
        qp.odp.waiting |= bit(side);
        since = now;
        ++counters.odp_waits;
    }
    if (now - since >= config.tuning.odp_timeout_ns) {
        odp_timed_out(qp, side);
        return false;
    }
    if (!qp.odp.bound.armed() || qp.odp.bound.deadline > since + config.tuning.odp_timeout_ns)
        arm(qp.odp.bound, since + config.tuning.odp_timeout_ns);
    return true;
}

// The bound's timer follows the oldest wait whose bound is still ahead (one past it stays marked:
// its next Pending fails at once).
void EngineCore::odp_arm_bound(QueuePair& qp) {
    std::optional<uint64_t> earliest;
    for (size_t s = 0; s < kOdpSides; ++s) {
        if (!qp.odp.waits(static_cast<OdpSide>(s))) continue;
        const uint64_t deadline = qp.odp.since[s] + config.tuning.odp_timeout_ns;
        if (deadline > now && (!earliest || deadline < *earliest)) earliest = deadline;
    }
    if (earliest)
        arm(qp.odp.bound, *earliest);
    else
        cancel(qp.odp.bound);
}

void EngineCore::odp_clear(QueuePair& qp, OdpSide side) {
    qp.odp.waiting &= static_cast<uint8_t>(~bit(side));
    odp_arm_bound(qp);
}

void EngineCore::odp_clear_all(QueuePair& qp) noexcept {
    qp.odp.waiting = 0;
    qp.odp.parked = false;  // a stale entry in odp_parked is skipped
    cancel(qp.odp.bound);
}

void EngineCore::odp_timed_out(QueuePair& qp, OdpSide side) {
    ++counters.odp_timeouts;
    // Read by the daemon every turn; a bound for an engine nobody asks (tests).
    if (odp_timed_out_qps.size() < 1024) odp_timed_out_qps.push_back(qp.qpn);
    odp_clear(qp, side);
}

void EngineCore::odp_park(QueuePair& qp) {
    if (qp.odp.parked) return;
    qp.odp.parked = true;
    // A QP its timer unparked may still have its old entry: one entry per QP at most (a flag, not
    // a search, so parking costs the same however many QPs wait), the list stays within its
    // reservation (max_qp) and never allocates. destroy_qp removes a destroyed QP's entry.
    if (qp.odp.listed) return;
    qp.odp.listed = true;
    odp_parked.push_back(qp.qpn);
}

// Back to work: a dropped response is asked for again from the oldest PSN not acknowledged
// (the READ request's RETH then names only what is still missing, C9-78).
void EngineCore::odp_unpark(QueuePair& qp) {
    qp.odp.parked = false;
    if (qp.odp.waits(OdpSide::Landing) && qp.can_send() && qp.comp.una_psn != qp.req.next_psn) {
        requester.rewind(qp, qp.comp.una_psn);
        completer.arm_timer(qp);
    }
    mark_ready(qp);
}

void EngineCore::on_odp_timer(QueuePair& qp) {
    if (qp.odp.waiting == 0) return;
    // A landing still waiting has nothing to try again here (its response was dropped): past
    // the bound it fails now. Gathers and held READ responses try once more and fail there if
    // still Pending; an incoming WRITE/SEND fails when the requester's retry comes.
    const size_t landing = static_cast<size_t>(OdpSide::Landing);
    if (qp.odp.waits(OdpSide::Landing) && now - qp.odp.since[landing] >= config.tuning.odp_timeout_ns) {
        odp_timed_out(qp, OdpSide::Landing);
        completer.fail_at(qp, qp.comp.una_psn, WcStatus::LocProtErr);
        mark_ready(qp);
        return;
    }
    odp_arm_bound(qp);  // for the sides whose bound is still ahead
    if (qp.odp.parked)
        odp_unpark(qp);
    else
        mark_ready(qp);
}

void Engine::odp_resume() noexcept {
    EngineCore& c = *core_;
    if (c.odp_parked.empty()) return;
    try {
        // odp_unpark parks nothing: the list does not change under the loop.
        for (const uint32_t qpn : c.odp_parked) {
            QueuePair* qp = c.find_qp(qpn);
            if (!qp) continue;
            qp->odp.listed = false;
            if (qp->odp.parked) c.odp_unpark(*qp);  // else unparked by its timer
        }
        c.odp_parked.clear();
    } catch (...) {
        ++c.counters.internal_errors;
    }
}

void Engine::take_odp_timeouts(std::vector<uint32_t>& out) noexcept {
    out.clear();
    out.swap(core_->odp_timed_out_qps);
}

}  // namespace rnic::transport
