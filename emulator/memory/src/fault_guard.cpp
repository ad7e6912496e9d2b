#include "rnic/memory/fault_guard.hpp"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace rnic::mem {

namespace {

// Written only by its own thread (and its signal handler), so plain thread_locals; the thread
// touches them before any guarded access, so the handler never allocates their storage.
thread_local sigjmp_buf* t_recovery = nullptr;
thread_local const void* t_fault_address = nullptr;

std::atomic<uint64_t> g_recovered{0};
struct sigaction g_previous {};

bool is_handler(const struct sigaction& a) {
    return (a.sa_flags & SA_SIGINFO) ? a.sa_sigaction != nullptr : a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

void on_sigbus(int sig, siginfo_t* info, void* ucontext) {
    // si_code > 0: the kernel raised it for an access; <= 0: someone sent it (kill, tgkill).
    const bool fault = info != nullptr && info->si_code > 0;
    if (sigjmp_buf* env = t_recovery; env != nullptr && fault) {
        t_recovery = nullptr;
        t_fault_address = info->si_addr;
        g_recovered.fetch_add(1, std::memory_order_relaxed);
        siglongjmp(*env, 1);
    }
    // Not ours: what would have happened without this handler.
    if (is_handler(g_previous)) {
        if (g_previous.sa_flags & SA_SIGINFO)
            g_previous.sa_sigaction(sig, info, ucontext);
        else
            g_previous.sa_handler(sig);
        return;
    }
    if (!fault && g_previous.sa_handler == SIG_IGN) return;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    // A fault re-executes the access on return and dies of it (core and all); a sent signal is
    // sent again, delivered once this handler returns.
    if (!fault) raise(sig);
}

}  // namespace

bool install_fault_guard() noexcept {
    static std::once_flag once;
    static bool installed = false;
    std::call_once(once, [] {
        struct sigaction a {};
        a.sa_sigaction = on_sigbus;
        // SA_NODEFER: the handler leaves by siglongjmp without restoring a signal mask (saving
        // one costs a syscall per guarded call), so SIGBUS must not be blocked on entry.
        a.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&a.sa_mask);
        installed = sigaction(SIGBUS, &a, &g_previous) == 0;
    });
    return installed;
}

bool guarded_call(void (*fn)(void*), void* context) noexcept {
    sigjmp_buf env;
    sigjmp_buf* const outer = t_recovery;
    if (sigsetjmp(env, 0) != 0) {
        t_recovery = outer;
        return false;
    }
    t_recovery = &env;
    // The handler reads t_recovery on this thread: keep the compiler from moving the accesses
    // in fn across these stores.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    fn(context);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_recovery = outer;
    return true;
}

bool guarded_memcpy(void* dst, const void* src, std::size_t bytes) noexcept {
    auto copy = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
    return guarded(copy);
}

uint64_t recovered_faults() noexcept {
    return g_recovered.load(std::memory_order_relaxed);
}

const void* last_fault_address() noexcept {
    return t_fault_address;
}

}  // namespace rnic::mem
