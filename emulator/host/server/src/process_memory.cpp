#include "process_memory.hpp"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "peer_process.hpp"

namespace rnic::host::server {

namespace {

// The largest piece one request carries; longer accesses go as several (packets are at most an
// MTU, 4 KiB, so this is rare).
constexpr size_t kChunk = 64 * 1024;
// After a copy the worker looks for the next one this long before it sleeps: back-to-back
// accesses (a message's packets) then cost no wake-up. The poll thread spins this long before
// it sleeps on the answer.
constexpr uint64_t kWorkerSpinNs = 50'000;
constexpr uint64_t kPollerSpinNs = 50'000;

int pidfd_open(uint32_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

uint64_t now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, uint64_t timeout_ns) noexcept {
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ull), static_cast<long>(timeout_ns % 1'000'000'000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
            timeout_ns == UINT64_MAX ? nullptr : &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) noexcept {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct Totals {
    std::atomic<uint64_t> workers_alive{0}, workers_stuck{0}, copies{0}, waits_timed_out{0}, busy_pending{0},
        budget_pending{0};
};
Totals g_totals;

// Where the daemon could run when it started, read before main() (static initialisation), so
// before the poll thread pins itself (rnicd --home-cpu, docs/daemon.md policies 8 and 9). A worker
// is started from the poll thread and would inherit whatever CPU set it has at that moment: a
// worker started while the loop sat on its home core would copy on that core for good, taking
// turns with the loop at the same FIFO priority. Empty when it could not be read: inherit then.
struct StartCpus {
    cpu_set_t set{};
    bool known = false;
    StartCpus() { known = sched_getaffinity(0, sizeof set, &set) == 0; }
};
const StartCpus g_start_cpus;

bool pidfd_alive(int pidfd) noexcept {
    pollfd pfd{pidfd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 0;  // readable once the process has exited
}

}  // namespace

OdpWorkerTotals odp_worker_totals() noexcept {
    return {g_totals.workers_alive.load(),   g_totals.workers_stuck.load(), g_totals.copies.load(),
            g_totals.waits_timed_out.load(), g_totals.busy_pending.load(),  g_totals.budget_pending.load()};
}

// Shared by the ProcessMemory (poll thread) and its thread. One request slot: the poll thread
// fills it only while the worker is idle (done_seq == request_seq), the worker reads it after
// taking request_seq and publishes the result with done_seq.
struct ProcessMemory::Worker {
    Worker(uint32_t p, int fd, std::shared_ptr<OdpNotifier> n) : pid(p), pidfd(fd), notifier(std::move(n)) {}
    ~Worker() { ::close(pidfd); }

    const uint32_t pid;
    const int pidfd;
    const std::shared_ptr<OdpNotifier> notifier;
    alignas(64) std::atomic<uint32_t> request_seq{0};
    alignas(64) std::atomic<uint32_t> done_seq{0};
    std::atomic<uint32_t> worker_sleeping{0};
    std::atomic<uint32_t> poller_waiting{0};
    std::atomic<bool> abandoned{false};  // the poll thread stopped waiting: notify when done
    std::atomic<bool> stop{false};
    std::atomic<bool> orphaned{false};  // its ProcessMemory is gone while it was in a copy
    // The request and its result. `unclaimed`: the poll thread stopped waiting for this request
    // (poll thread only); its result, once done, answers the same access asked again.
    bool unclaimed = false;
    bool write = false;
    uint64_t address = 0;
    size_t length = 0;
    bool ok = false;
    std::array<uint8_t, kChunk> buffer{};

    bool idle() const noexcept {
        return done_seq.load(std::memory_order_acquire) == request_seq.load(std::memory_order_relaxed);
    }

    void run() noexcept {
        uint32_t seen = 0;
        for (;;) {
            uint32_t req = request_seq.load(std::memory_order_acquire);
            if (req == seen) {
                const uint64_t until = now_ns() + kWorkerSpinNs;
                while ((req = request_seq.load(std::memory_order_acquire)) == seen && now_ns() < until) cpu_relax();
            }
            if (req == seen) {
                worker_sleeping.store(1, std::memory_order_seq_cst);
                if (request_seq.load(std::memory_order_seq_cst) == seen) futex_wait(request_seq, seen, UINT64_MAX);
                worker_sleeping.store(0, std::memory_order_relaxed);
                continue;
            }
            if (stop.load(std::memory_order_acquire)) break;
            seen = req;
            copy();
            done_seq.store(seen, std::memory_order_seq_cst);
            if (poller_waiting.load(std::memory_order_seq_cst)) futex_wake(done_seq);
            if (abandoned.exchange(false, std::memory_order_seq_cst) && notifier) notifier->notify();
            g_totals.copies.fetch_add(1, std::memory_order_relaxed);
        }
    }

    // The call that may block for as long as the client's page fault lasts.
    void copy() noexcept {
        ok = false;
        if (!pidfd_alive(pidfd)) return;
        iovec local{buffer.data(), length}, remote{reinterpret_cast<void*>(address), length};
        const ssize_t n = write ? process_vm_writev(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0)
                                : process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
        ok = n == static_cast<ssize_t>(length);
    }
};

std::shared_ptr<ProcessMemory> ProcessMemory::open(const ProcessId& p, std::shared_ptr<OdpNotifier> notifier,
                                                   OdpWaitLimits limits) {
    if (g_totals.workers_stuck.load() >= kMaxStuckOdpWorkers) {
        errno = EAGAIN;
        return nullptr;
    }
    const int fd = pidfd_open(p.pid);
    if (fd < 0) return nullptr;
    // The pidfd names whatever process has the pid now: it must be the one that connected.
    const auto start = process_start_time(p.pid);
    if (!start || *start != p.start_time) {
        ::close(fd);
        errno = ESRCH;
        return nullptr;
    }
    auto worker = std::make_shared<Worker>(p.pid, fd, std::move(notifier));
    // May the daemon read its memory at all (root, or the same user where Yama allows it)? A
    // one-byte read at an address nothing can be mapped at (below mmap_min_addr, so no fault
    // handler of the client's) answers EFAULT when allowed, EPERM not.
    uint8_t byte = 0;
    iovec local{&byte, 1}, remote{reinterpret_cast<void*>(uintptr_t{1}), 1};
    if (process_vm_readv(static_cast<pid_t>(p.pid), &local, 1, &remote, 1, 0) < 0 && errno == EPERM) return nullptr;
    // The worker takes no signal: the daemon's handlers run on its poll thread.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    // Counted from here, not from the thread's start: on a loaded machine it may start late.
    g_totals.workers_alive.fetch_add(1);
    try {
        std::thread thread([w = worker] {
            w->run();
            if (w->orphaned.load()) g_totals.workers_stuck.fetch_sub(1);
            g_totals.workers_alive.fetch_sub(1);
        });
        // A refusal leaves the inherited set: placement only, never correctness.
        if (g_start_cpus.known)
            (void)pthread_setaffinity_np(thread.native_handle(), sizeof g_start_cpus.set, &g_start_cpus.set);
        thread.detach();
    } catch (const std::system_error& e) {
        g_totals.workers_alive.fetch_sub(1);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        errno = e.code().value() ? e.code().value() : EAGAIN;
        return nullptr;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return std::shared_ptr<ProcessMemory>(new ProcessMemory(std::move(worker), limits));
}

ProcessMemory::ProcessMemory(std::shared_ptr<Worker> w, OdpWaitLimits limits)
    : worker_(std::move(w)), limits_(limits), tokens_ns_(limits.budget_ns), refilled_at_(now_ns()) {}

// The thread is detached: it ends by itself once it sees `stop`, at once when idle, or when the
// copy it is in returns (a stuck one: when the client's fault handler goes away, at its exit).
// It holds the Worker, so nothing it touches is freed under it.
ProcessMemory::~ProcessMemory() {
    Worker& w = *worker_;
    if (!w.idle()) {
        w.orphaned.store(true);
        g_totals.workers_stuck.fetch_add(1);
    }
    w.stop.store(true, std::memory_order_release);
    w.request_seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(w.request_seq);
}

bool ProcessMemory::alive() const noexcept {
    return pidfd_alive(worker_->pidfd);
}

bool ProcessMemory::busy() const noexcept {
    return !worker_->idle();
}

uint64_t ProcessMemory::allowed_wait(uint64_t now) noexcept {
    const uint64_t elapsed = now - refilled_at_;
    refilled_at_ = now;
    const uint64_t refill = elapsed / 1000 * limits_.refill_per_mille;
    tokens_ns_ = std::min(limits_.budget_ns, tokens_ns_ + refill);
    return std::min(limits_.wait_ns, limits_.free_ns + tokens_ns_);
}

mem::OdpResult ProcessMemory::copy_chunk(bool write, uint64_t address, uint8_t* data, size_t length) noexcept {
    Worker& w = *worker_;
    if (!w.idle()) {
        // Still in a copy the loop stopped waiting for: this client's accesses wait behind it
        // (none overtakes it), without the loop waiting at all.
        g_totals.busy_pending.fetch_add(1, std::memory_order_relaxed);
        return mem::OdpResult::Pending;
    }
    if (w.unclaimed) {
        // The copy the loop stopped waiting for is done. The same access asked again (the engine
        // retries with the same arguments) takes its result: no second copy, and no wait that a
        // spent budget could make too short for any copy ever to be seen done.
        w.unclaimed = false;
        if (w.write == write && w.address == address && w.length == length &&
            (!write || std::memcmp(w.buffer.data(), data, length) == 0))
            return finish(write, data, length);
    }
    w.write = write;
    w.address = address;
    w.length = length;
    if (write) std::memcpy(w.buffer.data(), data, length);
    const uint32_t seq = w.request_seq.load(std::memory_order_relaxed) + 1;
    w.request_seq.store(seq, std::memory_order_seq_cst);
    if (w.worker_sleeping.load(std::memory_order_seq_cst)) futex_wake(w.request_seq);

    const uint64_t start = now_ns();
    const uint64_t allowed = allowed_wait(start);
    const uint64_t deadline = start + allowed;
    auto done = [&] { return w.done_seq.load(std::memory_order_acquire) == seq; };
    uint64_t t = start;
    const uint64_t spin_until = start + std::min(allowed, kPollerSpinNs);
    while (!done() && (t = now_ns()) < spin_until) cpu_relax();
    if (!done() && t < deadline) {
        w.poller_waiting.store(1, std::memory_order_seq_cst);
        while (!done() && (t = now_ns()) < deadline) futex_wait(w.done_seq, seq - 1, deadline - t);
        w.poller_waiting.store(0, std::memory_order_relaxed);
    }
    // Only waiting past what a normal copy takes is charged: a busy but healthy client keeps
    // its budget, one whose copies keep lasting long spends it.
    const uint64_t waited = now_ns() - start;
    const uint64_t charged = waited > limits_.free_ns ? waited - limits_.free_ns : 0;
    tokens_ns_ -= std::min(tokens_ns_, charged);
    if (!done()) {
        w.abandoned.store(true, std::memory_order_seq_cst);
        if (!done()) {
            (allowed < limits_.wait_ns ? g_totals.budget_pending : g_totals.waits_timed_out)
                .fetch_add(1, std::memory_order_relaxed);
            w.unclaimed = true;
            return mem::OdpResult::Pending;  // the worker notifies when it is done
        }
        w.abandoned.store(false, std::memory_order_relaxed);
    }
    return finish(write, data, length);
}

// The worker is idle with this request's result.
mem::OdpResult ProcessMemory::finish(bool write, uint8_t* data, size_t length) noexcept {
    Worker& w = *worker_;
    if (!w.ok) return mem::OdpResult::Fault;
    if (!write) std::memcpy(data, w.buffer.data(), length);
    return mem::OdpResult::Done;
}

mem::OdpResult ProcessMemory::copy(bool write, uint64_t address, uint8_t* data, size_t length) noexcept {
    for (size_t done = 0; done < length;) {
        const size_t n = std::min(kChunk, length - done);
        const mem::OdpResult r = copy_chunk(write, address + done, data + done, n);
        if (r != mem::OdpResult::Done) return r;  // a Pending chunk: the whole access comes again
        done += n;
    }
    return mem::OdpResult::Done;
}

mem::OdpResult ProcessMemory::read(uint64_t address, std::span<uint8_t> data) noexcept {
    if (data.empty()) return mem::OdpResult::Done;
    return copy(false, address, data.data(), data.size());
}

mem::OdpResult ProcessMemory::write(uint64_t address, std::span<const uint8_t> data) noexcept {
    if (data.empty()) return mem::OdpResult::Done;
    return copy(true, address, const_cast<uint8_t*>(data.data()), data.size());
}

}  // namespace rnic::host::server
