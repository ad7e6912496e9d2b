// PFC and PAUSE received (docs/congestion.md): while a priority is paused no frame of it leaves,
// requests, ACKs and READ responses alike (a PFC pause stops the whole class, not one QP's flow);
// the QPs it holds wait off the ready list, so a long pause costs no turns, and the engine's
// deadline is the pause's end. When nothing is paused the transmit path pays one comparison.
#include <algorithm>

#include "engine_core.hpp"

namespace rnic::transport {

uint8_t EngineCore::qp_priority(const QueuePair& qp) const noexcept {
    if (qp.is_ud()) {
        // Each UD WR names its own address; the one at the cursor is what goes next.
        if (!requester.has_work(qp)) return config.priority_of_dscp(0);
        return config.priority_of_dscp(static_cast<uint8_t>(qp.sq.at(qp.req.cursor).av.traffic_class >> 2));
    }
    return config.priority_of_dscp(static_cast<uint8_t>(qp.attr.ah_attr.traffic_class >> 2));
}

bool EngineCore::hold_for_pause(QueuePair& qp) {
    if (!any_paused() || !priority_paused(qp_priority(qp))) return false;
    if (!qp.pause_parked) {
        qp.pause_parked = true;
        pause_parked.push_back(qp.qpn);  // reserved for max_qp: never allocates
        ++counters.tx_pause_holds;
    }
    return true;
}

void EngineCore::release_paused() {
    if (pause_parked.empty()) return;
    auto still = pause_parked.begin();
    for (const uint32_t qpn : pause_parked) {
        QueuePair* qp = find_qp(qpn);
        if (!qp || !qp->pause_parked) continue;  // destroyed (or a reused slot's old entry)
        if (priority_paused(qp_priority(*qp))) {
            *still++ = qpn;
            continue;
        }
        qp->pause_parked = false;
        mark_ready(*qp);
    }
    pause_parked.erase(still, pause_parked.end());
}

bool EngineCore::cnps_paused() const noexcept {
    return any_paused() && priority_paused(config.priority_of_dscp(static_cast<uint8_t>(config.congestion.np_cnp_dscp)));
}

std::optional<uint64_t> EngineCore::pause_deadline() const noexcept {
    if (pause_parked.empty() && (pending_cnps.empty() || !cnps_paused())) return std::nullopt;
    std::optional<uint64_t> t;
    for (const uint64_t until : paused_until)
        if (until > now && (!t || until < *t)) t = until;
    return t ? t : std::optional<uint64_t>(now);  // all resumed: release at once
}

void Engine::pause_priority(uint8_t priority, uint64_t until_ns) noexcept {
    EngineCore& c = *core_;
    c.paused_until[priority & 7] = until_ns;
    c.paused_mask_until = *std::max_element(c.paused_until.begin(), c.paused_until.end());
    ++c.counters.pause_requests;
}

uint64_t Engine::priority_paused_until(uint8_t priority) const noexcept {
    return core_->paused_until[priority & 7];
}

}  // namespace rnic::transport
