// The engine's side of congestion control (docs/congestion.md): CE-marked frames in -> CNPs out
// (notification point), CNPs in -> the QP's rate (reaction point), and the pacing of a
// rate-limited QP's requests. A QP that never saw a CNP pays one flag test per turn.
#include <algorithm>

#include "engine_core.hpp"
#include "frame_builder.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/source_port.hpp"

namespace rnic::transport {
namespace {

void rearm_rate_timer(EngineCore& core, QueuePair& qp) {
    QpCongestion& cc = *qp.cc;
    if (auto next = cc.rp.next_event_ns())
        core.arm(cc.rate_timer, *next);
    else
        core.cancel(cc.rate_timer);
}

}  // namespace

void EngineCore::on_ce_marked(QueuePair& qp, const wire::RoceFrame& frame) {
    const cc::DcqcnParams& params = config.congestion;
    if (!params.np_enabled_for(config.priority_of_dscp(frame.dscp()))) return;
    if (!qp.cc->np.on_ce_marked(params, now)) return;
    if (pending_cnps.size() >= pending_cnps.capacity()) return;  // one per QP at most anyway
    const auto sgid = std::find(config.gids.begin(), config.gids.end(), frame.dst_gid);
    PendingCnp cnp;
    cnp.qpn = qp.qpn;
    cnp.dest_qpn = qp.is_ud() ? (frame.ext.deth ? frame.ext.deth->src_qp : 0) : qp.attr.dest_qp_num;
    cnp.dmac = frame.eth.src;
    cnp.dgid = frame.src_gid;
    cnp.sgid_index = static_cast<uint8_t>(sgid - config.gids.begin());
    pending_cnps.push_back(cnp);
}

void EngineCore::on_cnp(const wire::RoceFrame& frame) {
    QueuePair* qp = find_qp(frame.bth.dest_qp);
    // A CNP must come from the QP's peer (connected QPs) like any other frame of the flow.
    if (!qp || (!qp->is_ud() && frame.src_gid != qp->attr.ah_attr.dgid)) {
        ++counters.rp_cnp_ignored;
        return;
    }
    ++qp->counters.cnps_received;
    if (!config.congestion.rp_enabled_for(config.priority_of_dscp(static_cast<uint8_t>(qp->attr.ah_attr.traffic_class >> 2)))) {
        ++counters.rp_cnp_ignored;
        return;
    }
    ++counters.rp_cnp_handled;
    qp->cc->rp.on_cnp(now);
    rearm_rate_timer(*this, *qp);
}

size_t EngineCore::emit_cnps(FrameSink& sink, size_t max_frames) {
    size_t sent = 0;
    while (sent < max_frames && !pending_cnps.empty()) {
        const PendingCnp cnp = pending_cnps[0];
        wire::FrameSpec spec;
        spec.src_mac = config.mac;
        spec.dst_mac = cnp.dmac;
        spec.src_gid = cnp.sgid_index < config.gids.size() ? config.gids[cnp.sgid_index] : wire::Gid{};
        spec.dst_gid = cnp.dgid;
        spec.dscp = static_cast<uint8_t>(config.congestion.np_cnp_dscp);
        spec.ecn = 0;  // a CNP is not ECN-capable: marking it would be meaningless
        spec.src_port = wire::rocev2_source_port(cnp.qpn, cnp.dest_qpn);
        spec.bth.opcode = wire::op::kCnp;
        spec.bth.becn = true;  // RoCEv2 annex A17: BECN set, PSN 0, 16 reserved bytes
        spec.bth.dest_qp = cnp.dest_qpn;
        spec.bth.pkey = 0xFFFF;
        const Emit result = emit_frame(*this, sink, spec);
        if (result == Emit::NoRoom) break;
        pending_cnps.pop_front();
        if (result != Emit::Sent) continue;
        ++sent;
        ++counters.np_cnp_sent;
        if (QueuePair* qp = find_qp(cnp.qpn)) ++qp->counters.cnps_sent;
    }
    return sent;
}

bool EngineCore::hold_for_pacing(QueuePair& qp) {
    QpCongestion& cc = *qp.cc;
    const uint64_t rate = cc.rp.current_rate_kbps();
    if (!cc.rp.limited() || cc.pacer.may_send(now, rate)) return false;
    arm(cc.pace_timer, cc.pacer.earliest_departure_ns(rate));
    return true;
}

void EngineCore::after_paced_send(QueuePair& qp, uint64_t frame_bytes) {
    QpCongestion& cc = *qp.cc;
    if (!cc.rp.limited()) return;
    cc.pacer.on_sent(frame_bytes, now, cc.rp.current_rate_kbps());
    cc.rp.on_bytes_sent(frame_bytes, now);
    rearm_rate_timer(*this, qp);
}

void EngineCore::on_congestion_timer(QueuePair& qp, TimerKind kind) {
    if (kind == TimerKind::CongestionRate) {
        qp.cc->rp.advance(now);
        rearm_rate_timer(*this, qp);
        // A raised rate shortens the pacing gap at once (TxPacer): the QP is offered a turn
        // below, and hold_for_pacing() re-arms the pace timer at the new departure if it must
        // still wait.
    }
    // Either timer may have released the QP: a rate increase ends pacing, the pace timer is due.
    if (requester.has_work(qp)) mark_ready(qp);
}

void EngineCore::on_congestion_params_changed() {
    qps.for_each([&](uint32_t, QueuePair& qp) {
        if (!qp.cc) return;
        const bool was_limited = qp.cc->rp.limited();
        qp.cc->rp.on_params_changed(now);
        rearm_rate_timer(*this, qp);
        // Released from pacing by a new ceiling or floor: its next request need not wait.
        if (was_limited && !qp.cc->rp.limited()) {
            cancel(qp.cc->pace_timer);
            if (requester.has_work(qp)) mark_ready(qp);
        }
    });
}

void EngineCore::init_congestion_timers(QueuePair& qp) noexcept {
    qp.cc->rate_timer.owner = qp.cc->pace_timer.owner = qp.qpn;
    qp.cc->rate_timer.kind = static_cast<uint8_t>(TimerKind::CongestionRate);
    qp.cc->pace_timer.kind = static_cast<uint8_t>(TimerKind::Pacing);
}

void EngineCore::cancel_congestion_timers(QueuePair& qp) noexcept {
    if (!qp.cc) return;
    cancel(qp.cc->rate_timer);
    cancel(qp.cc->pace_timer);
}

}  // namespace rnic::transport
