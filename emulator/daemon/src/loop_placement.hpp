// Where the poll loop's thread may run (docs/daemon.md, polling policies 8 and 9).
//
// The home core (`rnicd --home-cpu N`, policy 8). On these VMs a wake-up across cores costs
// 20-40 us (an IPI, a VM exit), one on the same core 3-6 us. When two daemons share a host (the
// test bed: both ends of a veth), each frame one sends wakes the other inside the sender's
// sendto(): if both loops live on one core, that wake-up never crosses cores, and an application
// spinning on the other core is answered by a loop that is still spinning. A stream needs both
// cores, though (the sender's and the receiver's work no longer fit in one), so while work streams
// in the loop may run on every CPU it was allowed at start, and it comes home once the stream has
// been over for `settle_ns`.
//
// Leaving a streaming client's core (policy 9, with or without a home). A SCHED_FIFO loop that
// shares its core with an application feeding it a stream lets the application run only while
// it naps (policy 6): the two take turns, one WQE per doorbell and nap, and the message rate fell
// to a fifth or less (64 B WRITEs: 0.04 against 0.14-0.20 M msg/s with the two on different
// cores, docs/benchmarks.md). The poll loop sees it from the kicks (PollLoop::note_kick): kicks in
// a row from its own core, each after new WQEs and no completion delivered since the one before
// (a latency test waits for a completion before it posts again). Then the loop leaves that CPU,
// for every other CPU it was allowed at start, until it has had no work for `settle_ns`.
#pragma once

#include <sched.h>

#include <cstdint>
#include <optional>
#include <string>

namespace rnic::daemon {

class LoopPlacement {
public:
    // Reads the calling thread's affinity (where streams and policy 9 may take it) and, with a
    // home, pins the thread to it. Throws std::runtime_error when the affinity cannot be read,
    // `home_cpu` is not among the CPUs the thread may run on, or the kernel refuses the pinning.
    explicit LoopPlacement(std::optional<int> home_cpu, uint64_t settle_ns = 2'000'000);

    // Why `cpu` cannot be the calling thread's home ("" when it can): checked at start-up, before
    // the daemon opens anything.
    static std::string unusable(int cpu);

    // Each turn, from the loop's thread: `streaming` as IdlePolicy::streaming, `active` whether
    // the turn found work. Returns whether it changed the thread's affinity.
    bool follow(bool streaming, bool active, uint64_t now_ns);

    // A client on CPU `cpu` streams into the loop from the loop's own core (policy 9): the next
    // follow() moves the loop off it. Ignored when no other CPU is allowed; a different client
    // CPU replaces the avoided one only after `settle_ns` (a client that follows the loop must
    // not make it hop every turn).
    void leave_client_cpu(int cpu, uint64_t now_ns);

    bool has_home() const noexcept { return has_home_; }
    bool at_home() const noexcept { return has_home_ && where_ == Where::Home; }
    bool avoiding_client() const noexcept { return avoiding_; }
    uint64_t home_moves() const noexcept { return home_moves_; }
    uint64_t client_moves() const noexcept { return client_moves_; }
    uint64_t refused() const noexcept { return refused_; }

private:
    enum class Where : uint8_t { Home, Wide, AwayFromClient };
    Where wanted(bool streaming, uint64_t now_ns);
    bool apply(const cpu_set_t& set);

    uint64_t settle_ns_;
    bool has_home_ = false;
    cpu_set_t home_{};
    cpu_set_t allowed_{};  // the thread's affinity at start: where a stream may go
    cpu_set_t away_{};     // allowed_ without the avoided client's CPU
    Where where_ = Where::Wide;
    bool avoiding_ = false;
    int client_cpu_ = -1;
    uint64_t avoid_since_ns_ = 0;
    uint64_t last_stream_ns_ = 0;
    uint64_t last_active_ns_ = 0;
    uint64_t home_moves_ = 0;
    uint64_t client_moves_ = 0;
    uint64_t refused_ = 0;
};

}  // namespace rnic::daemon
