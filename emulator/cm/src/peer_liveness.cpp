// Liveness of the peers this CM has connections with. RC has no keepalive and neither has the IB
// CM: an application that only waits (an rping server between pings, a ucmatose server after its
// transfers) never learns that the peer's daemon or host died, on Linux as on any RNIC. rnicd
// asks instead: a peer silent for keepalive_idle_ms gets a Get(ClassPortInfo) to its CM, which
// every Linux host answers (rnicd with the ClassPortInfo, Linux's MAD layer with "unsupported
// method"); keepalive_probes unanswered probes keepalive_probe_ms apart and its connections end
// as a DREQ that timed out does: timewait, and DISCONNECTED with -ETIMEDOUT to the application.
// One probe per peer, not per connection, and none while the peer sends MADs of its own.
#include <algorithm>
#include <cerrno>

#include "service_impl.hpp"

namespace rnic::cm {

namespace {

uint64_t ms(uint32_t v) {
    return uint64_t{v} * 1'000'000;
}

}  // namespace

bool CmService::Impl::liveness_on() const noexcept {
    return config.keepalive_idle_ms != 0 && config.keepalive_probes != 0;
}

void CmService::Impl::peer_connected(Id& id, uint64_t now) {
    if (id.in_peer || !liveness_on()) return;
    auto [it, fresh] = peers.try_emplace(id.route.remote_gid.raw);
    Peer& p = it->second;
    if (fresh) {
        p.route = id.route;
        p.last_heard = now;
    }
    p.connections.insert(id.handle);
    id.in_peer = true;
    if (!liveness_timer.armed()) timers.arm(liveness_timer, now + ms(liveness_tick_ms()));
}

void CmService::Impl::peer_disconnected(Id& id) {
    if (!id.in_peer) return;
    id.in_peer = false;
    const auto it = peers.find(id.route.remote_gid.raw);
    if (it == peers.end()) return;
    it->second.connections.erase(id.handle);
    if (it->second.connections.empty()) peers.erase(it);
    if (peers.empty()) timers.cancel(liveness_timer);
}

void CmService::Impl::heard_from(const wire::Gid& gid, uint64_t now) {
    const auto it = peers.find(gid.raw);
    if (it == peers.end()) return;
    it->second.last_heard = now;
    it->second.probes_unanswered = 0;
}

bool CmService::Impl::take_probe_answer(const MadRoute& from, const wire::Mad& mad) {
    if (mad.header.method != wire::MadMethod::GetResp || mad.header.mgmt_class != wire::kMgmtClassCm ||
        mad.header.attribute_id != static_cast<uint16_t>(wire::CmAttr::ClassPortInfo))
        return false;
    const auto it = peers.find(from.remote_gid.raw);
    if (it == peers.end() || it->second.probe_tid != mad.header.transaction_id) return false;
    ++counters.keepalive_answers;
    return true;
}

uint32_t CmService::Impl::liveness_tick_ms() const noexcept {
    const uint32_t shortest = std::min(config.keepalive_idle_ms, config.keepalive_probe_ms);
    return std::max<uint32_t>(shortest / 2, 10);
}

void CmService::Impl::send_probe(Peer& p, uint64_t now) {
    wire::Mad probe;
    probe.header.mgmt_class = wire::kMgmtClassCm;
    probe.header.class_version = wire::kCmClassVersion;
    probe.header.method = wire::MadMethod::Get;
    probe.header.attribute_id = static_cast<uint16_t>(wire::CmAttr::ClassPortInfo);
    // Apart from the connections' TIDs (the byte-swapped communication ID below): top bit set.
    probe.header.transaction_id = (uint64_t{config.hi_tid} << 32) | 0x8000'0000u | (probe_seq++ & 0x7FFF'FFFFu);
    p.probe_tid = probe.header.transaction_id;
    p.probe_sent = now;
    ++p.probes_unanswered;
    ++counters.keepalives_sent;
    send(p.route, probe);
}

void CmService::Impl::liveness_tick(uint64_t now) {
    std::vector<std::array<uint8_t, 16>> lost;
    for (auto& [gid, p] : peers) {
        if (p.probes_unanswered == 0) {
            if (now - p.last_heard >= ms(config.keepalive_idle_ms)) send_probe(p, now);
        } else if (now - p.probe_sent >= ms(config.keepalive_probe_ms)) {
            if (p.probes_unanswered >= config.keepalive_probes)
                lost.push_back(gid);
            else
                send_probe(p, now);
        }
    }
    for (const auto& gid : lost) peer_lost(gid, now);
    if (!peers.empty()) timers.arm(liveness_timer, now + ms(liveness_tick_ms()));
}

void CmService::Impl::peer_lost(const std::array<uint8_t, 16>& gid, uint64_t now) {
    const auto it = peers.find(gid);
    if (it == peers.end()) return;
    ++counters.peers_lost;
    // enter_timewait takes each id off the peer (and the last one the peer off the map).
    const std::vector<uint32_t> connections(it->second.connections.begin(), it->second.connections.end());
    for (uint32_t h : connections) {
        const auto found = ids.find(h);
        if (found == ids.end()) continue;
        Id& id = *found->second;
        if (id.ib == IbState::DreqSent) {
            id.in_peer = false;  // its own DREQ retries decide, as Linux's do
            continue;
        }
        const bool connected = id.state == RdmaState::Connect;
        enter_timewait(id, now);
        if (connected) {
            id.state = RdmaState::Disconnect;
            queue_event(id, event_for(id, EventType::Disconnected, -ETIMEDOUT));
        }
    }
    peers.erase(gid);
    if (peers.empty()) timers.cancel(liveness_timer);
}

}  // namespace rnic::cm
