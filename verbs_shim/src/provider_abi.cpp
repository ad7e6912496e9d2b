// IBVERBS_PRIVATE_34: the interface rdma-core's libibverbs offers its provider libraries
// (libmlx5, libefa, libibverbs/lib*-rdmav34.so): the kernel command layer (ibv_cmd_*,
// execute_ioctl), context and CQ set-up for a provider's objects, driver registration, logging.
//
// We have no kernel uverbs file and load no providers: our one transport is the daemon. These
// symbols exist so that a provider library that ends up in the process anyway (Debian's real
// libmlx5.so.1 opened by path, an rdma-core plugin) still loads, even when linked with BIND_NOW,
// which binds all of them at load time. Each then fails the way its prototype reports errors:
// the ibv_cmd_* and execute_ioctl return the errno value EOPNOTSUPP (ibv_cmd_poll_cq, a poll
// function, -1 with errno), constructors NULL with errno; registration is accepted and ignored,
// the logging and initialisers that need no kernel do their work. rdma-core's header for these
// (libibverbs/driver.h) is not installed, so the provider-side and kernel-command types appear
// below as opaque pointers: for a C function the symbol and the calling convention are the ABI.
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "export.hpp"
#include "shim_objects.hpp"

// Provider-private structs, only ever behind pointers here.
extern "C" {
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct verbs_mr;
struct verbs_cq;
struct verbs_qp;
struct verbs_srq;
struct verbs_flow_action;
struct verbs_counters;
struct verbs_dm;
struct ibv_command_buffer;
}

namespace rnic::shim {
namespace {

// The kernel's write-command and response structs a provider passes (ib_user_verbs.h layouts
// wrapped by rdma-core's kern-abi.h); never read here.
using KernelCmd = void*;
using KernelResp = void*;

int no_kernel_command(const char* name) {
    trace_failure(name, EOPNOTSUPP);
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

// The leading members of rdma-core's struct ibv_command_buffer (libibverbs/cmd_ioctl.h): three
// pointers, four index bytes, a flag byte, then the ioctl header whose attrs[] array follows it.
struct CommandBufferHead {
    CommandBufferHead* next;
    ib_uverbs_attr* next_attr;
    ib_uverbs_attr* last_attr;
    uint8_t uhw_indices[4];
    uint8_t flags;
    alignas(ib_uverbs_ioctl_hdr) unsigned char hdr[sizeof(ib_uverbs_ioctl_hdr)];
};
static_assert(offsetof(CommandBufferHead, hdr) == 32);

uint32_t log_level() {
    static const uint32_t level = [] {
        const char* env = std::getenv("VERBS_LOG_LEVEL");
        return env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 0)) : 0U;
    }();
    return level;
}

FILE* log_file() {
    static FILE* const file = [] {
        const char* env = std::getenv("VERBS_LOG_FILE");
        FILE* f = env != nullptr ? std::fopen(env, "a") : nullptr;
        return f != nullptr ? f : stderr;
    }();
    return file;
}

}  // namespace
}  // namespace rnic::shim

using rnic::shim::KernelCmd;
using rnic::shim::KernelResp;
using rnic::shim::no_kernel_command;

// ---- driver registration and the provider's context ----

// A provider's constructor registers its device ops; we never match devices to providers, so
// the registration is kept nowhere.
RNIC_EXPORT void verbs_register_driver_34(const verbs_device_ops*) {}

// rdma-core lets a provider destroy objects after the device was disassociated when this is set;
// there is no disassociation here.
extern "C" {
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;
}

RNIC_EXPORT void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, verbs_context*, uint32_t) {
    rnic::shim::trace_failure("_verbs_init_and_alloc_context", EOPNOTSUPP);
    return rnic::shim::fail_null<void>(EOPNOTSUPP);
}

// Only a context from _verbs_init_and_alloc_context has provider ops or provider state to drop,
// and there is none.
RNIC_EXPORT void verbs_set_ops(verbs_context*, const verbs_context_ops*) {}
RNIC_EXPORT void verbs_uninit_context(verbs_context*) {}

// Without provider data this is ibv_open_device; the data (mlx5dv_context_attr, ...) is a
// provider's to interpret, and no provider is here.
RNIC_EXPORT ibv_context* verbs_open_device(ibv_device* device, void* private_data) {
    if (private_data != nullptr) {
        rnic::shim::trace_failure("verbs_open_device", EOPNOTSUPP);
        return rnic::shim::fail_null<ibv_context>(EOPNOTSUPP);
    }
    return ibv_open_device(device);
}

// The common part of a provider's CQ: the public ibv_cq fields, as rdma-core sets them.
RNIC_EXPORT void verbs_init_cq(ibv_cq* cq, ibv_context* context, ibv_comp_channel* channel, void* cq_context) {
    cq->context = context;
    cq->channel = channel;
    if (channel != nullptr) {
        pthread_mutex_lock(&context->mutex);
        ++channel->refcnt;
        pthread_mutex_unlock(&context->mutex);
    }
    cq->cq_context = cq_context;
    cq->comp_events_completed = 0;
    cq->async_events_completed = 0;
    pthread_mutex_init(&cq->mutex, nullptr);
    pthread_cond_init(&cq->cond, nullptr);
}

// A provider's sysfs device (struct verbs_sysfs_dev) comes from rdma-core's device discovery,
// which we do not have.
RNIC_EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, verbs_sysfs_dev* sysfs_dev, const char*, ...) {
    return rnic::shim::fail_minus_one(sysfs_dev == nullptr ? EINVAL : EOPNOTSUPP);
}

RNIC_EXPORT void __verbs_log(verbs_context*, uint32_t level, const char* fmt, ...) {
    if (level > rnic::shim::log_level()) return;
    const int saved = errno;
    va_list args;
    va_start(args, fmt);
    std::vfprintf(rnic::shim::log_file(), fmt, args);
    va_end(args);
    errno = saved;
}

// ---- the ioctl command layer ----

// Sizes a command buffer: its own attributes plus those of the buffers linked to it.
RNIC_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, ibv_command_buffer* link) {
    using rnic::shim::CommandBufferHead;
    for (auto* b = reinterpret_cast<CommandBufferHead*>(link); b != nullptr; b = b->next) {
        const auto* first = reinterpret_cast<const ib_uverbs_attr*>(b->hdr + sizeof(ib_uverbs_ioctl_hdr));
        num_attrs += static_cast<unsigned int>(b->next_attr - first);
    }
    return num_attrs;
}

RNIC_EXPORT int execute_ioctl(ibv_context*, ibv_command_buffer*) {
    return no_kernel_command("execute_ioctl");
}

// ---- the write/ioctl verbs (rdma-core's libibverbs/cmd*.c): each returns an errno value ----

#define RNIC_KERNEL_COMMAND(name, params) \
    RNIC_EXPORT int name params { return no_kernel_command(#name); }

// Context and device.
RNIC_KERNEL_COMMAND(ibv_cmd_get_context, (verbs_context*, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_query_context, (ibv_context*, ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_query_device_any, (ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                                               size_t, KernelResp, size_t*))
RNIC_KERNEL_COMMAND(ibv_cmd_query_port, (ibv_context*, uint8_t, ibv_port_attr*, KernelCmd, size_t))
// PD, XRCD, MR, MW, DM.
RNIC_KERNEL_COMMAND(ibv_cmd_alloc_pd, (ibv_context*, ibv_pd*, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_dealloc_pd, (ibv_pd*))
RNIC_KERNEL_COMMAND(ibv_cmd_open_xrcd, (ibv_context*, verbs_xrcd*, int, ibv_xrcd_init_attr*, KernelCmd, size_t,
                                        KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_close_xrcd, (verbs_xrcd*))
RNIC_KERNEL_COMMAND(ibv_cmd_reg_mr, (ibv_pd*, void*, size_t, uint64_t, int, verbs_mr*, KernelCmd, size_t, KernelResp,
                                     size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_rereg_mr, (verbs_mr*, uint32_t, void*, size_t, uint64_t, int, ibv_pd*, KernelCmd, size_t,
                                       KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_dereg_mr, (verbs_mr*))
RNIC_KERNEL_COMMAND(ibv_cmd_query_mr, (ibv_pd*, verbs_mr*, uint32_t))
RNIC_KERNEL_COMMAND(ibv_cmd_advise_mr, (ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t))
RNIC_KERNEL_COMMAND(ibv_cmd_reg_dmabuf_mr, (ibv_pd*, uint64_t, size_t, uint64_t, int, int, verbs_mr*))
RNIC_KERNEL_COMMAND(ibv_cmd_reg_dm_mr, (ibv_pd*, verbs_dm*, uint64_t, size_t, unsigned int, verbs_mr*,
                                        ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_alloc_mw, (ibv_pd*, ibv_mw_type, ibv_mw*, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_dealloc_mw, (ibv_mw*))
RNIC_KERNEL_COMMAND(ibv_cmd_alloc_dm, (ibv_context*, const ibv_alloc_dm_attr*, verbs_dm*, ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_free_dm, (verbs_dm*))
// CQ.
RNIC_KERNEL_COMMAND(ibv_cmd_create_cq, (ibv_context*, int, ibv_comp_channel*, int, ibv_cq*, KernelCmd, size_t,
                                        KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_create_cq_ex, (ibv_context*, const ibv_cq_init_attr_ex*, verbs_cq*, KernelCmd, size_t,
                                           KernelResp, size_t, uint32_t))
RNIC_KERNEL_COMMAND(ibv_cmd_req_notify_cq, (ibv_cq*, int))
RNIC_KERNEL_COMMAND(ibv_cmd_resize_cq, (ibv_cq*, int, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_cq, (ibv_cq*, ibv_modify_cq_attr*, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_cq, (ibv_cq*))
// SRQ.
RNIC_KERNEL_COMMAND(ibv_cmd_create_srq, (ibv_pd*, ibv_srq*, ibv_srq_init_attr*, KernelCmd, size_t, KernelResp,
                                         size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_create_srq_ex, (ibv_context*, verbs_srq*, ibv_srq_init_attr_ex*, KernelCmd, size_t,
                                            KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_srq, (ibv_srq*, ibv_srq_attr*, int, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_query_srq, (ibv_srq*, ibv_srq_attr*, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_srq, (ibv_srq*))
// QP.
RNIC_KERNEL_COMMAND(ibv_cmd_create_qp, (ibv_pd*, ibv_qp*, ibv_qp_init_attr*, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_create_qp_ex, (ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, KernelCmd, size_t,
                                           KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_create_qp_ex2, (ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, KernelCmd, size_t,
                                            KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_open_qp, (ibv_context*, verbs_qp*, int, ibv_qp_open_attr*, KernelCmd, size_t, KernelResp,
                                      size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_query_qp, (ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_qp, (ibv_qp*, ibv_qp_attr*, int, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_qp_ex, (ibv_qp*, ibv_qp_attr*, int, KernelCmd, size_t, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_qp, (ibv_qp*))
// AH and multicast.
RNIC_KERNEL_COMMAND(ibv_cmd_create_ah, (ibv_pd*, ibv_ah*, ibv_ah_attr*, KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_ah, (ibv_ah*))
RNIC_KERNEL_COMMAND(ibv_cmd_attach_mcast, (ibv_qp*, const ibv_gid*, uint16_t))
RNIC_KERNEL_COMMAND(ibv_cmd_detach_mcast, (ibv_qp*, const ibv_gid*, uint16_t))
// Flows, flow actions, WQs, RSS indirection tables, counters.
RNIC_KERNEL_COMMAND(ibv_cmd_create_flow, (ibv_qp*, ibv_flow*, ibv_flow_attr*, void*, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_flow, (ibv_flow*))
RNIC_KERNEL_COMMAND(ibv_cmd_create_flow_action_esp, (ibv_context*, ibv_flow_action_esp_attr*, verbs_flow_action*,
                                                     ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_flow_action_esp, (verbs_flow_action*, ibv_flow_action_esp_attr*,
                                                     ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_flow_action, (verbs_flow_action*))
RNIC_KERNEL_COMMAND(ibv_cmd_create_wq, (ibv_context*, ibv_wq_init_attr*, ibv_wq*, KernelCmd, size_t, KernelResp,
                                        size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_modify_wq, (ibv_wq*, ibv_wq_attr*, KernelCmd, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_wq, (ibv_wq*))
RNIC_KERNEL_COMMAND(ibv_cmd_create_rwq_ind_table, (ibv_context*, ibv_rwq_ind_table_init_attr*, ibv_rwq_ind_table*,
                                                   KernelResp, size_t))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_rwq_ind_table, (ibv_rwq_ind_table*))
RNIC_KERNEL_COMMAND(ibv_cmd_create_counters, (ibv_context*, ibv_counters_init_attr*, verbs_counters*,
                                              ibv_command_buffer*))
RNIC_KERNEL_COMMAND(ibv_cmd_destroy_counters, (verbs_counters*))
RNIC_KERNEL_COMMAND(ibv_cmd_read_counters, (verbs_counters*, uint64_t*, uint32_t, uint32_t, ibv_command_buffer*))

#undef RNIC_KERNEL_COMMAND

// The post verbs name the first request as the failed one, as a provider's post would.
RNIC_EXPORT int ibv_cmd_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return no_kernel_command("ibv_cmd_post_send");
}

RNIC_EXPORT int ibv_cmd_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return no_kernel_command("ibv_cmd_post_recv");
}

RNIC_EXPORT int ibv_cmd_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return no_kernel_command("ibv_cmd_post_srq_recv");
}

// A poll function: a negative count on error.
RNIC_EXPORT int ibv_cmd_poll_cq(ibv_cq*, int, ibv_wc*) {
    no_kernel_command("ibv_cmd_poll_cq");
    return -1;
}
