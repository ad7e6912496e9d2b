// rnicd's loop around the turn: for every port (a device each), the host interface's data path
// and the port's; control messages between turns; the nap when idle. The nap sleeps on every
// session's kick eventfd, control socket and port RX wake fd at once, so a sleeping loop answers
// a frame, a doorbell or a control message of any device at once; the idle policy decides when
// to sleep.
// No DPDK here: tested over FakePort.
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datapath.hpp"
#include "idle_policy.hpp"
#include "loop_placement.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/port_io.hpp"

namespace rnic::daemon {

struct LoopCounters {
    uint64_t turns = 0;
    uint64_t naps = 0;               // naps taken (after the last look found nothing)
    uint64_t last_look_work = 0;     // the last look before a nap found work: no nap
    uint64_t woken_by_rx = 0;        // naps ended by the port's wake fd
    uint64_t woken_by_kick = 0;      // ... by a client's doorbell kick
    uint64_t woken_by_control = 0;   // ... by a control message
    uint64_t naps_timed_out = 0;     // ... by the nap's length (a timer, the cap)
    uint64_t stream_naps = 0;        // naps inside a stream (timed, frames do not end them)
    uint64_t colocated_kicks = 0;    // kicks that woke the loop from a client on its own core
    uint64_t home_yields = 0;        // --home-cpu: empty spin turns at home that yielded the core
    // A timed-out nap after which the next turn received frames the daemon serves (ARP, ICMP,
    // RoCEv2): a wake-up the port should have given and did not (or a frame that came just as
    // the nap ended). Stays 0 when the wake-up works; a non-zero value costs up to one nap cap
    // per frame.
    uint64_t rx_after_timeout = 0;
};

// Where the loop's time goes (docs/benchmarks.md, "Where the time goes"), recorded only while
// latency tracing is on. Per turn, not per frame: a turn that took new work queue entries and
// sent frames, a turn whose completions followed frames received in an earlier one.
struct LoopHops {
    common::LatencyHistogram seen_to_wire;       // the turn took new WQEs -> its frames handed to the port
    common::LatencyHistogram rx_to_completion;   // the last frames received -> the completions written
    common::LatencyHistogram rx_wake;             // a frame's arrival in the kernel -> the loop it woke running
    common::LatencyHistogram kick_wake_same_cpu;  // a client's kick -> the loop running, on the kicker's CPU
    common::LatencyHistogram kick_wake_other_cpu; // ... on another CPU (a wake-up across cores)
    common::LatencyHistogram nap_overshoot;       // a nap that ran to its timer: slept - asked
    common::LatencyHistogram busy_turn;           // a turn that found work, start to end
};

// One port and what serves it: its frames (Datapath over the PortIo) and its device's host
// interface. The services of all lanes share one io_context.
struct Lane {
    port::PortIo& io;
    Datapath& dp;
    host::server::HostService& host;
};

class PollLoop {
public:
    using Clock = uint64_t (*)();  // monotonic nanoseconds

    // Registers each port's wake fd with its host service unless `idle.busy_poll` (or a port has
    // none: then naps are timed). `idle.wake_on_rx` is set from that.
    // Each lane's host service shows the loop's latency hops in its Stats while the loop lives.
    PollLoop(std::vector<Lane> lanes, IdlePolicy::Config idle, Clock clock);
    ~PollLoop();
    PollLoop(const PollLoop&) = delete;
    PollLoop& operator=(const PollLoop&) = delete;
    // Lets go of the lanes (before their services and ports go away); no turn may follow.
    void detach();
    PollLoop(port::PortIo& io, Datapath& dp, host::server::HostService& host, IdlePolicy::Config idle, Clock clock)
        : PollLoop(std::vector<Lane>{Lane{io, dp, host}}, idle, clock) {}

    // Whether frames end this loop's naps: every port has a wake fd and the loop does not
    // busy-poll (else the naps are timed, and short).
    static bool frames_end_naps(const std::vector<Lane>& lanes, bool busy_poll);

    // One turn over every lane; when the idle policy says so, a nap after it.
    void turn();

    bool wakes_on_rx() const noexcept { return wake_on_rx_; }
    // From now on the loop's thread (the caller's) is placed by this: its home core outside
    // streams, if it has one, and off the core of a client streaming from it (policies 8, 9).
    void set_placement(std::unique_ptr<LoopPlacement> placement) { placement_ = std::move(placement); }
    const IdlePolicy& idle() const noexcept { return idle_; }
    const LoopCounters& counters() const noexcept { return counters_; }
    std::vector<std::pair<std::string, uint64_t>> counter_list() const;

    // Latency tracing: the loop's hops, and the hosts' (the clients' stamps) with them.
    void set_latency_trace(bool on);
    const LoopHops& hops() const noexcept { return hops_; }
    host::server::HistogramList histogram_list() const;

private:
    void nap(uint64_t sleep_ns);
    size_t traced_lane_turn(Lane& l, uint64_t now);
    void note_kick();
    host::server::HostService::Activity activity() const;  // every lane's WQEs and CQEs so far
    void trace_nap(host::server::NapEnd end, uint64_t nap_start, uint64_t woke, uint64_t asked_ns);
    static int64_t realtime_minus_monotonic();
    size_t poll_ports(uint64_t now);
    uint64_t served_rx() const;

    std::vector<Lane> lanes_;
    std::vector<host::server::HostService*> services_;
    Clock clock_;
    bool wake_on_rx_;
    IdlePolicy idle_;
    LoopCounters counters_;
    uint64_t last_control_ = 0;
    bool check_rx_after_timeout_ = false;
    uint64_t rx_frames_at_timeout_ = 0;
    bool trace_ = false;
    LoopHops hops_;
    uint64_t last_rx_ns_ = 0;  // tracing: when the newest frames not yet followed by completions came
    std::unique_ptr<LoopPlacement> placement_;
    host::server::HostService::Activity activity_at_last_kick_;
    uint32_t streaming_kicks_ = 0;  // in a row: kicks from our core after WQEs and no completion
    uint64_t streaming_kicks_since_ = 0;  // the first of them
};

}  // namespace rnic::daemon
