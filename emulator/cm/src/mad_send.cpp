// The IB CM's sending side: transaction IDs, the outbound queue, the one MAD per connection that
// waits for an answer (sent again every timeout_ms, max_cm_retries times, as Linux's MAD layer
// retries it), timewait, and the timers that drive them.
#include <algorithm>
#include <cerrno>

#include "service_impl.hpp"

namespace rnic::cm {

// Linux's cm_form_tid: the MAD agent's number in the upper half, the local communication ID as
// it sits in memory (big-endian, read as a host integer) in the lower.
uint64_t CmService::Impl::form_tid(const Id& id) const noexcept {
    return (uint64_t{config.hi_tid} << 32) | __builtin_bswap32(id.local_comm_id);
}

MadRoute CmService::Impl::route_of(const Path& p) const {
    MadRoute r;
    r.local_gid = p.sgid;
    r.remote_gid = p.dgid;
    r.remote_qpn = 1;
    r.traffic_class = p.traffic_class;
    r.hop_limit = p.hop_limit;
    r.flow_label = p.flow_label;
    return r;
}

void CmService::Impl::send(const MadRoute& to, const wire::Mad& mad) {
    if (outbound.size() >= config.max_outbound) {
        ++counters.outbound_dropped;
        return;
    }
    outbound.push_back(OutboundMad{to, mad});
    ++counters.mads_sent;
}

void CmService::Impl::count_sent(wire::CmAttr attr) {
    switch (attr) {
        case wire::CmAttr::Req:
            ++counters.req_sent;
            break;
        case wire::CmAttr::Mra:
            ++counters.mra_sent;
            break;
        case wire::CmAttr::Rej:
            ++counters.rej_sent;
            break;
        case wire::CmAttr::Rep:
            ++counters.rep_sent;
            break;
        case wire::CmAttr::Rtu:
            ++counters.rtu_sent;
            break;
        case wire::CmAttr::Dreq:
            ++counters.dreq_sent;
            break;
        case wire::CmAttr::Drep:
            ++counters.drep_sent;
            break;
        case wire::CmAttr::SidrReq:
            ++counters.sidr_req_sent;
            break;
        case wire::CmAttr::SidrRep:
            ++counters.sidr_rep_sent;
            break;
        default:
            break;
    }
}

void CmService::Impl::send_cm(const MadRoute& to, const wire::CmMessage& msg, uint64_t tid) {
    send(to, wire::encode_cm(msg, tid));
    count_sent(wire::cm_attr_of(msg));
}

void CmService::Impl::send_with_retries(Id& id, const wire::Mad& mad, uint32_t timeout_ms, uint32_t retries,
                                        uint64_t now) {
    id.sending = true;
    id.sent = mad;
    id.sent_state = id.ib;
    id.retries_left = retries;
    id.send_timeout_ms = timeout_ms;
    send(id.route, mad);
    timers.arm(id.send_timer, now + uint64_t{timeout_ms} * 1'000'000);
}

void CmService::Impl::cancel_send(Id& id) {
    id.sending = false;
    timers.cancel(id.send_timer);
}

// An MRA: the peer needs longer. The outstanding MAD waits the new time before its next try.
void CmService::Impl::modify_send_timeout(Id& id, uint32_t timeout_ms, uint64_t now) {
    if (!id.sending) return;
    id.send_timeout_ms = timeout_ms;
    timers.arm(id.send_timer, now + uint64_t{timeout_ms} * 1'000'000);
}

// cm_process_send_error: the answer never came.
void CmService::Impl::send_timed_out(Id& id, uint64_t now) {
    ++counters.send_timeouts;
    const bool connecting = id.state == RdmaState::Connect;
    switch (id.ib) {
        case IbState::ReqSent:
        case IbState::MraReqRcvd:
        case IbState::RepSent:
        case IbState::MraRepRcvd:
            reset_to_idle(id);
            if (connecting) queue_event(id, event_for(id, EventType::Unreachable, -ETIMEDOUT));
            break;
        case IbState::DreqSent:
            enter_timewait(id, now);
            if (connecting) {
                id.state = RdmaState::Disconnect;
                queue_event(id, event_for(id, EventType::Disconnected, -ETIMEDOUT));
            }
            break;
        case IbState::SidrReqSent:
            id.ib = IbState::Idle;
            if (connecting) queue_event(id, event_for(id, EventType::Unreachable, -ETIMEDOUT));
            break;
        default:
            break;
    }
}

void CmService::Impl::remove_remote(Id& id) {
    peer_disconnected(id);
    if (id.in_remote_ids) {
        remote_ids.erase({id.remote_ca_guid, id.remote_comm_id});
        id.in_remote_ids = false;
    }
    if (id.in_remote_qpns) {
        remote_qpns.erase({id.remote_ca_guid, id.remote_qpn});
        id.in_remote_qpns = false;
    }
}

void CmService::Impl::reset_to_idle(Id& id) {
    id.ib = IbState::Idle;
    cancel_send(id);
    remove_remote(id);
}

// The connection's old packets may still be in flight: its QP numbers are not reused for a new
// connection until they have died, 4.096 us * 2^av_timeout later (about 2 s on RoCE).
void CmService::Impl::enter_timewait(Id& id, uint64_t now) {
    remove_remote(id);
    cancel_send(id);
    id.ib = IbState::Timewait;
    const uint32_t wait_ms = id.orphan ? std::min(ms_of(id.av_timeout), kOrphanMaxWaitMs) : ms_of(id.av_timeout);
    timers.arm(id.timewait_timer, now + uint64_t{wait_ms} * 1'000'000);
}

void CmService::Impl::timewait_expired(Id& id) {
    if (id.ib != IbState::Timewait) return;
    id.ib = IbState::Idle;
    ++counters.timewait_exits;
    if (id.orphan) {
        free_id(id, 0);
        return;
    }
    if (id.state == RdmaState::Disconnect) queue_event(id, event_for(id, EventType::TimewaitExit, 0));
}

void CmService::Impl::issue_rej(const MadRoute& to, const wire::Mad& received, uint32_t local_comm_id,
                                uint32_t remote_comm_id, wire::CmRejReason reason, wire::CmMsgResponse msg) {
    wire::CmRej rej;
    rej.local_comm_id = local_comm_id;
    rej.remote_comm_id = remote_comm_id;
    rej.message_rejected = msg;
    rej.reason = reason;
    send_cm(to, rej, received.header.transaction_id);
}

void CmService::Impl::issue_drep(const MadRoute& to, const wire::Mad& received, const wire::CmDreq& dreq) {
    wire::CmDrep drep;
    drep.local_comm_id = dreq.remote_comm_id;
    drep.remote_comm_id = dreq.local_comm_id;
    send_cm(to, drep, received.header.transaction_id);
}

void CmService::advance(uint64_t now_ns) {
    Impl& m = *impl_;
    while (common::Timer* t = m.timers.pop_due(now_ns)) {
        if (t == &m.liveness_timer) {
            m.liveness_tick(now_ns);
            continue;
        }
        const auto it = m.ids.find(t->owner);
        if (it == m.ids.end()) continue;
        Id& id = *it->second;
        switch (t->kind) {
            case kSendTimer:
                if (!id.sending) break;
                if (id.retries_left > 0) {
                    --id.retries_left;
                    ++m.counters.mads_resent;
                    m.send(id.route, id.sent);
                    m.timers.arm(id.send_timer, now_ns + uint64_t{id.send_timeout_ms} * 1'000'000);
                } else {
                    id.sending = false;
                    m.send_timed_out(id, now_ns);
                }
                break;
            case kTimewaitTimer:
                m.timewait_expired(id);
                break;
            case kResolveTimer:
                m.poll_resolution(id, now_ns);
                break;
            default:
                break;
        }
    }
    if (!m.resolving.empty()) {
        const std::vector<uint32_t> waiting = m.resolving;
        for (uint32_t h : waiting)
            if (const auto it = m.ids.find(h); it != m.ids.end()) m.poll_resolution(*it->second, now_ns);
    }
}

}  // namespace rnic::cm
