/* IBTA 1.5 FLUSH for programs built against Debian 12's rdma-core 44 headers, which lack it.
 *
 * rdma-core 45 and later define the same values in <infiniband/verbs.h> (IBV_WR_FLUSH,
 * IBV_WC_FLUSH, IBV_QP_EX_WITH_FLUSH, IBV_ACCESS_FLUSH_*, ibv_wr_flush). Our libibverbs serves
 * both: a program built against newer headers calls ibv_wr_flush, which reads the wr_flush
 * pointer appended to struct ibv_qp_ex; a program built against 44 includes this header and
 * calls rnic_wr_flush, which reads the same pointer. The names here carry an RNIC_ prefix so
 * they never collide with newer headers.
 *
 * Only FLUSH to global visibility is offered: rnicd has no persistent memory, so registering a
 * region with RNIC_ACCESS_FLUSH_PERSISTENT fails (EOPNOTSUPP) and the device capabilities
 * (ibv_query_device_ex's device_cap_flags_ex) carry RNIC_DEVICE_FLUSH_GLOBAL only.
 */
#ifndef RNIC_VERBS_FLUSH_H
#define RNIC_VERBS_FLUSH_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define RNIC_WR_FLUSH ((enum ibv_wr_opcode)14)           /* IBV_WR_FLUSH */
#define RNIC_WC_FLUSH ((enum ibv_wc_opcode)8)            /* IBV_WC_FLUSH */
#define RNIC_QP_EX_WITH_FLUSH (1ULL << 11)               /* IBV_QP_EX_WITH_FLUSH */
#define RNIC_ACCESS_FLUSH_GLOBAL (1 << 8)                /* IBV_ACCESS_FLUSH_GLOBAL */
#define RNIC_ACCESS_FLUSH_PERSISTENT (1 << 9)            /* IBV_ACCESS_FLUSH_PERSISTENT */
#define RNIC_FLUSH_GLOBAL ((uint8_t)1)                   /* IBV_FLUSH_GLOBAL: placement type */
#define RNIC_FLUSH_PERSISTENT ((uint8_t)2)               /* IBV_FLUSH_PERSISTENT */
#define RNIC_FLUSH_RANGE ((uint8_t)0)                    /* IBV_FLUSH_RANGE: selectivity level */
#define RNIC_FLUSH_MR ((uint8_t)1)                       /* IBV_FLUSH_MR: the whole region */
#define RNIC_DEVICE_FLUSH_GLOBAL (1ULL << 38)            /* IB_UVERBS_DEVICE_FLUSH_GLOBAL */
#define RNIC_DEVICE_FLUSH_PERSISTENT (1ULL << 39)        /* IB_UVERBS_DEVICE_FLUSH_PERSISTENT */
#define RNIC_DEVICE_ATOMIC_WRITE (1ULL << 40)            /* IB_UVERBS_DEVICE_ATOMIC_WRITE */

typedef void (*rnic_wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len,
                                 uint8_t type, uint8_t level);

/* The wr_flush pointer that follows rdma-core 44's struct ibv_qp_ex, or NULL when the QP was not
 * created with RNIC_QP_EX_WITH_FLUSH in send_ops_flags (or its library has no FLUSH). */
static inline rnic_wr_flush_fn rnic_qp_ex_wr_flush(struct ibv_qp_ex *qp) {
    rnic_wr_flush_fn fn;
    __builtin_memcpy(&fn, (const char *)qp + sizeof(struct ibv_qp_ex), sizeof fn);
    return fn;
}

/* Between ibv_wr_start and ibv_wr_complete, as ibv_wr_flush. */
static inline void rnic_wr_flush(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len,
                                 uint8_t type, uint8_t level) {
    rnic_qp_ex_wr_flush(qp)(qp, rkey, remote_addr, len, type, level);
}

#endif /* RNIC_VERBS_FLUSH_H */
