// Accesses to memory another process can take away under us. rnicd maps files its clients hand
// it (a memfd it could not seal, a MAP_SHARED file passed through /proc/self/map_files); a client
// that shrinks such a file turns the daemon's next touch of the lost pages into SIGBUS. A guarded
// call returns false instead: a process-wide SIGBUS handler finds the thread's recovery point and
// siglongjmps back to it. A SIGBUS anywhere else (or one sent with kill) still ends the process
// as it would have without the handler.
//
// SIGSEGV is deliberately not caught: no client action can unmap the daemon's mappings (they go
// only after the last MR over them), so a SIGSEGV in a copy is a daemon bug to be seen, not hidden.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rnic::mem {

// Installs the SIGBUS handler once per process (later calls do nothing), keeping the disposition
// it replaces to fall back on. false: sigaction failed, so faults stay fatal.
bool install_fault_guard() noexcept;

// Runs fn(context); false when it took a SIGBUS and was abandoned where it faulted. fn is left by
// siglongjmp: it must hold nothing that needs a destructor, a lock or a cleanup on that path.
// Needs install_fault_guard() first (MemoryTable's constructor calls it); without the handler a
// fault is as fatal as ever.
bool guarded_call(void (*fn)(void*), void* context) noexcept;

template <class Fn>
bool guarded(Fn& fn) noexcept {
    return guarded_call([](void* f) { (*static_cast<Fn*>(f))(); }, &fn);
}

// memcpy that reports a SIGBUS on either side as false; bytes before the fault may be copied.
bool guarded_memcpy(void* dst, const void* src, std::size_t bytes) noexcept;

// Faults recovered in this process, and the address of this thread's last one (for logs).
uint64_t recovered_faults() noexcept;
const void* last_fault_address() noexcept;

}  // namespace rnic::mem
