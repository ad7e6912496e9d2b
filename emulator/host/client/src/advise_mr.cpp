// ibv_advise_mr for on-demand regions. rnicd reaches an ODP region's pages through this process
// (process_vm_readv/writev), so prefetching means faulting the pages in here, in the process
// that owns them, before the NIC touches them: MADV_POPULATE_READ for PREFETCH, _WRITE for
// PREFETCH_WRITE (so the first remote WRITE finds them present and writable). NO_FAULT only
// hints at pages already present: nothing to do.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/page_sharer.hpp"
#include "rnic/host/client/verbs_values.hpp"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace rnic::host::client {

namespace {

// ibv_advise_mr's advice: 0 PREFETCH (read), 1 PREFETCH_WRITE, 2 PREFETCH_NO_FAULT.
constexpr uint32_t kPrefetchWrite = 1, kPrefetchNoFault = 2;
constexpr uint32_t kFlagFlush = 1;

}  // namespace

int Connection::advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const abi::Sge* sges, uint32_t count) try {
    if (pd == nullptr || pd->connection != this || advice > kPrefetchNoFault || (flags & ~kFlagFlush) != 0 ||
        count == 0 || sges == nullptr)
        return EINVAL;
    if (dead()) return EIO;
    const uintptr_t page = static_cast<uintptr_t>(page_size());
    for (uint32_t i = 0; i < count; ++i) {
        const abi::Sge& g = sges[i];
        uint64_t start = 0;
        {
            std::lock_guard lock(objects_lock_);
            const auto it = mrs_.find(g.lkey);
            if (it == mrs_.end()) return EINVAL;
            const Mr& mr = *it->second;
            if (mr.pd != pd || !(mr.access & verbs::kAccessOnDemand)) return EINVAL;
            // The SGE names the region's iova; the bytes are at addr + (va - iova).
            const bool implicit = mr.addr == nullptr;
            if (g.addr < mr.iova || (!implicit && (g.addr - mr.iova > mr.length || g.length > mr.length - (g.addr - mr.iova))))
                return EINVAL;
            start = reinterpret_cast<uintptr_t>(mr.addr) + (g.addr - mr.iova);
        }
        if (advice == kPrefetchNoFault || g.length == 0) continue;
        const uintptr_t first = start & ~(page - 1);
        const uintptr_t end = (start + g.length + page - 1) & ~(page - 1);
        const int how = advice == kPrefetchWrite ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
        if (madvise(reinterpret_cast<void*>(first), end - first, how) != 0) {
            // ENOMEM: part of the range is unmapped; EFAULT/EPERM: not accessible that way.
            if (errno == EINVAL) return EINVAL;
            return EFAULT;
        }
    }
    return 0;
} catch (...) {
    return ENOMEM;
}

}  // namespace rnic::host::client
