// Protection domains and memory registration. Registration shares the application's pages with
// rnicd without moving them (the client library's PageSharer, docs/host_interface.md).
#include <cerrno>
#include <cstdint>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace rnic::shim;

namespace {

ibv_mr* register_memory(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) try {
    if (pd == nullptr) return fail_null<ibv_mr>(EINVAL);
    // Optional-range bits (relaxed ordering ...) are hints a device may ignore (verbs.h).
    access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
    auto* m = new (std::nothrow) Mr();
    if (m == nullptr) return fail_null<ibv_mr>(ENOMEM);
    auto r = conn_of(pd->context).reg_mr_iova(pd_of(pd)->impl, addr, length, iova, access);
    if (!r) {
        delete m;
        trace_failure("ibv_reg_mr", r.error());
        return fail_null<ibv_mr>(r.error());
    }
    m->impl = *r;
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.handle = (*r)->lkey;
    m->mr.lkey = (*r)->lkey;
    m->mr.rkey = (*r)->rkey;
    return &m->mr;
} catch (...) {
    return fail_null<ibv_mr>(ENOMEM);
}

}  // namespace

RNIC_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
    if (context == nullptr) return fail_null<ibv_pd>(EINVAL);
    auto* p = new (std::nothrow) Pd();
    if (p == nullptr) return fail_null<ibv_pd>(ENOMEM);
    auto r = conn_of(context).alloc_pd();
    if (!r) {
        delete p;
        trace_failure("ibv_alloc_pd", r.error());
        return fail_null<ibv_pd>(r.error());
    }
    p->impl = *r;
    p->pd.context = context;
    p->pd.handle = (*r)->handle;
    return &p->pd;
}

RNIC_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
    if (pd == nullptr) return EINVAL;
    if (const int rc = conn_of(pd->context).dealloc_pd(pd_of(pd)->impl); rc != 0) return rc;  // EBUSY while used
    delete pd_of(pd);
    return 0;
}

RNIC_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    return register_memory(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

RNIC_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return register_memory(pd, addr, length, iova, static_cast<unsigned>(access));
}

RNIC_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
    return register_memory(pd, addr, length, iova, access);
}

RNIC_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
    if (mr == nullptr) return EINVAL;
    if (const int rc = conn_of(mr->context).dereg_mr(mr_of(mr)->impl); rc != 0) return rc;
    delete mr_of(mr);
    return 0;
}

// rdma-core's ibv_rereg_mr: its own checks of the arguments (IBV_REREG_MR_ERR_INPUT, errno
// EINVAL, the MR untouched), then the command, which rnicd executes as mlx5 does (the keys kept,
// the PD, rights and/or translation swapped between two accesses). A failed command is
// IBV_REREG_MR_ERR_CMD with the daemon's errno; unlike a kernel driver's, our region is then
// still exactly as before. The new translation's iova is `addr`, as rdma-core's providers pass.
// rxe (Linux 6.1) has no rereg_mr at all (docs/fidelity.md).
RNIC_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    constexpr int kKnownFlags = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    const bool bad_input = mr == nullptr || (flags & ~kKnownFlags) != 0 ||
                           ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (length == 0 || addr == nullptr)) ||
                           (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS));
    if (bad_input) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    // A PD of another device (or none) names no PD of this connection: the command fails.
    const bool change_pd = (flags & IBV_REREG_MR_CHANGE_PD) != 0;
    int rc = EINVAL;
    if (!change_pd || (pd != nullptr && pd->context == mr->context)) {
        // Optional-range bits (relaxed ordering ...) are hints a device may ignore (verbs.h).
        const unsigned rights = static_cast<unsigned>(access) & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
        rc = conn_of(mr->context).rereg_mr(mr_of(mr)->impl, static_cast<uint32_t>(flags),
                                          change_pd ? pd_of(pd)->impl : nullptr, addr, length, rights);
    }
    if (rc != 0) {
        trace_failure("ibv_rereg_mr", rc);
        errno = rc;
        return IBV_REREG_MR_ERR_CMD;
    }
    if (change_pd) mr->pd = pd;
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        mr->addr = addr;
        mr->length = length;
    }
    mr->lkey = mr_of(mr)->impl->lkey;
    mr->rkey = mr_of(mr)->impl->rkey;
    return 0;
}

// dma-buf memory is device memory of another driver: nothing rnicd can map.
RNIC_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
    return fail_null<ibv_mr>(EOPNOTSUPP);
}

// Sharing a PD or MR with another process goes through the kernel's uverbs file in rdma-core.
RNIC_EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
    return fail_null<ibv_pd>(EOPNOTSUPP);
}
RNIC_EXPORT void ibv_unimport_pd(ibv_pd*) {}
RNIC_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
    return fail_null<ibv_mr>(EOPNOTSUPP);
}
RNIC_EXPORT void ibv_unimport_mr(ibv_mr*) {}
RNIC_EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
    return fail_null<ibv_dm>(EOPNOTSUPP);
}
RNIC_EXPORT void ibv_unimport_dm(ibv_dm*) {}

// Registered pages are MAP_SHARED memfds, so a fork()ed child shares them instead of breaking
// them copy-on-write: the parent's RDMA keeps working without MADV_DONTFORK.
RNIC_EXPORT int ibv_fork_init(void) {
    return 0;
}
RNIC_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
    return IBV_FORK_UNNEEDED;
}
RNIC_EXPORT int ibv_dontfork_range(void*, size_t) {
    return 0;
}
RNIC_EXPORT int ibv_dofork_range(void*, size_t) {
    return 0;
}
