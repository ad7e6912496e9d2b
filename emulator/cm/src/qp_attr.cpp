// rdma_init_qp_attr: the attributes librdmacm moves a QP to INIT, RTR and RTS with, computed as
// Linux's rdma_cm (cma_ib_init_qp_attr before there is a connection, and for UD) and ib_cm
// (cm_init_qp_{init,rtr,rts}_attr) do.
#include <cerrno>
#include <cstring>

#include "service_impl.hpp"

namespace rnic::cm {

namespace {

bool connected_state(IbState s, bool requester_waiting_allowed) {
    switch (s) {
        case IbState::ReqSent:
        case IbState::MraReqRcvd:
            return requester_waiting_allowed;
        case IbState::ReqRcvd:
        case IbState::MraReqSent:
        case IbState::RepRcvd:
        case IbState::MraRepSent:
        case IbState::RepSent:
        case IbState::MraRepRcvd:
        case IbState::Established:
            return true;
        default:
            return false;
    }
}

}  // namespace

int CmService::Impl::init_qp_attr(Id& id, uint32_t qp_state, abi::CmInitQpAttrReply& out) {
    out = {};
    abi::QpAttr& a = out.attr;
    a.qp_state = qp_state;
    uint32_t& mask = out.attr_mask;
    if (!id.has_ib || id.qp_type == verbs::kQptUd) {
        // No connection yet (or UD, which never has one): the port and P_Key, and the Q_Key or
        // no remote access.
        a.pkey_index = 0;
        a.port_num = 1;
        mask = verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort;
        if (id.qp_type == verbs::kQptUd) {
            a.qkey = default_qkey(id);
            mask |= verbs::kQpQkey;
        } else {
            a.qp_access_flags = 0;
            mask |= verbs::kQpAccessFlags;
        }
    } else if (qp_state == verbs::kQpsInit) {
        if (!connected_state(id.ib, true)) return EINVAL;
        mask = verbs::kQpState | verbs::kQpAccessFlags | verbs::kQpPkeyIndex | verbs::kQpPort;
        a.qp_access_flags = verbs::kAccessRemoteWrite;
        if (id.responder_resources) a.qp_access_flags |= verbs::kAccessRemoteRead | verbs::kAccessRemoteAtomic;
        a.pkey_index = 0;
        a.port_num = 1;
    } else if (qp_state == verbs::kQpsRtr) {
        if (!connected_state(id.ib, false)) return EINVAL;
        mask = verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn | verbs::kQpRqPsn;
        const Path& p = id.path;
        abi::AddressVector& av = a.ah_attr;
        std::memcpy(av.dgid, p.dgid.raw.data(), 16);
        av.flow_label = p.flow_label;
        av.sgid_index = p.sgid_index;
        av.hop_limit = p.hop_limit;
        av.traffic_class = p.traffic_class;
        av.sl = p.sl;
        av.is_global = 1;
        av.port_num = 1;
        av.static_rate = p.rate;
        if (id.have_dmac) std::memcpy(av.dmac, id.dmac.data(), 6);
        a.path_mtu = id.path_mtu;
        a.dest_qp_num = id.remote_qpn;
        a.rq_psn = id.rq_psn;
        if (id.qp_type == verbs::kQptRc) {
            mask |= verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer;
            a.max_dest_rd_atomic = id.responder_resources;
            a.min_rnr_timer = 0;
        }
    } else if (qp_state == verbs::kQpsRts) {
        if (!connected_state(id.ib, false)) return EINVAL;
        mask = verbs::kQpState | verbs::kQpSqPsn;
        a.sq_psn = id.sq_psn;
        if (id.qp_type == verbs::kQptRc) {
            mask |= verbs::kQpRetryCnt | verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic | verbs::kQpTimeout;
            a.retry_cnt = id.retry_count;
            a.rnr_retry = id.rnr_retry_count;
            a.max_rd_atomic = id.initiator_depth;
            a.timeout = id.av_timeout;
        }
    } else {
        return EINVAL;
    }
    // Each side receives from the PSN it announced in its REQ or REP (rdma_cm's seq_num).
    if (qp_state == verbs::kQpsRtr) a.rq_psn = id.seq_num;
    if ((mask & verbs::kQpTimeout) && id.ack_timeout_set) a.timeout = id.ack_timeout;
    return 0;
}

}  // namespace rnic::cm
