// Which QP states allow posting, as Linux rxe (kernel 6.1, rdma-core 44) answers
// (docs/verbs_shim.md, "Posting and the QP state"):
// - receives: EINVAL in RESET only (C10-97.2.1; rxe's provider looks at ibv_qp::state, the
//   state libibverbs caches from ibv_modify_qp/ibv_query_qp). In ERR they are accepted and
//   flushed.
// - sends (ibv_post_send and ibv_wr_complete): EINVAL in RESET, INIT and RTR (rxe's kernel
//   refuses the doorbell while its requester is not yet ready); RTS, SQD, SQE and ERR accept
//   them (in SQE/ERR they complete with IBV_WC_WR_FLUSH_ERR).
// The state read is ibv_qp::state, which only the application's own ibv_modify_qp (librdmacm's
// included: it calls ours) and ibv_query_qp write. It is exact for these rules: the daemon
// changes a QP's state on its own only towards SQE or ERR, and those allow whatever RTS allows;
// every state that forbids posting is entered by a modify_qp this process made.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>

namespace rnic::shim {

// Another thread's ibv_modify_qp may store the state meanwhile: a relaxed atomic load (the
// store side uses store_qp_state).
inline ibv_qp_state load_qp_state(ibv_qp* qp) {
    return std::atomic_ref<ibv_qp_state>(qp->state).load(std::memory_order_relaxed);
}

inline void store_qp_state(ibv_qp* qp, ibv_qp_state state) {
    std::atomic_ref<ibv_qp_state>(qp->state).store(state, std::memory_order_relaxed);
}

inline bool recv_allowed(ibv_qp* qp) {
    return load_qp_state(qp) != IBV_QPS_RESET;
}

inline bool send_allowed(ibv_qp* qp) {
    switch (load_qp_state(qp)) {
        case IBV_QPS_RESET:
        case IBV_QPS_INIT:
        case IBV_QPS_RTR:
            return false;
        default:
            return true;
    }
}

}  // namespace rnic::shim
