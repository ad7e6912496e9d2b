// Which ibv_modify_qp calls are legal: the QP state transition table of IBA 10.3.1 (figure
// "QP/EE state diagram", table "QP state transition properties") exactly as the Linux kernel
// enforces it in ib_modify_qp_is_ok() (drivers/infiniband/core/verbs.c), which rxe and every
// hardware driver call. The table itself is data, in qp_state_machine.cpp.
//
// For each (from, to, QP type): whether the transition exists, which attributes it requires and
// which it accepts; IBV_QP_STATE is always accepted. Only RC, UC and UD are described; the
// engine creates no other QP type.
#pragma once

#include <cstdint>
#include <string_view>

#include "rnic/transport/verbs_types.hpp"

namespace rnic::transport {

// qp_state_name(QpState) ("IBV_QPS_RTS") is in verbs_types.hpp.

// What the table says about one transition for one QP type.
struct TransitionAttrs {
    bool valid = false;     // the transition exists for this QP type
    uint32_t required = 0;  // QpAttr bits that must all be in the mask
    uint32_t optional = 0;  // further QpAttr bits the mask may carry (besides IBV_QP_STATE)
};

// The table entry for (type, from -> to). Not valid for QP types other than RC/UC/UD and for
// states outside Reset..Err.
TransitionAttrs transition_attrs(QpType type, QpState from, QpState to) noexcept;

// 0 if ibv_modify_qp(attr_mask) may move a QP of `type` from `current` to `next`, else EINVAL,
// with the same verdict as the kernel's ib_modify_qp_is_ok():
//  - `current` is the state the transition starts from: the QP's state, or attr.cur_qp_state
//    when the mask has IBV_QP_CUR_STATE (see resolve_modify_qp_states);
//  - IBV_QP_CUR_STATE is only accepted when starting from RTR, RTS, SQD or SQE (and only where
//    the table lists it as optional);
//  - the transition must exist, the mask must hold every required attribute and nothing but
//    required, optional and IBV_QP_STATE;
//  - `next` != `current` requires IBV_QP_STATE in the mask (a mask without it names no new
//    state); without a state change the table's self-transition applies (INIT->INIT, RTS->RTS,
//    SQD->SQD, RESET->RESET, ERR->ERR exist; RTR->RTR and SQE->SQE do not);
//  - EINVAL as well for QP types other than RC/UC/UD and for states outside Reset..Err.
// Only the mask is checked here; the attribute values (port number, MTU, PSN range, rd_atomic
// limits) are the caller's to check.
int check_modify_qp(QpType type, QpState current, QpState next, uint32_t attr_mask) noexcept;

// The (from, to) pair the kernel checks for a modify request, as rxe_qp_chk_attr() derives it:
// from = attr.cur_qp_state if the mask has IBV_QP_CUR_STATE, else the QP's own state;
// to = attr.qp_state if the mask has IBV_QP_STATE, else `from`.
struct ModifyQpStates {
    QpState from;
    QpState to;
};

constexpr ModifyQpStates resolve_modify_qp_states(QpState qp_state, uint32_t attr_mask, QpState attr_cur_qp_state,
                                                  QpState attr_qp_state) noexcept {
    const QpState from = (attr_mask & QpAttr::CurState) != 0 ? attr_cur_qp_state : qp_state;
    const QpState to = (attr_mask & QpAttr::State) != 0 ? attr_qp_state : from;
    return {from, to};
}

}  // namespace rnic::transport
