// Work requests, completions and object attributes as the engine takes and gives them: the
// verbs structures without pointers into application-private structs, so the host interface
// can carry them through shared memory unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "rnic/transport/verbs_types.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::transport {

struct Sge {
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
};

// Address vector: everything needed to reach the peer. The MAC is resolved by the control
// plane (ARP/ND) when the AH or the QP path is set, as RoCE drivers do at modify time.
struct AddressVector {
    wire::Gid dgid;
    uint8_t sgid_index = 0;
    wire::MacAddr dmac{};
    uint32_t flow_label = 0;
    uint8_t hop_limit = 64;
    uint8_t traffic_class = 0;  // DSCP << 2 | ECN
    uint8_t sl = 0;
};

// IBV_WR_BIND_MW (and ibv_bind_mw, which rdma-core's rxe turns into one): which window goes over
// which part of which region with which rights. The new rkey is SendWr::rkey (only its low 8
// bits, the consumer's key byte, count). length 0 unbinds a type 1 window.
struct MwBindInfo {
    uint32_t mw_rkey = 0;  // the window's current rkey
    uint32_t mr_lkey = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
    uint32_t access = 0;  // enum ibv_access_flags
};

struct SendWr {
    uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    uint32_t send_flags = 0;
    std::vector<Sge> sg_list;
    std::vector<uint8_t> inline_data;  // used when send_flags has SendFlag::Inline
    uint32_t imm_data = 0;             // network order value, as ibv_send_wr.imm_data
    uint32_t invalidate_rkey = 0;      // SEND_WITH_INV, LOCAL_INV
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    // UD
    uint32_t ah = 0;
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;
    MwBindInfo bind;  // BIND_MW
};

struct RecvWr {
    uint64_t wr_id = 0;
    std::vector<Sge> sg_list;
};

struct WorkCompletion {
    uint64_t wr_id = 0;
    WcStatus status = WcStatus::Success;
    WcOpcode opcode = WcOpcode::Send;
    uint32_t vendor_err = 0;
    uint32_t byte_len = 0;
    uint32_t imm_data = 0;  // network order, as ibv_wc.imm_data; the invalidated rkey with WcFlag::WithInv
    uint32_t qp_num = 0;
    uint32_t src_qp = 0;
    uint32_t wc_flags = 0;
    uint16_t pkey_index = 0;
    uint16_t slid = 0;
    uint8_t sl = 0;
    uint8_t dlid_path_bits = 0;
};

struct QpCap {
    uint32_t max_send_wr = 0;
    uint32_t max_recv_wr = 0;
    uint32_t max_send_sge = 0;
    uint32_t max_recv_sge = 0;
    uint32_t max_inline_data = 0;
};

struct QpInitAttr {
    QpType qp_type = QpType::Rc;
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    std::optional<uint32_t> srq;
    QpCap cap;
    bool sq_sig_all = false;
};

// ibv_qp_attr, the fields the engine uses; which are valid is said by the QpAttr mask.
struct QpAttributes {
    QpState qp_state = QpState::Reset;
    QpState cur_qp_state = QpState::Reset;
    Mtu path_mtu = Mtu::Mtu1024;
    uint32_t qkey = 0;
    uint32_t rq_psn = 0;
    uint32_t sq_psn = 0;
    uint32_t dest_qp_num = 0;
    uint32_t qp_access_flags = 0;
    QpCap cap;
    AddressVector ah_attr;
    uint16_t pkey_index = 0;
    uint8_t en_sqd_async_notify = 0;
    uint8_t sq_draining = 0;
    uint8_t max_rd_atomic = 0;
    uint8_t max_dest_rd_atomic = 0;
    uint8_t min_rnr_timer = 0;
    uint8_t port_num = 1;
    uint8_t timeout = 0;
    uint8_t retry_cnt = 0;
    uint8_t rnr_retry = 0;
};

struct SrqAttributes {
    uint32_t max_wr = 0;
    uint32_t max_sge = 0;
    uint32_t srq_limit = 0;
};

struct AsyncEvent {
    EventType type = EventType::QpFatal;
    uint32_t object = 0;  // QPN, CQ, SRQ handle, or port number
};

}  // namespace rnic::transport
