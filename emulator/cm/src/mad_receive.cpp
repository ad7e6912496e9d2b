// The IB CM's receiving side (cm.c's cm_*_handler) with rdma_cm's reaction to each event
// (cma.c's cma_ib_handler, cma_ib_req_handler, cma_sidr_rep_handler). Every MAD is checked
// before it is used; whatever does not fit (bad format, unknown ids, a state that does not expect
// it) is counted and dropped, never trusted.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "service_impl.hpp"

namespace rnic::cm {

namespace {

abi::CmEvent with_private(abi::CmEvent ev, std::span<const uint8_t> pd) {
    const size_t n = std::min<size_t>(pd.size(), abi::kCmPrivateDataMax);
    std::memcpy(ev.param.private_data, pd.data(), n);
    ev.param.private_data_len = static_cast<uint32_t>(n);
    return ev;
}

bool match_private_data(const Id& listener, const wire::RdmaCmIpHeader& hdr) {
    const Endpoint& a = listener.src;
    if (a.any() && !listener.afonly) return true;
    if (a.family == kAfInet) {
        if (hdr.ip_version != 4) return false;
        return a.any() || hdr.dst_addr == a.addr;
    }
    if (a.family == kAfInet6) {
        if (hdr.ip_version != 6) return false;
        return a.any() || hdr.dst_addr == a.addr;
    }
    return false;
}

}  // namespace

Id* CmService::Impl::acquire(uint32_t local_comm_id, uint32_t remote_comm_id) const noexcept {
    const auto it = by_comm_id.find(local_comm_id);
    if (it == by_comm_id.end() || it->second->remote_comm_id != remote_comm_id) return nullptr;
    return it->second;
}

Id* CmService::Impl::find_listener(uint16_t ps, uint16_t port, const wire::RdmaCmIpHeader& hdr, bool& listening) const {
    listening = false;
    const auto it = binds.find({ps, port});
    if (it == binds.end()) return nullptr;
    const auto& owners = it->second.owners;
    for (const Id* o : owners) listening |= o->state == RdmaState::Listen;
    // Linux keeps the bind list newest first and takes the first listener that matches.
    for (auto o = owners.rbegin(); o != owners.rend(); ++o)
        if ((*o)->state == RdmaState::Listen && match_private_data(**o, hdr)) return *o;
    return nullptr;
}

// cma_save_ip_info: the new id's source is the address the peer connected to, on the listener's
// port; its destination the peer's address and port, from the rdma_cm header.
void CmService::Impl::new_connection_addresses(Id& id, const wire::RdmaCmIpHeader& hdr, uint16_t local_port) {
    const uint16_t family = hdr.ip_version == 4 ? kAfInet : kAfInet6;
    id.src = {};
    id.src.family = family;
    id.src.addr = hdr.dst_addr;
    id.src.port = local_port;
    id.dst = {};
    id.dst.family = family;
    id.dst.addr = hdr.src_addr;
    id.dst.port = hdr.src_port;
}

void CmService::receive(const MadRoute& from, std::span<const uint8_t> bytes, uint64_t now_ns) {
    Impl& m = *impl_;
    ++m.counters.mads_received;
    const auto parsed = wire::parse_mad(bytes);
    if (!parsed) {
        ++m.counters.bad_mads;
        return;
    }
    const wire::Mad& mad = *parsed;
    if (!m.peers.empty()) {
        m.heard_from(from.remote_gid, now_ns);
        if (m.take_probe_answer(from, mad)) return;
    }
    const auto method = mad.header.method;
    if (method == wire::MadMethod::Get || method == wire::MadMethod::Set) {
        m.on_get(from, mad);
        return;
    }
    if (mad.header.mgmt_class != wire::kMgmtClassCm || mad.header.class_version != wire::kCmClassVersion ||
        method != wire::MadMethod::Send) {
        // Responses, traps and other classes: nothing here asked for them.
        ++(mad.header.mgmt_class == wire::kMgmtClassCm && !mad.header.is_response() ? m.counters.bad_mads
                                                                                    : m.counters.unmatched_mads);
        return;
    }
    const auto msg = wire::decode_cm(mad);
    if (!msg) {
        ++m.counters.bad_mads;
        return;
    }
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, wire::CmReq>)
                m.on_req(from, mad, v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmMra>)
                m.on_mra(v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmRej>)
                m.on_rej(v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmRep>)
                m.on_rep(from, mad, v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmRtu>)
                m.on_rtu(v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmDreq>)
                m.on_dreq(from, mad, v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmDrep>)
                m.on_drep(v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmSidrReq>)
                m.on_sidr_req(from, mad, v, now_ns);
            else if constexpr (std::is_same_v<T, wire::CmSidrRep>)
                m.on_sidr_rep(v, now_ns);
        },
        *msg);
}

// A Get or Set to QP 1. ClassPortInfo of the CM class is answered; anything else gets what Linux's
// MAD layer sends when no agent takes it: the request back with status "unsupported".
void CmService::Impl::on_get(const MadRoute& from, const wire::Mad& mad) {
    if (mad.header.mgmt_class == wire::kMgmtClassCm && mad.header.class_version == wire::kCmClassVersion &&
        mad.header.method == wire::MadMethod::Get &&
        mad.header.attribute_id == static_cast<uint16_t>(wire::CmAttr::ClassPortInfo)) {
        wire::Mad resp = mad;
        resp.header.method = wire::MadMethod::GetResp;
        resp.header.status = 0;
        resp.data.fill(0);
        wire::ClassPortInfo info;
        info.base_version = wire::kMadBaseVersion;
        info.class_version = wire::kCmClassVersion;
        info.resp_time_value = kCmResponseTimeout;
        info.write(resp.data.data());
        send(from, resp);
        ++counters.class_port_info_answered;
        return;
    }
    if (const auto resp = wire::unmatched_method_response(mad)) {
        send(from, *resp);
        ++counters.unsupported_answered;
    } else {
        ++counters.bad_mads;
    }
}

void CmService::Impl::on_req(const MadRoute& from, const wire::Mad& mad, const wire::CmReq& req, uint64_t now) {
    ++counters.req_received;
    // A REQ seen before: the request is still being answered, or the connection is over.
    if (const auto dup = remote_ids.find({req.local_ca_guid, req.local_comm_id}); dup != remote_ids.end()) {
        Id& id = *dup->second;
        ++counters.duplicates;
        if (id.ib == IbState::MraReqSent) {
            wire::CmMra mra;
            mra.local_comm_id = id.local_comm_id;
            mra.remote_comm_id = id.remote_comm_id;
            mra.message_mraed = wire::CmMsgResponse::Req;
            mra.service_timeout = id.service_timeout;
            std::copy_n(id.saved_private.begin(), mra.private_data.size(), mra.private_data.begin());
            send_cm(from, mra, id.tid);
        } else if (id.ib == IbState::Timewait) {
            wire::CmRej rej;
            rej.local_comm_id = id.local_comm_id;
            rej.remote_comm_id = id.remote_comm_id;
            rej.message_rejected = wire::CmMsgResponse::Other;
            rej.reason = wire::CmRejReason::StaleConn;
            send_cm(from, rej, id.tid);
        }
        return;
    }
    // The same QP of the same CA connected already: the old connection is stale.
    if (const auto stale = remote_qpns.find({req.local_ca_guid, req.local_qpn}); stale != remote_qpns.end()) {
        ++counters.unmatched_mads;
        issue_rej(from, mad, 0, req.local_comm_id, wire::CmRejReason::StaleConn, wire::CmMsgResponse::Req);
        send_dreq(*stale->second, now);
        return;
    }
    const auto service = wire::parse_rdma_cm_service_id(req.service_id);
    const auto hdr = wire::parse_rdma_cm_ip_header(req.private_data);
    bool listening = false;
    Id* listener = nullptr;
    if (service && hdr)
        listener = find_listener(static_cast<uint16_t>(service->port_space), service->port, *hdr, listening);
    else if (service && binds.count({static_cast<uint16_t>(service->port_space), service->port}))
        for (const Id* o : binds.at({static_cast<uint16_t>(service->port_space), service->port}).owners)
            listening |= o->state == RdmaState::Listen;
    if (!listening) {
        issue_rej(from, mad, 0, req.local_comm_id, wire::CmRejReason::InvalidServiceId, wire::CmMsgResponse::Req);
        return;
    }
    // Someone listens on the service, but not for this request (address, family, QP type, a bad
    // rdma_cm header): rdma_cm refuses it, and the IB CM rejects as the consumer.
    const wire::CmTransport want =
        listener && listener->qp_type == verbs::kQptUc ? wire::CmTransport::Uc : wire::CmTransport::Rc;
    if (!listener || listener->qp_type == verbs::kQptUd || req.transport != want) {
        issue_rej(from, mad, 0, req.local_comm_id, wire::CmRejReason::ConsumerDefined, wire::CmMsgResponse::Req);
        return;
    }
    const int sgid_index = own_address(req.primary_path.remote_gid);
    if (sgid_index < 0) {
        wire::CmRej rej;
        rej.remote_comm_id = req.local_comm_id;
        rej.message_rejected = wire::CmMsgResponse::Req;
        rej.reason = wire::CmRejReason::InvalidGid;
        if (!config.addresses.empty()) {
            rej.ari_length = 16;
            std::copy_n(config.addresses[0].gid.raw.begin(), 16, rej.ari.begin());
        }
        send_cm(from, rej, mad.header.transaction_id);
        return;
    }
    // Linux's ucma drops a request its listener has no room for (ENOMEM): no REJ, the peer's
    // next try may find room.
    if (listener->requests.size() >= listener->backlog || channel_full(*listener)) {
        ++counters.requests_dropped;
        return;
    }
    int err = 0;
    Id* idp = make_id(listener->owner, listener->channel, listener->port_space, listener->qp_type, err);
    if (!idp) {
        ++counters.requests_dropped;
        return;
    }
    Id& id = *idp;
    id.listener = listener->handle;
    listener->requests.push_back(id.handle);
    id.has_ib = true;
    id.local_comm_id = next_comm_id();
    by_comm_id[id.local_comm_id] = &id;
    id.remote_comm_id = req.local_comm_id;
    id.remote_ca_guid = req.local_ca_guid;
    id.tid = mad.header.transaction_id;
    id.service_id = req.service_id;
    id.timeout_ms = ms_of(req.local_cm_response_timeout);
    id.max_cm_retries = req.max_cm_retries;
    id.remote_qpn = req.local_qpn;
    id.initiator_depth = req.responder_resources;
    id.responder_resources = req.initiator_depth;
    // Linux takes the requester's MTU as it is; a port with a smaller one could not use it.
    id.path_mtu = std::clamp<uint32_t>(req.path_mtu, 1, config.active_mtu);
    id.sq_psn = req.starting_psn;
    id.retry_count = req.retry_count;
    id.rnr_retry_count = req.rnr_retry_count;
    Path& p = id.path;
    p.sgid = req.primary_path.remote_gid;
    p.dgid = req.primary_path.local_gid;
    p.sgid_index = static_cast<uint8_t>(sgid_index);
    p.flow_label = req.primary_path.flow_label;
    p.traffic_class = req.primary_path.traffic_class;
    p.hop_limit = from.hop_limit;
    p.sl = req.primary_path.sl;
    p.mtu = id.path_mtu;
    p.rate = req.primary_path.packet_rate;
    p.packet_life_time =
        static_cast<uint8_t>(req.primary_path.local_ack_timeout - (req.primary_path.local_ack_timeout > 0));
    id.path_valid = true;
    id.sgid_index = p.sgid_index;
    id.av_timeout = static_cast<uint8_t>(p.packet_life_time + 1);
    id.route = route_of(p);
    remote_ids[{id.remote_ca_guid, id.remote_comm_id}] = &id;
    id.in_remote_ids = true;
    remote_qpns[{id.remote_ca_guid, id.remote_qpn}] = &id;
    id.in_remote_qpns = true;
    id.ib = IbState::ReqRcvd;
    id.state = RdmaState::Connect;
    new_connection_addresses(id, *hdr, service->port);

    abi::CmEvent ev =
        with_private(event_for(id, EventType::ConnectRequest, 0), wire::rdma_cm_user_data(req.private_data));
    ev.listen_id = listener->handle;
    ev.param.responder_resources = req.initiator_depth;
    ev.param.initiator_depth = req.responder_resources;
    ev.param.flow_control = req.end_to_end_flow_control;
    ev.param.retry_count = req.retry_count;
    ev.param.rnr_retry_count = req.rnr_retry_count;
    ev.param.srq = req.srq;
    ev.param.qp_num = req.local_qpn;
    queue_event(id, ev);
    send_mra_delayed(id);
}

void CmService::Impl::on_mra(const wire::CmMra& mra, uint64_t now) {
    ++counters.mra_received;
    Id* id = nullptr;
    if (mra.message_mraed == wire::CmMsgResponse::Req)
        id = acquire(mra.remote_comm_id, 0);
    else if (mra.message_mraed == wire::CmMsgResponse::Rep || mra.message_mraed == wire::CmMsgResponse::Other)
        id = acquire(mra.remote_comm_id, mra.local_comm_id);
    if (!id) {
        ++counters.unmatched_mads;
        return;
    }
    const uint32_t timeout = ms_of(mra.service_timeout) + ms_of(id->av_timeout);
    if (id->ib == IbState::ReqSent && mra.message_mraed == wire::CmMsgResponse::Req) {
        id->ib = IbState::MraReqRcvd;
        modify_send_timeout(*id, timeout, now);
    } else if (id->ib == IbState::RepSent && mra.message_mraed == wire::CmMsgResponse::Rep) {
        id->ib = IbState::MraRepRcvd;
        modify_send_timeout(*id, timeout, now);
    } else if (id->ib == IbState::MraReqRcvd || id->ib == IbState::MraRepRcvd) {
        ++counters.duplicates;
    } else {
        ++counters.unmatched_mads;
    }
}

void CmService::Impl::on_rej(const wire::CmRej& rej, uint64_t now) {
    ++counters.rej_received;
    Id* id = nullptr;
    if (rej.reason == wire::CmRejReason::Timeout) {
        // The peer gave up on a REQ of ours it had answered: found by its CA GUID (the ARI).
        if (rej.ari_length >= 8) {
            uint64_t guid = 0;
            for (int i = 0; i < 8; ++i) guid = (guid << 8) | rej.ari[i];
            if (const auto it = remote_ids.find({guid, rej.local_comm_id}); it != remote_ids.end())
                id = acquire(it->second->local_comm_id, rej.local_comm_id);
        }
    } else if (rej.message_rejected == wire::CmMsgResponse::Req) {
        id = acquire(rej.remote_comm_id, 0);
    } else {
        id = acquire(rej.remote_comm_id, rej.local_comm_id);
    }
    if (!id) {
        ++counters.unmatched_mads;
        return;
    }
    switch (id->ib) {
        case IbState::ReqSent:
        case IbState::MraReqRcvd:
        case IbState::RepSent:
        case IbState::MraRepRcvd:
        case IbState::ReqRcvd:
        case IbState::MraReqSent:
            if (rej.reason == wire::CmRejReason::StaleConn)
                enter_timewait(*id, now);
            else
                reset_to_idle(*id);
            break;
        case IbState::DreqSent:
        case IbState::RepRcvd:
        case IbState::MraRepSent:
        case IbState::Established:
            enter_timewait(*id, now);
            break;
        default:
            ++counters.unmatched_mads;
            return;
    }
    if (id->state == RdmaState::Connect)
        queue_event(
            *id, with_private(event_for(*id, EventType::Rejected, static_cast<int32_t>(rej.reason)), rej.private_data));
}

void CmService::Impl::on_rep(const MadRoute& from, const wire::Mad& mad, const wire::CmRep& rep, uint64_t now) {
    ++counters.rep_received;
    Id* id = acquire(rep.remote_comm_id, 0);
    if (!id) {
        // Our RTU or MRA was lost: the peer asks again.
        Id* known = acquire(rep.remote_comm_id, rep.local_comm_id);
        if (!known) {
            ++counters.unmatched_mads;
            return;
        }
        ++counters.duplicates;
        if (known->ib == IbState::Established) {
            wire::CmRtu rtu;
            rtu.local_comm_id = known->local_comm_id;
            rtu.remote_comm_id = known->remote_comm_id;
            std::copy_n(known->saved_private.begin(), rtu.private_data.size(), rtu.private_data.begin());
            send_cm(from, rtu, known->tid);
        } else if (known->ib == IbState::MraRepSent) {
            wire::CmMra mra;
            mra.local_comm_id = known->local_comm_id;
            mra.remote_comm_id = known->remote_comm_id;
            mra.message_mraed = wire::CmMsgResponse::Rep;
            mra.service_timeout = known->service_timeout;
            send_cm(from, mra, known->tid);
        }
        return;
    }
    if (id->ib != IbState::ReqSent && id->ib != IbState::MraReqRcvd) {
        ++counters.unmatched_mads;
        return;
    }
    if (remote_ids.count({rep.local_ca_guid, rep.local_comm_id})) {
        ++counters.unmatched_mads;
        return;
    }
    if (const auto stale = remote_qpns.find({rep.local_ca_guid, rep.local_qpn}); stale != remote_qpns.end()) {
        ++counters.unmatched_mads;
        issue_rej(from, mad, rep.remote_comm_id, rep.local_comm_id, wire::CmRejReason::StaleConn,
                  wire::CmMsgResponse::Rep);
        send_dreq(*stale->second, now);
        return;
    }
    id->remote_comm_id = rep.local_comm_id;
    id->remote_ca_guid = rep.local_ca_guid;
    id->remote_qpn = rep.local_qpn;
    remote_ids[{id->remote_ca_guid, id->remote_comm_id}] = id;
    id->in_remote_ids = true;
    remote_qpns[{id->remote_ca_guid, id->remote_qpn}] = id;
    id->in_remote_qpns = true;
    id->ib = IbState::RepRcvd;
    id->initiator_depth = rep.responder_resources;
    id->responder_resources = rep.initiator_depth;
    id->sq_psn = rep.starting_psn;
    id->rnr_retry_count = rep.rnr_retry_count;
    id->target_ack_delay = rep.target_ack_delay;
    id->av_timeout = ack_timeout(id->target_ack_delay, static_cast<uint8_t>(id->av_timeout - 1));
    cancel_send(*id);
    if (id->state != RdmaState::Connect) return;
    // The application answers with the RTU (rdma_accept): until then a repeated REP gets an MRA.
    send_mra_delayed(*id);
    abi::CmEvent ev = with_private(event_for(*id, EventType::ConnectResponse, 0), rep.private_data);
    ev.param.responder_resources = rep.initiator_depth;
    ev.param.initiator_depth = rep.responder_resources;
    ev.param.flow_control = rep.end_to_end_flow_control;
    ev.param.rnr_retry_count = rep.rnr_retry_count;
    ev.param.srq = rep.srq;
    ev.param.qp_num = rep.local_qpn;
    queue_event(*id, ev);
}

void CmService::Impl::on_rtu(const wire::CmRtu& rtu, uint64_t now) {
    ++counters.rtu_received;
    Id* id = acquire(rtu.remote_comm_id, rtu.local_comm_id);
    if (!id) {
        ++counters.unmatched_mads;
        return;
    }
    if (id->ib != IbState::RepSent && id->ib != IbState::MraRepRcvd) {
        ++counters.duplicates;
        return;
    }
    cm_establish(*id, now);
}

void CmService::Impl::on_dreq(const MadRoute& from, const wire::Mad& mad, const wire::CmDreq& dreq, uint64_t now) {
    ++counters.dreq_received;
    Id* id = acquire(dreq.remote_comm_id, dreq.local_comm_id);
    if (!id) {
        // Gone already (our DREP was lost, or the id destroyed): answer anyway, so the peer stops.
        ++counters.duplicates;
        issue_drep(from, mad, dreq);
        return;
    }
    if (id->local_qpn != dreq.remote_qpn_eecn) {
        ++counters.unmatched_mads;
        return;
    }
    switch (id->ib) {
        case IbState::RepSent:
        case IbState::DreqSent:
            cancel_send(*id);
            break;
        case IbState::Established:
        case IbState::MraRepRcvd:
            break;
        case IbState::Timewait: {
            ++counters.duplicates;
            wire::CmDrep drep;
            drep.local_comm_id = id->local_comm_id;
            drep.remote_comm_id = id->remote_comm_id;
            std::copy_n(id->saved_private.begin(), drep.private_data.size(), drep.private_data.begin());
            send_cm(from, drep, id->tid);
            return;
        }
        case IbState::DreqRcvd:
            ++counters.duplicates;
            return;
        default:
            ++counters.unmatched_mads;
            return;
    }
    id->ib = IbState::DreqRcvd;
    id->tid = mad.header.transaction_id;
    if (id->orphan) {
        send_drep(*id, now);
        return;
    }
    if (id->state == RdmaState::Connect) {
        id->state = RdmaState::Disconnect;
        queue_event(*id, with_private(event_for(*id, EventType::Disconnected, 0), dreq.private_data));
    }
}

void CmService::Impl::on_drep(const wire::CmDrep& drep, uint64_t now) {
    ++counters.drep_received;
    Id* id = acquire(drep.remote_comm_id, drep.local_comm_id);
    if (!id || (id->ib != IbState::DreqSent && id->ib != IbState::DreqRcvd)) {
        ++counters.unmatched_mads;
        return;
    }
    enter_timewait(*id, now);
    if (id->state == RdmaState::Connect) {
        id->state = RdmaState::Disconnect;
        queue_event(*id, with_private(event_for(*id, EventType::Disconnected, 0), drep.private_data));
    }
}

void CmService::Impl::on_sidr_req(const MadRoute& from, const wire::Mad& mad, const wire::CmSidrReq& req,
                                  uint64_t now) {
    ++counters.sidr_req_received;
    if (remote_sidr.count({from.remote_gid.raw, req.request_id})) {
        ++counters.duplicates;
        return;
    }
    auto answer = [&](wire::CmSidrStatus status) {
        wire::CmSidrRep rep;
        rep.request_id = req.request_id;
        rep.status = status;
        rep.service_id = req.service_id;
        send_cm(from, rep, mad.header.transaction_id);
    };
    const auto service = wire::parse_rdma_cm_service_id(req.service_id);
    const auto hdr = wire::parse_rdma_cm_ip_header(req.private_data);
    bool listening = false;
    Id* listener = nullptr;
    if (service && hdr)
        listener = find_listener(static_cast<uint16_t>(service->port_space), service->port, *hdr, listening);
    else if (service && binds.count({static_cast<uint16_t>(service->port_space), service->port}))
        for (const Id* o : binds.at({static_cast<uint16_t>(service->port_space), service->port}).owners)
            listening |= o->state == RdmaState::Listen;
    if (!listening) {
        answer(wire::CmSidrStatus::Unsupported);
        return;
    }
    // A listener that cannot take it: Linux destroys the new SIDR id, which answers REJECT.
    int err = 0;
    Id* idp = nullptr;
    if (listener && listener->qp_type == verbs::kQptUd && listener->requests.size() < listener->backlog &&
        !channel_full(*listener))
        idp = make_id(listener->owner, listener->channel, listener->port_space, verbs::kQptUd, err);
    if (!idp) {
        if (listener) ++counters.requests_dropped;
        answer(wire::CmSidrStatus::Reject);
        return;
    }
    (void)now;
    Id& id = *idp;
    id.listener = listener->handle;
    listener->requests.push_back(id.handle);
    id.has_ib = true;
    id.remote_comm_id = req.request_id;
    id.tid = mad.header.transaction_id;
    id.service_id = req.service_id;
    id.route = from;
    id.ib = IbState::SidrReqRcvd;
    id.state = RdmaState::Connect;
    remote_sidr[{from.remote_gid.raw, req.request_id}] = &id;
    id.in_sidr = true;
    new_connection_addresses(id, *hdr, service->port);
    const int sgid_index = own_address(from.local_gid);
    id.sgid_index = static_cast<uint8_t>(sgid_index < 0 ? 0 : sgid_index);

    abi::CmEvent ev =
        with_private(event_for(id, EventType::ConnectRequest, 0), wire::rdma_cm_user_data(req.private_data));
    ev.listen_id = listener->handle;
    std::memcpy(ev.ah_attr.dgid, from.remote_gid.raw.data(), 16);
    ev.ah_attr.flow_label = from.flow_label;
    ev.ah_attr.sgid_index = id.sgid_index;
    ev.ah_attr.hop_limit = from.hop_limit;
    ev.ah_attr.traffic_class = from.traffic_class;
    ev.ah_attr.is_global = 1;
    ev.ah_attr.port_num = 1;
    queue_event(id, ev);
}

void CmService::Impl::on_sidr_rep(const wire::CmSidrRep& rep, uint64_t) {
    ++counters.sidr_rep_received;
    Id* id = acquire(rep.request_id, 0);
    if (!id || id->ib != IbState::SidrReqSent) {
        ++counters.unmatched_mads;
        return;
    }
    id->ib = IbState::Idle;
    cancel_send(*id);
    if (id->state != RdmaState::Connect) return;
    if (rep.status != wire::CmSidrStatus::Success) {
        queue_event(*id, with_private(event_for(*id, EventType::Unreachable, static_cast<int32_t>(rep.status)),
                                      rep.private_data));
        return;
    }
    if (id->qkey && rep.qkey != id->qkey) {
        queue_event(*id, event_for(*id, EventType::AddrError, -EINVAL));
        return;
    }
    id->qkey = rep.qkey;
    abi::CmEvent ev = with_private(event_for(*id, EventType::Established, 0), rep.private_data);
    ev.param.qp_num = rep.qpn;
    ev.param.qkey = rep.qkey;
    const Path& p = id->path;
    std::memcpy(ev.ah_attr.dgid, p.dgid.raw.data(), 16);
    ev.ah_attr.flow_label = p.flow_label;
    ev.ah_attr.sgid_index = p.sgid_index;
    ev.ah_attr.hop_limit = p.hop_limit;
    ev.ah_attr.traffic_class = p.traffic_class;
    ev.ah_attr.sl = p.sl;
    ev.ah_attr.is_global = 1;
    ev.ah_attr.port_num = 1;
    ev.ah_attr.static_rate = p.rate;
    if (id->have_dmac) std::memcpy(ev.ah_attr.dmac, id->dmac.data(), 6);
    queue_event(*id, ev);
}

}  // namespace rnic::cm
