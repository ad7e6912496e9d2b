// QPs and SRQs on ids, created through the application's libibverbs (ours) on id->verbs, and
// the transitions librdmacm makes itself with the attributes rnicd computes (rdma_init_qp_attr):
// INIT at creation (UD goes on to RTS at once), RTR and RTS before accepting or on
// CONNECT_RESPONSE, ERR on disconnect and reject.
#include <cstring>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"
#include "ids.hpp"
#include "shim_conversions.hpp"

namespace rnic::rdmacm {

namespace {

void destroy_cqs(rdma_cm_id& id) {
    if (id.recv_cq != nullptr) {
        ibv_destroy_cq(id.recv_cq);
        if (id.send_cq != nullptr && id.send_cq != id.recv_cq) {
            ibv_destroy_cq(id.send_cq);
            id.send_cq = nullptr;
        }
        id.recv_cq = nullptr;
    }
    if (id.recv_cq_channel != nullptr) {
        ibv_destroy_comp_channel(id.recv_cq_channel);
        if (id.send_cq_channel != nullptr && id.send_cq_channel != id.recv_cq_channel) {
            ibv_destroy_comp_channel(id.send_cq_channel);
            id.send_cq_channel = nullptr;
        }
        id.recv_cq_channel = nullptr;
    }
}

// The CQs librdmacm makes when the application gives none: one per direction with a channel of
// its own and the id as cq_context (rdma_get_send_comp/recv_comp rely on both).
int create_cqs(rdma_cm_id& id, uint32_t send_size, uint32_t recv_size) {
    if (recv_size != 0) {
        id.recv_cq_channel = ibv_create_comp_channel(id.verbs);
        if (id.recv_cq_channel == nullptr) goto err;
        id.recv_cq = ibv_create_cq(id.verbs, static_cast<int>(recv_size), &id, id.recv_cq_channel, 0);
        if (id.recv_cq == nullptr) goto err;
    }
    if (send_size != 0) {
        id.send_cq_channel = ibv_create_comp_channel(id.verbs);
        if (id.send_cq_channel == nullptr) goto err;
        id.send_cq = ibv_create_cq(id.verbs, static_cast<int>(send_size), &id, id.send_cq_channel, 0);
        if (id.send_cq == nullptr) goto err;
    }
    return 0;
err:
    const int err = errno;
    destroy_cqs(id);
    return fail(err);
}

int modify(ibv_qp* qp, ibv_qp_attr& attr, int mask) {
    const int rc = ibv_modify_qp(qp, &attr, mask);
    return rc == 0 ? 0 : fail(rc);
}

int init_conn_qp(Id& id, ibv_qp* qp) {
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_INIT;
    if (init_qp_attr(id, &attr, &mask) != 0) return -1;
    return modify(qp, attr, mask);
}

int init_ud_qp(Id& id, ibv_qp* qp) {
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_INIT;
    if (init_qp_attr(id, &attr, &mask) != 0 || modify(qp, attr, mask) != 0) return -1;
    attr.qp_state = IBV_QPS_RTR;
    if (modify(qp, attr, IBV_QP_STATE) != 0) return -1;
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0;
    return modify(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

}  // namespace

int init_qp_attr(Id& id, ibv_qp_attr* attr, int* mask) {
    const IdPart* part = device_part(id);
    if (part == nullptr) return fail(EINVAL);
    abi::CmInitQpAttrReply reply{};
    if (const int rc = calls::init_qp_attr(*part->dev, part->handle, attr->qp_state, &reply); rc != 0)
        return fail(device_error(rc));
    shim::to_ibv(reply.attr, *attr);
    *mask = static_cast<int>(reply.attr_mask);
    return 0;
}

int modify_qp_rtr(Id& id, uint8_t responder_resources) {
    ibv_qp* qp = id.pub.qp;
    if (qp == nullptr) return 0;
    // The QP may have sat in INIT since creation: its attributes are brought up to date first.
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_INIT;
    if (init_qp_attr(id, &attr, &mask) != 0 || modify(qp, attr, mask) != 0) return -1;
    attr.qp_state = IBV_QPS_RTR;
    if (init_qp_attr(id, &attr, &mask) != 0) return -1;
    if (responder_resources != RDMA_MAX_RESP_RES) attr.max_dest_rd_atomic = responder_resources;
    return modify(qp, attr, mask);
}

int modify_qp_rts(Id& id, uint8_t initiator_depth) {
    ibv_qp* qp = id.pub.qp;
    if (qp == nullptr) return 0;
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_RTS;
    if (init_qp_attr(id, &attr, &mask) != 0) return -1;
    if (initiator_depth != RDMA_MAX_INIT_DEPTH) attr.max_rd_atomic = initiator_depth;
    return modify(qp, attr, mask);
}

int modify_qp_err(Id& id) {
    if (id.pub.qp == nullptr) return 0;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    return modify(id.pub.qp, attr, IBV_QP_STATE);
}

int finish_connect(Id& id) {
    if (modify_qp_rtr(id, RDMA_MAX_RESP_RES) != 0 || modify_qp_rts(id, RDMA_MAX_INIT_DEPTH) != 0) {
        const int err = errno;
        modify_qp_err(id);
        return fail(err);
    }
    const IdPart* part = device_part(id);
    const abi::CmConnParam none{};
    const int rc = part == nullptr ? EINVAL : device_error(calls::accept(*part->dev, part->handle, none));
    if (rc != 0) {
        modify_qp_err(id);
        return fail(rc);
    }
    return 0;
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
    if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
    return init_qp_attr(*id_of(id), qp_attr, qp_attr_mask);
}

RNIC_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
    if (cm_id == nullptr || attr == nullptr || cm_id->qp != nullptr) return fail(EINVAL);
    if (cm_id->verbs == nullptr) return fail(EINVAL);  // not on a device yet: nothing to create on
    Id& id = *id_of(cm_id);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
        attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
        attr->pd = cm_id->pd;
    } else if (cm_id->verbs != attr->pd->context) {
        return fail(EINVAL);
    }
    if ((cm_id->recv_cq != nullptr && attr->recv_cq != nullptr && cm_id->recv_cq != attr->recv_cq) ||
        (cm_id->send_cq != nullptr && attr->send_cq != nullptr && cm_id->send_cq != attr->send_cq))
        return fail(EINVAL);
    // XRC needs an XRC domain, which our libibverbs does not offer (ibv_open_xrcd: EOPNOTSUPP).
    if (cm_id->qp_type == IBV_QPT_XRC_RECV && !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) return fail(EOPNOTSUPP);
    if (create_cqs(*cm_id, attr->send_cq != nullptr || cm_id->send_cq != nullptr ? 0 : attr->cap.max_send_wr,
                   attr->recv_cq != nullptr || cm_id->recv_cq != nullptr ? 0 : attr->cap.max_recv_wr) != 0)
        return -1;
    if (attr->send_cq == nullptr) attr->send_cq = cm_id->send_cq;
    if (attr->recv_cq == nullptr) attr->recv_cq = cm_id->recv_cq;
    if (cm_id->srq != nullptr && attr->srq == nullptr) attr->srq = cm_id->srq;
    ibv_qp* qp = ibv_create_qp_ex(cm_id->verbs, attr);
    if (qp == nullptr) {
        const int err = errno;
        destroy_cqs(*cm_id);
        return fail(err);
    }
    const int ret = cm_id->qp_type == IBV_QPT_UD ? init_ud_qp(id, qp) : init_conn_qp(id, qp);
    if (ret != 0) {
        const int err = errno;
        ibv_destroy_qp(qp);
        destroy_cqs(*cm_id);
        return fail(err);
    }
    cm_id->pd = qp->pd;
    cm_id->qp = qp;
    return 0;
}

RNIC_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (id == nullptr || qp_init_attr == nullptr) return fail(EINVAL);
    ibv_qp_init_attr_ex attr_ex{};
    std::memcpy(&attr_ex, qp_init_attr, sizeof *qp_init_attr);
    attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr_ex.pd = pd != nullptr ? pd : id->pd;
    const int ret = rdma_create_qp_ex(id, &attr_ex);
    std::memcpy(qp_init_attr, &attr_ex, sizeof *qp_init_attr);
    return ret;
}

RNIC_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
    if (id == nullptr) return;
    if (id->qp != nullptr) ibv_destroy_qp(id->qp);
    id->qp = nullptr;
    destroy_cqs(*id);
}

RNIC_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
    if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr) {
        attr->pd = id->pd;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if (attr->srq_type == IBV_SRQT_XRC && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD))
        return fail(EOPNOTSUPP);  // no XRC domains (see rdma_create_qp_ex)
    ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
    if (srq == nullptr) {
        const int err = errno;
        destroy_cqs(*id);
        return fail(err);
    }
    if (id->pd == nullptr) id->pd = attr->pd;
    id->srq = srq;
    return 0;
}

RNIC_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (id == nullptr || attr == nullptr) return fail(EINVAL);
    ibv_srq_init_attr_ex attr_ex{};
    std::memcpy(&attr_ex, attr, sizeof *attr);
    attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
    attr_ex.pd = pd;
    const int ret = rdma_create_srq_ex(id, &attr_ex);
    std::memcpy(attr, &attr_ex, sizeof *attr);
    return ret;
}

RNIC_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
    if (id == nullptr) return;
    if (id->srq != nullptr) ibv_destroy_srq(id->srq);
    id->srq = nullptr;
    destroy_cqs(*id);
}
