// ibv_post_send / ibv_post_recv / ibv_post_srq_recv, reached through context->ops by the inline
// functions of verbs.h. Each work request becomes a WQE in the shared ring (memory stores, one
// producer-index release per chunk; a syscall only to wake a sleeping daemon). Requests are
// converted in chunks on the stack so the data path allocates nothing.
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

constexpr int kChunk = 32;

void to_client(const ibv_send_wr& in, client::SendWr& out, bool ud) {
    out = {};
    out.wr_id = in.wr_id;
    out.sg_list = reinterpret_cast<const abi::Sge*>(in.sg_list);  // identical layout (static_assert)
    out.num_sge = in.num_sge < 0 ? UINT32_MAX : static_cast<uint32_t>(in.num_sge);
    out.opcode = static_cast<uint8_t>(in.opcode);
    // An opcode beyond uint8_t must not alias a valid one.
    if (static_cast<unsigned>(in.opcode) > 0xff) out.opcode = 0xff;
    out.send_flags = in.send_flags;
    out.imm_data = in.imm_data;  // also invalidate_rkey (a union)
    if (ud) {
        // wr.ud shares its bytes with wr.rdma and wr.atomic: read it only on a UD QP.
        out.ah = in.wr.ud.ah != nullptr ? ah_of(in.wr.ud.ah)->impl : nullptr;
        out.remote_qpn = in.wr.ud.remote_qpn;
        out.remote_qkey = in.wr.ud.remote_qkey;
        return;
    }
    switch (in.opcode) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_RDMA_READ:
            out.remote_addr = in.wr.rdma.remote_addr;
            out.rkey = in.wr.rdma.rkey;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            out.remote_addr = in.wr.atomic.remote_addr;
            out.rkey = in.wr.atomic.rkey;
            out.compare_add = in.wr.atomic.compare_add;
            out.swap = in.wr.atomic.swap;
            break;
        case IBV_WR_BIND_MW:
            // A missing window or region is passed on as key 0: the daemon then fails the bind
            // (IBV_WC_MW_BIND_ERR) instead of this library dereferencing NULL.
            out.rkey = in.bind_mw.rkey;
            out.bind_mw_rkey = in.bind_mw.mw != nullptr ? in.bind_mw.mw->rkey : 0;
            out.bind_mr_lkey = in.bind_mw.bind_info.mr != nullptr ? in.bind_mw.bind_info.mr->lkey : 0;
            out.remote_addr = in.bind_mw.bind_info.addr;
            out.bind_length = in.bind_mw.bind_info.length;
            out.bind_access = in.bind_mw.bind_info.mw_access_flags;
            break;
        default:
            break;
    }
}

void to_client(const ibv_recv_wr& in, client::RecvWr& out, bool) {
    out.wr_id = in.wr_id;
    out.next = nullptr;
    out.sg_list = reinterpret_cast<const abi::Sge*>(in.sg_list);
    out.num_sge = in.num_sge < 0 ? UINT32_MAX : static_cast<uint32_t>(in.num_sge);
}

// Converts and posts `wr`'s chain chunk by chunk; on failure *bad_wr is the application's request.
template <class IbvWr, class ClientWr, class Post>
int post_chain(IbvWr* wr, IbvWr** bad_wr, bool ud, Post&& post) {
    ClientWr converted[kChunk];
    IbvWr* originals[kChunk];
    while (wr != nullptr) {
        int n = 0;
        for (; wr != nullptr && n < kChunk; wr = wr->next, ++n) {
            to_client(*wr, converted[n], ud);
            converted[n].next = nullptr;
            if (n > 0) converted[n - 1].next = &converted[n];
            originals[n] = wr;
        }
        const ClientWr* bad = nullptr;
        if (const int rc = post(converted, &bad); rc != 0) {
            if (bad_wr != nullptr) *bad_wr = bad != nullptr ? originals[bad - converted] : originals[0];
            return rc;
        }
    }
    return 0;
}

}  // namespace

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    client::Qp* q = qp_of(qp)->impl;
    client::Connection& conn = conn_of(qp->context);
    return post_chain<ibv_send_wr, client::SendWr>(
        wr, bad_wr, qp->qp_type == IBV_QPT_UD,
        [&](const client::SendWr* w, const client::SendWr** bad) { return conn.post_send(q, w, bad); });
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    client::Qp* q = qp_of(qp)->impl;
    client::Connection& conn = conn_of(qp->context);
    return post_chain<ibv_recv_wr, client::RecvWr>(
        wr, bad_wr, false,
        [&](const client::RecvWr* w, const client::RecvWr** bad) { return conn.post_recv(q, w, bad); });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    client::Srq* s = srq_of(srq)->impl;
    client::Connection& conn = conn_of(srq->context);
    return post_chain<ibv_recv_wr, client::RecvWr>(
        wr, bad_wr, false,
        [&](const client::RecvWr* w, const client::RecvWr** bad) { return conn.post_srq_recv(s, w, bad); });
}

void install_context_ops(ibv_context_ops& ops) {
    ops.poll_cq = poll_cq;
    ops.req_notify_cq = req_notify_cq;
    ops.post_send = post_send;
    ops.post_recv = post_recv;
    ops.post_srq_recv = post_srq_recv;
    install_mw_ops(ops);
    // The _compat_* slots are unused by today's libibverbs ABI.
}

}  // namespace rnic::shim
