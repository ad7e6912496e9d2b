// What the application asks of a connection: rdma_cm's connect, accept, reject, disconnect,
// notify and destroy, down to the IB CM messages each sends (cma.c's cma_connect_ib,
// cma_accept_ib, cma_send_sidr_rep..., and cm.c's ib_send_cm_*).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "service_impl.hpp"

namespace rnic::cm {

namespace {

std::span<const uint8_t> user_data(const abi::CmConnParam& p) noexcept {
    return {p.private_data, std::min<size_t>(p.private_data_len, abi::kCmPrivateDataMax)};
}

}  // namespace

// ---- active side ----

int CmService::Impl::send_req(Id& id, const abi::CmConnParam& param, uint64_t now) {
    if (param.private_data_len > wire::kRdmaCmReqUserDataSize) return EINVAL;
    const Path& path = id.path;
    wire::CmReq req;
    id.local_comm_id = next_comm_id();
    by_comm_id[id.local_comm_id] = &id;
    id.has_ib = true;
    id.remote_comm_id = 0;
    id.tid = form_tid(id);
    req.local_comm_id = id.local_comm_id;
    req.service_id = wire::rdma_cm_service_id(static_cast<wire::RdmaPortSpace>(id.port_space), id.dst.port);
    req.local_ca_guid = config.node_guid;
    req.local_qpn = id.qp_num;
    req.responder_resources = param.responder_resources;
    req.initiator_depth = param.initiator_depth;
    req.remote_cm_response_timeout = kCmResponseTimeout;
    req.transport = id.qp_type == verbs::kQptUc ? wire::CmTransport::Uc : wire::CmTransport::Rc;
    req.end_to_end_flow_control = param.flow_control != 0;
    req.starting_psn = id.seq_num;
    req.local_cm_response_timeout = kCmResponseTimeout;
    req.retry_count = std::min<uint8_t>(7, param.retry_count);
    req.pkey = 0xFFFF;
    req.path_mtu = static_cast<uint8_t>(path.mtu);
    req.rnr_retry_count = std::min<uint8_t>(7, param.rnr_retry_count);
    req.max_cm_retries = kMaxCmRetries;
    req.srq = param.srq != 0;
    wire::CmPath& pp = req.primary_path;
    // A routed path (hop limit > 1) has no LIDs to give: Linux puts the permissive LID in both.
    pp.local_lid = pp.remote_lid = path.hop_limit > 1 ? 0xFFFF : 0;
    pp.local_gid = path.sgid;
    pp.remote_gid = path.dgid;
    pp.flow_label = path.flow_label;
    pp.packet_rate = path.rate;
    pp.traffic_class = path.traffic_class;
    pp.hop_limit = path.hop_limit;
    pp.sl = path.sl;
    pp.subnet_local = path.hop_limit <= 1;
    pp.local_ack_timeout = ack_timeout(config.local_ca_ack_delay, path.packet_life_time);
    const auto hdr = wire::RdmaCmIpHeader::make(id.src.addr, id.dst.addr, id.src.port);
    wire::put_rdma_cm_private_data(hdr, user_data(param), req.private_data);

    id.timeout_ms = 2 * ms_of(path.packet_life_time) + ms_of(kCmResponseTimeout);
    id.max_cm_retries = kMaxCmRetries;
    id.initiator_depth = param.initiator_depth;
    id.responder_resources = param.responder_resources;
    id.retry_count = req.retry_count;
    id.path_mtu = path.mtu;
    id.local_qpn = id.qp_num;
    id.rq_psn = id.seq_num;
    id.av_timeout = static_cast<uint8_t>(path.packet_life_time + 1);
    id.route = route_of(path);
    id.ib = IbState::ReqSent;
    send_with_retries(id, wire::encode_cm(req, id.tid), id.timeout_ms, id.max_cm_retries, now);
    count_sent(wire::CmAttr::Req);
    return 0;
}

int CmService::Impl::send_sidr_req(Id& id, const abi::CmConnParam& param, uint64_t now) {
    if (param.private_data_len > wire::kRdmaCmSidrReqUserDataSize) return EINVAL;
    wire::CmSidrReq req;
    id.local_comm_id = next_comm_id();
    by_comm_id[id.local_comm_id] = &id;
    id.has_ib = true;
    id.remote_comm_id = 0;
    id.tid = form_tid(id);
    req.request_id = id.local_comm_id;
    req.pkey = 0xFFFF;
    req.service_id = wire::rdma_cm_service_id(static_cast<wire::RdmaPortSpace>(id.port_space), id.dst.port);
    id.service_id = req.service_id;
    const auto hdr = wire::RdmaCmIpHeader::make(id.src.addr, id.dst.addr, id.src.port);
    wire::put_rdma_cm_private_data(hdr, user_data(param), req.private_data);
    id.timeout_ms = ms_of(kCmResponseTimeout);
    id.max_cm_retries = kMaxCmRetries;
    id.route = route_of(id.path);
    id.ib = IbState::SidrReqSent;
    send_with_retries(id, wire::encode_cm(req, id.tid), id.timeout_ms, id.max_cm_retries, now);
    count_sent(wire::CmAttr::SidrReq);
    return 0;
}

int CmService::connect(uint32_t owner, uint32_t id, const abi::CmConnParam& param, uint64_t now_ns) {
    Impl& m = *impl_;
    Id* p = m.find(owner, id);
    if (!p) return ENOENT;
    if (p->state != RdmaState::RouteResolved) return EINVAL;
    if (m.channel_full(*p)) return ENOBUFS;
    p->qp_num = param.qp_num & 0xFFFFFF;
    p->srq = param.srq != 0;
    p->state = RdmaState::Connect;
    const int err = p->qp_type == verbs::kQptUd ? m.send_sidr_req(*p, param, now_ns) : m.send_req(*p, param, now_ns);
    if (err) p->state = RdmaState::RouteResolved;
    return err;
}

int CmService::Impl::send_rtu(Id& id, uint64_t now) {
    if (id.ib != IbState::RepRcvd && id.ib != IbState::MraRepSent) return EINVAL;
    wire::CmRtu rtu;
    rtu.local_comm_id = id.local_comm_id;
    rtu.remote_comm_id = id.remote_comm_id;
    id.saved_private.fill(0);
    id.ib = IbState::Established;
    ++counters.established;
    peer_connected(id, now);
    send_cm(id.route, rtu, id.tid);
    return 0;
}

// ---- passive side ----

uint32_t CmService::Impl::default_qkey(Id& id) {
    if (!id.qkey) id.qkey = verbs::kRdmaUdpQkey;
    return id.qkey;
}

int CmService::Impl::send_rep(Id& id, const abi::CmConnParam& param, uint64_t now) {
    if (id.ib != IbState::ReqRcvd && id.ib != IbState::MraReqSent) return EINVAL;
    if (param.private_data_len > wire::kCmRepPrivateDataSize) return EINVAL;
    wire::CmRep rep;
    rep.local_comm_id = id.local_comm_id;
    rep.remote_comm_id = id.remote_comm_id;
    rep.local_qpn = id.qp_num;
    rep.starting_psn = id.seq_num;
    rep.responder_resources = param.responder_resources;
    rep.initiator_depth = param.initiator_depth;
    rep.target_ack_delay = config.local_ca_ack_delay;
    rep.end_to_end_flow_control = param.flow_control != 0;
    rep.rnr_retry_count = std::min<uint8_t>(7, param.rnr_retry_count);
    rep.srq = id.srq;
    rep.local_ca_guid = config.node_guid;
    std::copy_n(param.private_data, param.private_data_len, rep.private_data.begin());
    id.ib = IbState::RepSent;
    id.initiator_depth = param.initiator_depth;
    id.responder_resources = param.responder_resources;
    id.rq_psn = id.seq_num;
    id.local_qpn = id.qp_num;
    send_with_retries(id, wire::encode_cm(rep, id.tid), id.timeout_ms, id.max_cm_retries, now);
    count_sent(wire::CmAttr::Rep);
    return 0;
}

int CmService::Impl::send_sidr_rep(Id& id, wire::CmSidrStatus status, uint32_t qkey, std::span<const uint8_t> pd,
                                   uint64_t) {
    if (id.ib != IbState::SidrReqRcvd) return EINVAL;
    if (pd.size() > wire::kCmSidrRepPrivateDataSize) return EINVAL;
    wire::CmSidrRep rep;
    rep.request_id = id.remote_comm_id;
    rep.status = status;
    rep.service_id = id.service_id;
    if (status == wire::CmSidrStatus::Success) {
        if (qkey && id.qkey && qkey != id.qkey) return EINVAL;
        if (qkey) id.qkey = qkey;
        rep.qkey = default_qkey(id);
        rep.qpn = id.qp_num;
    }
    std::copy(pd.begin(), pd.end(), rep.private_data.begin());
    id.ib = IbState::Idle;
    if (id.in_sidr) {
        std::erase_if(remote_sidr, [&](const auto& kv) { return kv.second == &id; });
        id.in_sidr = false;
    }
    send_cm(id.route, rep, id.tid);
    return 0;
}

int CmService::accept(uint32_t owner, uint32_t id, const abi::CmConnParam& param, uint64_t now_ns) {
    Impl& m = *impl_;
    Id* p = m.find(owner, id);
    if (!p) return ENOENT;
    if (p->state != RdmaState::Connect || !p->has_ib) return EINVAL;
    // The active side after CONNECT_RESPONSE: librdmacm's ACCEPT without parameters, the RTU.
    if (p->ib == IbState::RepRcvd || p->ib == IbState::MraRepSent) return m.send_rtu(*p, now_ns);
    p->qp_num = param.qp_num & 0xFFFFFF;
    p->srq = param.srq != 0;
    int err;
    if (p->qp_type == verbs::kQptUd) {
        // rdma_ucm passes the Q_Key of AF_IB ids only; IP ids get the port space's.
        err = m.send_sidr_rep(*p, wire::CmSidrStatus::Success, 0, user_data(param), now_ns);
        if (err) m.send_sidr_rep(*p, wire::CmSidrStatus::Reject, 0, {}, now_ns);
        return err;
    }
    err = m.send_rep(*p, param, now_ns);
    // __rdma_accept rejects a request it failed to accept.
    if (err && (p->ib == IbState::ReqRcvd || p->ib == IbState::MraReqSent))
        m.send_rej(*p, wire::CmRejReason::ConsumerDefined, {}, {}, now_ns);
    return err;
}

int CmService::establish(uint32_t owner, uint32_t id, uint64_t now_ns) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (p->state != RdmaState::Connect) return EINVAL;
    return impl_->send_rtu(*p, now_ns);
}

// ---- REJ, DREQ, DREP, MRA ----

int CmService::Impl::send_rej(Id& id, wire::CmRejReason reason, std::span<const uint8_t> ari,
                              std::span<const uint8_t> pd, uint64_t now) {
    if (pd.size() > wire::kCmRejPrivateDataSize || ari.size() > wire::kCmRejAriSize) return EINVAL;
    wire::CmRej rej;
    rej.remote_comm_id = id.remote_comm_id;
    rej.local_comm_id = id.local_comm_id;
    switch (id.ib) {
        case IbState::ReqRcvd:  // the peer has not heard of our id yet
            rej.local_comm_id = 0;
            rej.message_rejected = wire::CmMsgResponse::Req;
            break;
        case IbState::MraReqSent:
            rej.message_rejected = wire::CmMsgResponse::Req;
            break;
        case IbState::RepRcvd:
        case IbState::MraRepSent:
            rej.message_rejected = wire::CmMsgResponse::Rep;
            break;
        default:
            rej.message_rejected = wire::CmMsgResponse::Other;
            break;
    }
    rej.reason = reason;
    rej.ari_length = static_cast<uint8_t>(ari.size());
    std::copy(ari.begin(), ari.end(), rej.ari.begin());
    std::copy(pd.begin(), pd.end(), rej.private_data.begin());
    switch (id.ib) {
        case IbState::ReqSent:
        case IbState::MraReqRcvd:
        case IbState::ReqRcvd:
        case IbState::MraReqSent:
        case IbState::RepRcvd:
        case IbState::MraRepSent:
            reset_to_idle(id);
            break;
        case IbState::RepSent:
        case IbState::MraRepRcvd:
            enter_timewait(id, now);
            break;
        default:
            return EINVAL;
    }
    send_cm(id.route, rej, id.tid);
    return 0;
}

int CmService::reject(uint32_t owner, uint32_t id, uint32_t reason, std::span<const uint8_t> private_data,
                      uint64_t now_ns) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (!p->has_ib) return EINVAL;
    if (p->qp_type == verbs::kQptUd)
        return impl_->send_sidr_rep(*p, wire::CmSidrStatus::Reject, 0, private_data, now_ns);
    // rdma_ucm lets applications reject as the consumer, or for an unsupported vendor option.
    if (reason == 0) reason = static_cast<uint32_t>(wire::CmRejReason::ConsumerDefined);
    if (reason != static_cast<uint32_t>(wire::CmRejReason::ConsumerDefined) &&
        reason != static_cast<uint32_t>(wire::CmRejReason::VendorOptionNotSupported))
        return EINVAL;
    return impl_->send_rej(*p, static_cast<wire::CmRejReason>(reason), {}, private_data, now_ns);
}

int CmService::Impl::send_dreq(Id& id, uint64_t now) {
    if (id.ib != IbState::Established) return EINVAL;
    wire::CmDreq dreq;
    dreq.local_comm_id = id.local_comm_id;
    dreq.remote_comm_id = id.remote_comm_id;
    dreq.remote_qpn_eecn = id.remote_qpn;
    id.ib = IbState::DreqSent;
    send_with_retries(id, wire::encode_cm(dreq, form_tid(id)), id.timeout_ms, id.max_cm_retries, now);
    count_sent(wire::CmAttr::Dreq);
    return 0;
}

int CmService::Impl::send_drep(Id& id, uint64_t now) {
    if (id.ib != IbState::DreqRcvd) return EINVAL;
    id.saved_private.fill(0);
    enter_timewait(id, now);
    wire::CmDrep drep;
    drep.local_comm_id = id.local_comm_id;
    drep.remote_comm_id = id.remote_comm_id;
    send_cm(id.route, drep, id.tid);
    return 0;
}

int CmService::disconnect(uint32_t owner, uint32_t id, uint64_t now_ns) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (!p->has_ib) return EINVAL;
    // rdma_disconnect starts a disconnect or answers the peer's; in any other state it does
    // nothing and still succeeds, as Linux's does.
    if (impl_->send_dreq(*p, now_ns) != 0) impl_->send_drep(*p, now_ns);
    return 0;
}

void CmService::Impl::send_mra_delayed(Id& id) {
    if (id.ib == IbState::ReqRcvd)
        id.ib = IbState::MraReqSent;
    else if (id.ib == IbState::RepRcvd)
        id.ib = IbState::MraRepSent;
    else
        return;
    id.service_timeout = kMraServiceTimeout;
    id.saved_private.fill(0);
}

int CmService::Impl::cm_establish(Id& id, uint64_t now) {
    if (id.ib == IbState::Established) return EISCONN;
    if (id.ib != IbState::RepSent && id.ib != IbState::MraRepRcvd) return EINVAL;
    id.ib = IbState::Established;
    cancel_send(id);
    ++counters.established;
    peer_connected(id, now);
    if (id.state == RdmaState::Connect) queue_event(id, event_for(id, EventType::Established, 0));
    return 0;
}

int CmService::notify(uint32_t owner, uint32_t id, uint32_t event, uint64_t now_ns) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (!p->has_ib) return EINVAL;
    if (event == verbs::kEventCommEst) return impl_->cm_establish(*p, now_ns);
    // Path migration has no alternate path to move to on RoCE: accepted while established.
    if (event == verbs::kEventPathMig) return p->ib == IbState::Established ? 0 : EINVAL;
    return EINVAL;
}

// ---- destroy ----

// Linux cancels the DREQ when the id goes (cm_destroy_id): a lost DREQ, and a program that
// destroys its id right after rdma_disconnect (rping, ucmatose do), leave the peer connected
// until its own traffic fails, forever for a peer that only waits. Here the connection outlives
// the id: the DREQ is retried as if the application waited, the peer's DREQ is answered, and the
// id goes when its timewait ends. The application's share of it (limit, port, channel) goes now.
bool CmService::Impl::orphan_disconnect(Id& id, uint64_t now) {
    if (orphans >= kMaxOrphans) return false;
    id.timeout_ms = std::min(id.timeout_ms, kOrphanMaxWaitMs);
    if (id.ib == IbState::Established) {
        send_dreq(id, now);
    } else if (id.sending && id.send_timeout_ms > kOrphanMaxWaitMs) {
        id.send_timeout_ms = kOrphanMaxWaitMs;
        timers.arm(id.send_timer, now + uint64_t{kOrphanMaxWaitMs} * 1'000'000);
    }
    release_port(id);
    std::erase(resolving, id.handle);
    if (const auto ch = channels.find(id.channel); ch != channels.end()) {
        std::erase_if(ch->second.events, [&](const abi::CmEvent& e) { return e.id == id.handle; });
        --ch->second.ids;
    }
    id.channel = 0;
    const uint32_t owner = id.owner;
    id.owner = 0;
    id.orphan = true;
    ++orphans;
    ++counters.orphaned_disconnects;
    if (hooks) hooks->id_released(owner);
    return true;
}

void CmService::Impl::destroy_ib(Id& id, uint64_t now) {
    id.state = RdmaState::Destroying;
    if (!id.requests.empty()) {
        const std::vector<uint32_t> untaken = id.requests;
        for (uint32_t r : untaken)
            if (const auto it = ids.find(r); it != ids.end()) destroy_ib(*it->second, now);
    }
    switch (id.ib) {
        case IbState::SidrReqSent:
            cancel_send(id);
            break;
        case IbState::SidrReqRcvd:
            send_sidr_rep(id, wire::CmSidrStatus::Reject, 0, {}, now);
            break;
        case IbState::ReqSent:
        case IbState::MraReqRcvd: {
            // The peer learns the request timed out, and which CA gave up (its GUID as ARI).
            cancel_send(id);
            std::array<uint8_t, 8> guid{};
            for (int i = 0; i < 8; ++i) guid[i] = static_cast<uint8_t>(config.node_guid >> (56 - 8 * i));
            send_rej(id, wire::CmRejReason::Timeout, guid, {}, now);
            break;
        }
        case IbState::ReqRcvd:
        case IbState::RepSent:
        case IbState::MraRepRcvd:
        case IbState::MraReqSent:
        case IbState::RepRcvd:
        case IbState::MraRepSent:
            send_rej(id, wire::CmRejReason::ConsumerDefined, {}, {}, now);
            break;
        case IbState::Established:
        case IbState::DreqSent:
            if (orphan_disconnect(id, now)) return;
            // Too many orphans already: one DREQ, not retried, as Linux does.
            if (id.ib == IbState::Established) send_dreq(id, now);
            cancel_send(id);
            enter_timewait(id, now);
            break;
        case IbState::DreqRcvd:
            send_drep(id, now);
            break;
        default:
            break;
    }
    free_id(id, now);
}

}  // namespace rnic::cm
