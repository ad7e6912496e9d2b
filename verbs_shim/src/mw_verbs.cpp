// Memory windows: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw, the ibv_context_ops slots the
// inline functions of verbs.h call. As rdma-core's rxe provider: ibv_bind_mw (type 1 only, which
// the inline wrapper checks) is a BIND_MW work request on the QP with the window's rkey moved on
// by ibv_inc_rkey, completed with IBV_WC_BIND_MW; type 2 windows are bound by IBV_WR_BIND_MW
// (ibv_post_send, ibv_wr_bind_mw).
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) try {
    if (pd == nullptr) return fail_null<ibv_mw>(EINVAL);
    auto* m = new (std::nothrow) Mw();
    if (m == nullptr) return fail_null<ibv_mw>(ENOMEM);
    auto r = conn_of(pd->context).alloc_mw(pd_of(pd)->impl, static_cast<uint32_t>(type));
    if (!r) {
        delete m;
        trace_failure("ibv_alloc_mw", r.error());
        return fail_null<ibv_mw>(r.error());
    }
    m->mw.context = pd->context;
    m->mw.pd = pd;
    m->mw.rkey = r->rkey;
    m->mw.handle = r->handle;
    m->mw.type = type;
    return &m->mw;
} catch (...) {
    return fail_null<ibv_mw>(ENOMEM);
}

int dealloc_mw(ibv_mw* mw) {
    if (mw == nullptr) return EINVAL;
    if (const int rc = conn_of(mw->context).dealloc_mw(mw->handle); rc != 0) return rc;
    delete mw_of(mw);
    return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
    if (qp == nullptr || mw == nullptr || bind == nullptr) return EINVAL;
    // rxe: a type 1 window is never zero based, and only type 1 windows bind by this verb.
    if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
    if (mw->type != IBV_MW_TYPE_1) return EINVAL;
    ibv_send_wr wr{};
    wr.wr_id = bind->wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = bind->send_flags;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info = bind->bind_info;
    ibv_send_wr* bad = nullptr;
    if (const int rc = post_send(qp, &wr, &bad); rc != 0) return rc;
    // Posted: the window answers to the new key once the bind executes. Should it fail
    // (IBV_WC_MW_BIND_ERR), the application has to undo this, as with rxe.
    mw->rkey = wr.bind_mw.rkey;
    return 0;
}

}  // namespace

void install_mw_ops(ibv_context_ops& ops) {
    ops.alloc_mw = alloc_mw;
    ops.dealloc_mw = dealloc_mw;
    ops.bind_mw = bind_mw;
}

}  // namespace rnic::shim
