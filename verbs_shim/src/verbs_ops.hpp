// The functions applications reach through pointers rather than symbols: ibv_context_ops (the
// inline ibv_post_send, ibv_poll_cq, ...), verbs_context (the extended verbs) and ibv_qp_ex /
// ibv_cq_ex (the work-request and completion builders).
#pragma once

#include <infiniband/verbs.h>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/abi/queue_entries.hpp"

namespace rnic::shim {

struct Device;
struct Qp;
struct Cq;

void install_context_ops(ibv_context_ops& ops);
void install_extended_ops(verbs_context& vctx);
void install_wr_ops(ibv_qp_ex& qpx);
void install_cq_ex_ops(ibv_cq_ex& cq);
// ibv_alloc_mw / ibv_bind_mw / ibv_dealloc_mw (mw_verbs.cpp), reached through ibv_context_ops.
void install_mw_ops(ibv_context_ops& ops);

// Data path (post_verbs.cpp, cq_verbs.cpp).
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);

// Extended verbs.
int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t attr_len);
// The completion-timestamp clock: CLOCK_MONOTONIC nanoseconds, 1 GHz in ibv_device_attr_ex's kHz.
inline constexpr uint64_t kDeviceClockKhz = 1'000'000;
int query_rt_values(ibv_context* context, ibv_values_ex* values);
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size);
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr);

// Conversions between rdma-core's structs and the host interface's (attr_convert.cpp).
void to_ibv(const abi::DeviceAttr& in, ibv_device_attr& out);
void to_ibv(const abi::PortAttr& in, ibv_port_attr& out);
abi::AddressVector to_abi(const ibv_ah_attr& in);
void to_ibv(const abi::AddressVector& in, ibv_ah_attr& out);
abi::QpAttr to_abi(const ibv_qp_attr& in);
void to_ibv(const abi::QpAttr& in, ibv_qp_attr& out);
void to_ibv(const abi::Cqe& in, ibv_wc& out);

Device* find_device_by_path(const char* ibdev_path);

}  // namespace rnic::shim
