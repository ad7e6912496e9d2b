// The handful of rdma-core enumerator values the client itself interprets (it passes every other
// value through untouched). Kept here rather than taken from the engine's verbs_types.hpp because
// this library must not depend on the engine; the values are rdma-core's <infiniband/verbs.h>,
// which the client tests static_assert against.
#pragma once

#include <cstdint>

namespace rnic::host::client::verbs {

// enum ibv_qp_type
inline constexpr uint32_t kQptRc = 2;
inline constexpr uint32_t kQptUc = 3;
inline constexpr uint32_t kQptUd = 4;

// enum ibv_qp_state
inline constexpr uint32_t kQpsReset = 0;
inline constexpr uint32_t kQpsErr = 6;

// enum ibv_qp_attr_mask
inline constexpr uint32_t kQpState = 1u << 0;

// enum ibv_wr_opcode
inline constexpr uint8_t kWrRdmaWrite = 0;
inline constexpr uint8_t kWrRdmaWriteWithImm = 1;
inline constexpr uint8_t kWrSend = 2;
inline constexpr uint8_t kWrSendWithImm = 3;
inline constexpr uint8_t kWrRdmaRead = 4;
inline constexpr uint8_t kWrAtomicCmpAndSwp = 5;
inline constexpr uint8_t kWrAtomicFetchAndAdd = 6;
inline constexpr uint8_t kWrLocalInv = 7;
inline constexpr uint8_t kWrBindMw = 8;
inline constexpr uint8_t kWrSendWithInv = 9;

// enum ibv_send_flags
inline constexpr uint32_t kSendSignaled = 1u << 1;
inline constexpr uint32_t kSendInline = 1u << 3;

// enum ibv_wc_status
inline constexpr uint32_t kWcSuccess = 0;
inline constexpr uint32_t kWcWrFlushErr = 5;

// enum ibv_wc_opcode
inline constexpr uint32_t kWcSend = 0;
inline constexpr uint32_t kWcRdmaWrite = 1;
inline constexpr uint32_t kWcRdmaRead = 2;
inline constexpr uint32_t kWcCompSwap = 3;
inline constexpr uint32_t kWcFetchAdd = 4;
inline constexpr uint32_t kWcBindMw = 5;
inline constexpr uint32_t kWcLocalInv = 6;
inline constexpr uint32_t kWcRecv = 1u << 7;

// enum ibv_event_type
inline constexpr uint32_t kEventCqErr = 0;
inline constexpr uint32_t kEventQpFatal = 1;
inline constexpr uint32_t kEventQpReqErr = 2;
inline constexpr uint32_t kEventQpAccessErr = 3;
inline constexpr uint32_t kEventCommEst = 4;
inline constexpr uint32_t kEventSqDrained = 5;
inline constexpr uint32_t kEventPathMig = 6;
inline constexpr uint32_t kEventPathMigErr = 7;
inline constexpr uint32_t kEventDeviceFatal = 8;
inline constexpr uint32_t kEventSrqErr = 14;
inline constexpr uint32_t kEventSrqLimitReached = 15;
inline constexpr uint32_t kEventQpLastWqeReached = 16;

// enum ibv_port_state
inline constexpr uint32_t kPortActive = 4;

}  // namespace rnic::host::client::verbs
