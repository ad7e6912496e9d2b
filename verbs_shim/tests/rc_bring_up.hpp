// An RC QP taken RESET -> INIT -> RTR -> RTS towards one peer, as the two-rnicd verbs tests
// connect their QPs (path MTU 1024, both sides starting at the same PSN, 4 reads/atomics in
// flight, retries as perftest's).
#pragma once

#include <catch2/catch.hpp>
#include <infiniband/verbs.h>

#include <cstdint>

namespace rnic::test {

inline void bring_up_rc(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& remote_gid, int access, uint32_t psn) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = access;
    REQUIRE(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = remote_qpn;
    at.rq_psn = psn;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = remote_gid;
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.port_num = 1;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = 1;
    REQUIRE(ibv_modify_qp(qp, &at,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = psn;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    REQUIRE(ibv_modify_qp(qp, &at,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

}  // namespace rnic::test
