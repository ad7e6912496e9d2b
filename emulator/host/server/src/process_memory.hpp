// The client process's memory as an on-demand region's backend (mem::OdpBackend): rnicd reaches
// an ODP MR's pages through process_vm_readv/process_vm_writev on the client's own process, the
// one SO_PEERCRED named on the control socket (never a pid the client states). Those calls fault
// the pages in as a NIC page fault would and fail for addresses nothing is mapped at, which the
// engine turns into a remote access or local protection error.
//
// The calls run on a worker thread of the client's own, never on the poll thread: a fault the
// client never resolves (a userfaultfd range it does not serve, a FUSE mapping it answers itself)
// blocks that call, and must stall only this client. The poll thread hands one copy at a time to
// the worker and waits for it a short bounded time (a normal copy takes microseconds); past that,
// or while the worker is still busy with an earlier copy, the access is Pending (the engine parks
// or RNR-NAKs, docs/host_interface.md) and the worker tells the loop when it is done
// (OdpNotifier); the same access asked again then takes that copy's result. A per-client budget
// bounds the loop's waiting over time. One request slot: no queue to grow, and no copy overtakes
// an earlier one of the same client.
//
// Identity: a pidfd taken at the first ODP registration, checked against the process's start
// time (so it is the process that connected, not a later one with its pid); every access first
// polls it, so a process that exited (its pid free for reuse once reaped) is never touched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "odp_notifier.hpp"
#include "rnic/host/server/pinned_pages.hpp"
#include "rnic/memory/odp_backend.hpp"

namespace rnic::host::server {

struct OdpWaitLimits {
    uint64_t wait_ns = 1'000'000;     // longest wait for one copy (then Pending)
    uint64_t free_ns = 20'000;        // the part of each wait a normal copy needs: not charged
    uint64_t budget_ns = 20'000'000;  // waiting past free_ns a client may spend at once ...
    uint32_t refill_per_mille = 50;   // ... refilled at this share of wall time (5%)
};

// Process-wide figures of the workers (rnicctl stats: host_odp_*).
struct OdpWorkerTotals {
    uint64_t workers_alive = 0;  // threads, stuck ones of closed sessions included
    uint64_t workers_stuck = 0;  // of closed sessions, still inside a copy
    uint64_t copies = 0;
    uint64_t waits_timed_out = 0;  // the poll thread stopped waiting: Pending
    uint64_t busy_pending = 0;     // Pending at once: the worker was still busy
    uint64_t budget_pending = 0;   // Pending after a wait the spent budget shortened
};
OdpWorkerTotals odp_worker_totals() noexcept;

// Past this many stuck workers of closed sessions (their copy still inside a fault some other
// process keeps unresolved), new ODP registrations are refused with EAGAIN: the daemon's threads
// stay bounded whatever clients do.
inline constexpr uint64_t kMaxStuckOdpWorkers = 32;

class ProcessMemory final : public mem::OdpBackend {
public:
    // nullptr with errno: ESRCH (gone, or not the process `p` names), EPERM (the daemon may not
    // read its memory: not root, and Yama's ptrace_scope forbids it), EAGAIN (too many stuck
    // workers), or the pidfd_open or thread creation error.
    static std::shared_ptr<ProcessMemory> open(const ProcessId& p, std::shared_ptr<OdpNotifier> notifier = nullptr,
                                               OdpWaitLimits limits = {});
    ~ProcessMemory() override;
    ProcessMemory(const ProcessMemory&) = delete;
    ProcessMemory& operator=(const ProcessMemory&) = delete;

    mem::OdpResult read(uint64_t address, std::span<uint8_t> data) noexcept override;
    mem::OdpResult write(uint64_t address, std::span<const uint8_t> data) noexcept override;
    bool alive() const noexcept;
    // The worker holds a copy the poll thread stopped waiting for.
    bool busy() const noexcept;

    struct Worker;  // process_memory.cpp

private:
    ProcessMemory(std::shared_ptr<Worker> w, OdpWaitLimits limits);
    mem::OdpResult copy(bool write, uint64_t address, uint8_t* data, size_t length) noexcept;
    mem::OdpResult copy_chunk(bool write, uint64_t address, uint8_t* data, size_t length) noexcept;
    mem::OdpResult finish(bool write, uint8_t* data, size_t length) noexcept;
    uint64_t allowed_wait(uint64_t now) noexcept;
    std::shared_ptr<Worker> worker_;
    OdpWaitLimits limits_;
    uint64_t tokens_ns_;
    uint64_t refilled_at_ = 0;
};

}  // namespace rnic::host::server
