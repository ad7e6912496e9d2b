// Registered pages per client process, the daemon's copy of the kernel's mm->pinned_vm: what
// ib_umem_get charges against RLIMIT_MEMLOCK. A process is known by its pid and its start time
// (so a reused pid is another process). One ledger serves every device of an rnicd, as a
// process's pinned_vm counts its registrations on every RNIC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace rnic::host::server {

struct ProcessId {
    uint32_t pid = 0;
    uint64_t start_time = 0;  // clock ticks after boot (/proc/<pid>/stat field 22)
    auto operator<=>(const ProcessId&) const = default;
};

// The process's RLIMIT_MEMLOCK (soft, bytes; UINT64_MAX for unlimited) and whether it holds
// CAP_IPC_LOCK, as ib_umem_get reads them from the registering task.
struct LockLimit {
    uint64_t bytes = 0;
    bool cap_ipc_lock = false;
};

class PinnedPages {
public:
    // ib_umem_get's rule: with neither a limit above 0 nor CAP_IPC_LOCK, EPERM (can_do_mlock);
    // pages that would take the process over its limit without CAP_IPC_LOCK, ENOMEM; else the
    // pages are charged and 0 returned.
    int charge(const ProcessId& p, uint64_t pages, const LockLimit& limit);
    void release(const ProcessId& p, uint64_t pages);
    uint64_t pinned(const ProcessId& p) const;
    size_t processes() const { return pinned_.size(); }

private:
    std::map<ProcessId, uint64_t> pinned_;
};

}  // namespace rnic::host::server
