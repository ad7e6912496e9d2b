// The non-default symbol versions rdma-core 44's libibverbs still defines: 32 verbs at
// IBVERBS_1.0, the ABI of libibverbs 1.0 (2006, before struct ibv_device and ibv_context took
// their 1.1 layout), and ibv_register_driver at IBVERBS_1.1, the provider registration of
// before rdma-core 13.
//
// They are here so that our export table equals Debian's symbol for symbol. The 1.0 ABI is not
// implemented (no program in Debian 12 was linked against it): its ibv_get_device_list answers
// NULL with ENOSYS, as rdma-core does on a kernel without RDMA, so no 1.0 device, context or
// object can exist, and each other 1.0 entry fails by its own convention with ENOSYS.
// ibv_register_driver is a no-op in rdma-core too.
//
// Each function below has a local name and is bound to its public name at the old version with
// .symver; libibverbs.map leaves the names out of those nodes (they carry the current, default
// versions) and keeps `local: *` away from them, which would hide the versioned aliases.
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstdint>

#include "export.hpp"
#include "shim_objects.hpp"

// The 1.0 ABI's own structs, only ever behind pointers here.
extern "C" {
struct ibv_device_1_0;
struct ibv_context_1_0;
struct ibv_pd_1_0;
struct ibv_mr_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_ah_1_0;
struct ibv_qp_init_attr_1_0;
}

namespace {

constexpr int kNoAbi10 = ENOSYS;

int fail_errno(const char* name) {
    rnic::shim::trace_failure(name, kNoAbi10);
    errno = kNoAbi10;
    return kNoAbi10;
}

int fail_minus_one(const char* name) {
    rnic::shim::trace_failure(name, kNoAbi10);
    return rnic::shim::fail_minus_one(kNoAbi10);
}

template <class T>
T* fail_null(const char* name) {
    rnic::shim::trace_failure(name, kNoAbi10);
    return rnic::shim::fail_null<T>(kNoAbi10);
}

}  // namespace

// RNIC_COMPAT_1_0(ret, name, params) { body }: defines rnic_compat_<name>_1_0 and binds it to
// name@IBVERBS_1.0.
#define RNIC_SYMVER(local, public_name, version) asm(".symver " #local ", " #public_name "@" version)
#define RNIC_COMPAT_1_0(ret, name, params)                       \
    RNIC_EXPORT ret rnic_compat_##name##_1_0 params;             \
    RNIC_SYMVER(rnic_compat_##name##_1_0, name, "IBVERBS_1.0");  \
    RNIC_EXPORT ret rnic_compat_##name##_1_0 params

// Errors: pointer verbs NULL, int verbs the errno value, the event and GID/P_Key queries -1
// (each as its 1.1 counterpart reports them).
#define RNIC_COMPAT_NULL(type, name, params) \
    RNIC_COMPAT_1_0(type*, name, params) { return fail_null<type>(#name "@IBVERBS_1.0"); }
#define RNIC_COMPAT_ERRNO(name, params) \
    RNIC_COMPAT_1_0(int, name, params) { return fail_errno(#name "@IBVERBS_1.0"); }
#define RNIC_COMPAT_MINUS_ONE(name, params) \
    RNIC_COMPAT_1_0(int, name, params) { return fail_minus_one(#name "@IBVERBS_1.0"); }
#define RNIC_COMPAT_VOID(name, params) \
    RNIC_COMPAT_1_0(void, name, params) {}

// Devices and contexts.
RNIC_COMPAT_NULL(ibv_device_1_0*, ibv_get_device_list, (int*))
RNIC_COMPAT_VOID(ibv_free_device_list, (ibv_device_1_0**))
RNIC_COMPAT_NULL(const char, ibv_get_device_name, (ibv_device_1_0*))
RNIC_COMPAT_1_0(uint64_t, ibv_get_device_guid, (ibv_device_1_0*)) {
    fail_errno("ibv_get_device_guid@IBVERBS_1.0");
    return 0;
}
RNIC_COMPAT_NULL(ibv_context_1_0, ibv_open_device, (ibv_device_1_0*))
RNIC_COMPAT_ERRNO(ibv_close_device, (ibv_context_1_0*))
RNIC_COMPAT_MINUS_ONE(ibv_get_async_event, (ibv_context_1_0*, ibv_async_event*))
RNIC_COMPAT_VOID(ibv_ack_async_event, (ibv_async_event*))
RNIC_COMPAT_ERRNO(ibv_query_device, (ibv_context_1_0*, ibv_device_attr*))
RNIC_COMPAT_ERRNO(ibv_query_port, (ibv_context_1_0*, uint8_t, ibv_port_attr*))
RNIC_COMPAT_MINUS_ONE(ibv_query_gid, (ibv_context_1_0*, uint8_t, int, ibv_gid*))
RNIC_COMPAT_MINUS_ONE(ibv_query_pkey, (ibv_context_1_0*, uint8_t, int, uint16_t*))
// PD and MR.
RNIC_COMPAT_NULL(ibv_pd_1_0, ibv_alloc_pd, (ibv_context_1_0*))
RNIC_COMPAT_ERRNO(ibv_dealloc_pd, (ibv_pd_1_0*))
RNIC_COMPAT_NULL(ibv_mr_1_0, ibv_reg_mr, (ibv_pd_1_0*, void*, size_t, int))
RNIC_COMPAT_ERRNO(ibv_dereg_mr, (ibv_mr_1_0*))
// CQ.
RNIC_COMPAT_NULL(ibv_cq_1_0, ibv_create_cq, (ibv_context_1_0*, int, void*, ibv_comp_channel*, int))
RNIC_COMPAT_ERRNO(ibv_resize_cq, (ibv_cq_1_0*, int))
RNIC_COMPAT_ERRNO(ibv_destroy_cq, (ibv_cq_1_0*))
RNIC_COMPAT_MINUS_ONE(ibv_get_cq_event, (ibv_comp_channel*, ibv_cq_1_0**, void**))
RNIC_COMPAT_VOID(ibv_ack_cq_events, (ibv_cq_1_0*, unsigned int))
// SRQ.
RNIC_COMPAT_NULL(ibv_srq_1_0, ibv_create_srq, (ibv_pd_1_0*, ibv_srq_init_attr*))
RNIC_COMPAT_ERRNO(ibv_modify_srq, (ibv_srq_1_0*, ibv_srq_attr*, int))
RNIC_COMPAT_ERRNO(ibv_query_srq, (ibv_srq_1_0*, ibv_srq_attr*))
RNIC_COMPAT_ERRNO(ibv_destroy_srq, (ibv_srq_1_0*))
// QP.
RNIC_COMPAT_NULL(ibv_qp_1_0, ibv_create_qp, (ibv_pd_1_0*, ibv_qp_init_attr_1_0*))
RNIC_COMPAT_ERRNO(ibv_query_qp, (ibv_qp_1_0*, ibv_qp_attr*, int, ibv_qp_init_attr_1_0*))
RNIC_COMPAT_ERRNO(ibv_modify_qp, (ibv_qp_1_0*, ibv_qp_attr*, int))
RNIC_COMPAT_ERRNO(ibv_destroy_qp, (ibv_qp_1_0*))
// AH and multicast.
RNIC_COMPAT_NULL(ibv_ah_1_0, ibv_create_ah, (ibv_pd_1_0*, ibv_ah_attr*))
RNIC_COMPAT_ERRNO(ibv_destroy_ah, (ibv_ah_1_0*))
RNIC_COMPAT_ERRNO(ibv_attach_mcast, (ibv_qp_1_0*, ibv_gid*, uint16_t))
RNIC_COMPAT_ERRNO(ibv_detach_mcast, (ibv_qp_1_0*, ibv_gid*, uint16_t))

// The pre-rdma-core-13 registration (name and an init function): accepted and ignored, as by
// rdma-core, whose stub keeps old libfabric usnic providers loading.
RNIC_EXPORT void rnic_compat_ibv_register_driver_1_1(const char*, void*);
RNIC_SYMVER(rnic_compat_ibv_register_driver_1_1, ibv_register_driver, "IBVERBS_1.1");
RNIC_EXPORT void rnic_compat_ibv_register_driver_1_1(const char*, void*) {}
