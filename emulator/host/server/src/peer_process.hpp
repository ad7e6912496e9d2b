// What the daemon learns about a client process on its own, from /proc, never from the client:
// its start time (with the pid, the process's identity) and its memory-lock limit and
// capability, read afresh for each registration as the kernel reads them from the caller.
#pragma once

#include <cstdint>
#include <optional>

#include "rnic/host/server/pinned_pages.hpp"

namespace rnic::host::server {

// /proc/<pid>/stat's start time; nullopt when the process is gone (or unreadable).
std::optional<uint64_t> process_start_time(uint32_t pid);

// RLIMIT_MEMLOCK's soft limit from /proc/<pid>/limits and CAP_IPC_LOCK from CapEff in
// /proc/<pid>/status. A capability counts only in the daemon's own user namespace (the kernel's
// capable() asks the initial one; a root inside a container has not got it). nullopt when the
// files cannot be read, or `p` no longer names the same process once they were.
std::optional<LockLimit> process_lock_limit(const ProcessId& p);

}  // namespace rnic::host::server
