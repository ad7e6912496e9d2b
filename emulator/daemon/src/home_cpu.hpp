// The poll loop's home core (`rnicd --home-cpu N`, docs/daemon.md polling policy 8).
//
// On these VMs a wake-up across cores costs 20-40 us (an IPI, a VM exit), one on the same core
// 3-6 us. When two daemons share a host (the test bed: both ends of a veth), each frame one
// sends wakes the other inside the sender's sendto(): if both loops live on one core, that
// wake-up never crosses cores, and an application spinning on the other core is answered by a
// loop that is still spinning. A stream needs both cores, though (the sender's and the
// receiver's work no longer fit in one), so while work streams in the loop may run on every CPU
// it was allowed at start, and it comes home once the stream has been over for `settle_ns`.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string>

namespace rnic::daemon {

class HomeCpu {
public:
    // Pins the calling thread to `cpu`. Throws std::runtime_error when `cpu` is not among the CPUs
    // the thread may run on, or the kernel refuses the affinity.
    explicit HomeCpu(int cpu, uint64_t settle_ns = 2'000'000);

    // Why `cpu` cannot be the calling thread's home ("" when it can): checked at start-up, before
    // the daemon opens anything.
    static std::string unusable(int cpu);

    // Each turn, from the loop's thread. Returns whether it changed the thread's affinity.
    bool follow(bool streaming, uint64_t now_ns);

    bool at_home() const noexcept { return at_home_; }
    uint64_t moves() const noexcept { return moves_; }
    uint64_t refused() const noexcept { return refused_; }

private:
    bool apply(const cpu_set_t& set);

    uint64_t settle_ns_;
    cpu_set_t home_{};
    cpu_set_t allowed_{};  // the thread's affinity at start: where a stream may go
    bool at_home_ = true;
    uint64_t last_stream_ns_ = 0;
    uint64_t moves_ = 0;
    uint64_t refused_ = 0;
};

}  // namespace rnic::daemon
