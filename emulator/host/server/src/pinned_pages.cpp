#include "rnic/host/server/pinned_pages.hpp"

#include <algorithm>
#include <cerrno>

#include "ring_memory.hpp"

namespace rnic::host::server {

int PinnedPages::charge(const ProcessId& p, uint64_t pages, const LockLimit& limit) {
    if (limit.bytes == 0 && !limit.cap_ipc_lock) return EPERM;
    uint64_t& held = pinned_[p];
    const uint64_t limit_pages = limit.bytes / kPageSize;
    if (!limit.cap_ipc_lock && (pages > limit_pages || held > limit_pages - pages)) {
        if (held == 0) pinned_.erase(p);
        return ENOMEM;
    }
    held += pages;
    return 0;
}

void PinnedPages::release(const ProcessId& p, uint64_t pages) {
    const auto it = pinned_.find(p);
    if (it == pinned_.end()) return;
    it->second -= std::min(it->second, pages);
    if (it->second == 0) pinned_.erase(it);
}

uint64_t PinnedPages::pinned(const ProcessId& p) const {
    const auto it = pinned_.find(p);
    return it == pinned_.end() ? 0 : it->second;
}

}  // namespace rnic::host::server
