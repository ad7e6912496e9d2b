// Queue pairs and shared receive queues: create (plain and extended), modify, query, destroy.
// The daemon checks every attribute against the QP state machine (rdma-core's errno values);
// the shim checks only what the host interface cannot carry.
#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

// The send opcodes the batch API (ibv_wr_*) can build on an rnicd QP.
constexpr uint64_t kSupportedSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                                       IBV_QP_EX_WITH_BIND_MW;

constexpr uint32_t kKnownQpInitMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                      IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                      IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

// What rnicd's transports are; the other types are real IBA/vendor types it does not offer.
int check_qp_type(ibv_qp_type type) {
    switch (type) {
        case IBV_QPT_RC:
        case IBV_QPT_UC:
        case IBV_QPT_UD:
            return 0;
        case IBV_QPT_RAW_PACKET:
        case IBV_QPT_XRC_SEND:
        case IBV_QPT_XRC_RECV:
        case IBV_QPT_DRIVER:
            return EOPNOTSUPP;
        default:
            return EINVAL;
    }
}

ibv_qp* make_qp(ibv_pd* pd, ibv_qp_init_attr_ex& attr, bool extended, uint64_t send_ops) try {
    if (pd == nullptr) return fail_null<ibv_qp>(EINVAL);
    if (const int rc = check_qp_type(attr.qp_type); rc != 0) return fail_null<ibv_qp>(rc);
    if (attr.send_cq == nullptr || attr.recv_cq == nullptr) return fail_null<ibv_qp>(EINVAL);
    ibv_context* context = pd->context;
    if (attr.send_cq->context != context || attr.recv_cq->context != context ||
        (attr.srq != nullptr && attr.srq->context != context))
        return fail_null<ibv_qp>(EINVAL);
    auto* q = new (std::nothrow) Qp();
    if (q == nullptr) return fail_null<ibv_qp>(ENOMEM);
    client::QpInitAttr init{};
    init.qp_type = attr.qp_type;
    init.send_cq = cq_of(attr.send_cq)->impl;
    init.recv_cq = cq_of(attr.recv_cq)->impl;
    init.srq = attr.srq != nullptr ? srq_of(attr.srq)->impl : nullptr;
    init.cap = {attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge, attr.cap.max_recv_sge,
                attr.cap.max_inline_data};
    init.sq_sig_all = attr.sq_sig_all != 0;
    auto r = conn_of(context).create_qp(pd_of(pd)->impl, init);
    if (!r) {
        delete q;
        trace_failure("ibv_create_qp", r.error());
        return fail_null<ibv_qp>(r.error());
    }
    client::Qp* impl = *r;
    impl->user = q;
    q->impl = impl;
    q->extended = extended;
    q->send_ops = send_ops;
    // The caller learns the granted capabilities through its own struct (ibv_create_qp's contract).
    attr.cap = {impl->cap.max_send_wr, impl->cap.max_recv_wr, impl->cap.max_send_sge, impl->cap.max_recv_sge,
                impl->cap.max_inline_data};
    ibv_qp& b = q->qpx.qp_base;
    b.context = context;
    b.qp_context = attr.qp_context;
    b.pd = pd;
    b.send_cq = attr.send_cq;
    b.recv_cq = attr.recv_cq;
    b.srq = attr.srq;
    b.handle = impl->qpn;
    b.qp_num = impl->qpn;
    b.state = IBV_QPS_RESET;
    b.qp_type = attr.qp_type;
    pthread_mutex_init(&b.mutex, nullptr);
    pthread_cond_init(&b.cond, nullptr);
    if (extended) install_wr_ops(q->qpx);
    return &b;
} catch (...) {
    return fail_null<ibv_qp>(ENOMEM);
}

ibv_srq* make_srq(ibv_pd* pd, void* srq_context, ibv_srq_attr& attr) try {
    if (pd == nullptr) return fail_null<ibv_srq>(EINVAL);
    auto* s = new (std::nothrow) Srq();
    if (s == nullptr) return fail_null<ibv_srq>(ENOMEM);
    auto r = conn_of(pd->context).create_srq(pd_of(pd)->impl, attr.max_wr, attr.max_sge, attr.srq_limit);
    if (!r) {
        delete s;
        trace_failure("ibv_create_srq", r.error());
        return fail_null<ibv_srq>(r.error());
    }
    s->impl = *r;
    s->impl->user = s;
    attr.max_wr = s->impl->wq.max_wr;
    attr.max_sge = s->impl->wq.max_sge;
    s->srq.context = pd->context;
    s->srq.srq_context = srq_context;
    s->srq.pd = pd;
    s->srq.handle = s->impl->handle;
    pthread_mutex_init(&s->srq.mutex, nullptr);
    pthread_cond_init(&s->srq.cond, nullptr);
    return &s->srq;
} catch (...) {
    return fail_null<ibv_srq>(ENOMEM);
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
    if (context == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
    if (attr->comp_mask & ~kKnownQpInitMask) return fail_null<ibv_qp>(EINVAL);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr || attr->pd->context != context)
        return fail_null<ibv_qp>(EINVAL);
    // XRC, TSO and RSS QPs (and every creation flag: scatter-FCS, CVLAN stripping, ...) are
    // features of Ethernet/IB hardware rnicd does not model.
    if (attr->comp_mask & (IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                           IBV_QP_INIT_ATTR_RX_HASH))
        return fail_null<ibv_qp>(EOPNOTSUPP);
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags != 0)
        return fail_null<ibv_qp>(EOPNOTSUPP);
    uint64_t send_ops = 0;
    if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
        if (attr->send_ops_flags & ~kSupportedSendOps) return fail_null<ibv_qp>(EOPNOTSUPP);
        send_ops = attr->send_ops_flags;
    }
    return make_qp(attr->pd, *attr, (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0, send_ops);
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
    if (context == nullptr || attr == nullptr) return fail_null<ibv_srq>(EINVAL);
    if (attr->comp_mask & ~static_cast<uint32_t>(IBV_SRQ_INIT_ATTR_RESERVED - 1)) return fail_null<ibv_srq>(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr || attr->pd->context != context)
        return fail_null<ibv_srq>(EINVAL);
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
        return fail_null<ibv_srq>(EOPNOTSUPP);  // XRC and tag-matching SRQs
    if (attr->comp_mask & (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM))
        return fail_null<ibv_srq>(EOPNOTSUPP);
    return make_srq(attr->pd, attr->srq_context, attr->attr);
}

}  // namespace rnic::shim

using namespace rnic::shim;

RNIC_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (pd == nullptr || qp_init_attr == nullptr) return fail_null<ibv_qp>(EINVAL);
    ibv_qp_init_attr_ex ex{};
    ex.qp_context = qp_init_attr->qp_context;
    ex.send_cq = qp_init_attr->send_cq;
    ex.recv_cq = qp_init_attr->recv_cq;
    ex.srq = qp_init_attr->srq;
    ex.cap = qp_init_attr->cap;
    ex.qp_type = qp_init_attr->qp_type;
    ex.sq_sig_all = qp_init_attr->sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ibv_qp* qp = make_qp(pd, ex, false, 0);
    if (qp != nullptr) qp_init_attr->cap = ex.cap;
    return qp;
}

RNIC_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
    // As rdma-core: only a QP created with send_ops_flags has the work-request API.
    return qp != nullptr && qp_of(qp)->extended ? &qp_of(qp)->qpx : nullptr;
}

RNIC_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    if (qp == nullptr || attr == nullptr) return EINVAL;
    // Alternate paths (APM) and per-QP rate limits are not carried by the host interface.
    if (attr_mask & (IBV_QP_ALT_PATH | IBV_QP_RATE_LIMIT)) return EOPNOTSUPP;
    const auto mask = static_cast<uint32_t>(attr_mask);
    const int rc = conn_of(qp->context).modify_qp(qp_of(qp)->impl, to_abi(*attr), mask);
    if (rc != 0) {
        trace_failure("ibv_modify_qp", rc);
        return rc;
    }
    if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
    return 0;
}

RNIC_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
    if (qp == nullptr || attr == nullptr || init_attr == nullptr) return EINVAL;
    auto r = conn_of(qp->context).query_qp(qp_of(qp)->impl, static_cast<uint32_t>(attr_mask));
    if (!r) return r.error();
    to_ibv(r->attr, *attr);
    *init_attr = {};
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = {r->init_cap.max_send_wr, r->init_cap.max_recv_wr, r->init_cap.max_send_sge,
                      r->init_cap.max_recv_sge, r->init_cap.max_inline_data};
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = static_cast<int>(r->sq_sig_all);
    if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
    return 0;
}

RNIC_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
    if (qp == nullptr) return EINVAL;
    if (const int rc = conn_of(qp->context).destroy_qp(qp_of(qp)->impl); rc != 0) return rc;
    pthread_cond_destroy(&qp->cond);
    pthread_mutex_destroy(&qp->mutex);
    delete qp_of(qp);
    return 0;
}

// The transport delivers each message's data in PSN order, but not with a guarantee a consumer
// could poll on before the completion: 0, as rxe answers.
RNIC_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
    return 0;
}

// Enhanced Connection Establishment is a vendor (mlx5) negotiation rnicd has no options for.
RNIC_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) {
    return EOPNOTSUPP;
}
RNIC_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) {
    return EOPNOTSUPP;
}

RNIC_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
    if (srq_init_attr == nullptr) return fail_null<ibv_srq>(EINVAL);
    return make_srq(pd, srq_init_attr->srq_context, srq_init_attr->attr);
}

RNIC_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
    if (srq == nullptr || srq_attr == nullptr) return EINVAL;
    return conn_of(srq->context)
        .modify_srq(srq_of(srq)->impl, static_cast<uint32_t>(srq_attr_mask), srq_attr->max_wr, srq_attr->srq_limit);
}

RNIC_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
    if (srq == nullptr || srq_attr == nullptr) return EINVAL;
    auto r = conn_of(srq->context).query_srq(srq_of(srq)->impl);
    if (!r) return r.error();
    srq_attr->max_wr = r->max_wr;
    srq_attr->max_sge = r->max_sge;
    srq_attr->srq_limit = r->srq_limit;
    return 0;
}

RNIC_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
    if (srq == nullptr) return EINVAL;
    if (const int rc = conn_of(srq->context).destroy_srq(srq_of(srq)->impl); rc != 0) return rc;
    pthread_cond_destroy(&srq->cond);
    pthread_mutex_destroy(&srq->mutex);
    delete srq_of(srq);
    return 0;
}
