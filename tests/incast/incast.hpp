// DCQCN under incast in simulated time (docs/congestion.md, "Incast in simulated time"): N
// sender engines, each with one RC QP doing large WRITEs, each on its own cable into a switch
// whose egress port towards the one receiver is the shared bottleneck (RED ECN marking, tail
// drop). A run samples every flow's throughput at the bottleneck, every sender's DCQCN rate and
// the queue, and derives the figures per phase (a stretch with the same set of active flows):
// convergence time, Jain's fairness, utilisation, queue. Deterministic: one seed, no wall clock.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/sim/switch_node.hpp"
#include "rnic/sim/time.hpp"

namespace rnic::incast {

using sim::TimeNs;

enum class ParamSet : uint8_t {
    kPaper,   // Zhu et al., SIGCOMM'15: K 55 us, g 1/256, N 50 us, T 55 us, B 10 MB, F 5, R_AI 40 Mb/s
    kNvidia,  // the firmware defaults (DcqcnParams{}): 1-us alpha period, 4-us CNP spacing, B 32 KB
};
const char* to_string(ParamSet set) noexcept;
cc::DcqcnParams dcqcn_params(ParamSet set);

struct Flow {
    TimeNs start_ns = 0;  // the sender posts its first WRITE
    TimeNs stop_ns = 0;   // it posts no new WRITE from here (those in flight still finish)
};

struct Scenario {
    std::string name;
    std::vector<Flow> flows;
    TimeNs duration_ns = 20 * sim::kMillisecond;
    uint64_t rate_bps = 40'000'000'000;  // every cable and the bottleneck
    sim::EgressPortConfig bottleneck;    // the switch port towards the receiver
    bool dcqcn = true;                   // off: no ECT, so no marks and no CNPs
    ParamSet param_set = ParamSet::kPaper;
    cc::DcqcnParams params;
    TimeNs cable_latency_ns = 1 * sim::kMicrosecond;
    TimeNs sample_ns = 50 * sim::kMicrosecond;
    // Rates are judged over this window: shorter windows see DCQCN's sawtooth, longer ones hide
    // slow convergence.
    TimeNs window_ns = 1 * sim::kMillisecond;
    double tolerance = 0.10;  // converged: every active flow within +-tolerance of the fair share
    uint32_t message_bytes = 256 * 1024;
    uint32_t outstanding = 8;  // WRITEs in flight per flow
    uint64_t seed = 1;
};

// N flows starting together and running for the whole scenario.
Scenario incast_scenario(unsigned flows, ParamSet set);
// Four flows joining 10 ms apart, then leaving in reverse order: 1, 2, 3, 4, 3, 2, 1 active.
Scenario arrive_leave_scenario(ParamSet set);

struct Sample {
    TimeNs time_ns = 0;
    uint64_t queue_bytes = 0;
    std::vector<double> gbps;       // per flow: bytes through the bottleneck over the last window
    std::vector<double> rate_gbps;  // per flow: DCQCN's current rate (the port rate when not limited)
};

struct Phase {
    TimeNs begin_ns = 0;
    TimeNs end_ns = 0;
    std::vector<unsigned> active;  // flow indices
    double fair_gbps = 0;
    // From begin_ns until every active flow's windowed rate stays within tolerance of the fair
    // share for the rest of the phase; nullopt if it never does.
    std::optional<TimeNs> convergence_ns;
    std::optional<TimeNs> convergence_loose_ns;  // the same within twice the tolerance
    // Over the phase's second half (its steady state):
    double jain = 0;         // of the active flows' mean rates
    double utilisation = 0;  // bottleneck bytes out / capacity
    double mean_queue_bytes = 0;
    uint64_t max_queue_bytes = 0;  // sampled
};

struct Result {
    std::vector<Sample> samples;
    std::vector<Phase> phases;
    bool data_ok = false;           // every WRITE completed successfully and every byte arrived
    uint64_t writes_completed = 0;
    uint64_t peak_queue_bytes = 0;  // exact, from the switch
    uint64_t drops = 0;
    uint64_t ce_marked = 0;
    uint64_t cnps_sent = 0;  // by the receiver
    uint64_t cnps_handled = 0;
    uint64_t cuts = 0;
    uint64_t retransmitted_packets = 0;
    uint64_t bytes_delivered = 0;  // through the bottleneck
    TimeNs drain_ns = 0;           // after the end, until the last WRITE completed
};

Result run(const Scenario& scenario);

// Time series: time_us, queue_bytes, then gbps_<i> and rate_gbps_<i> for every flow.
void write_csv(std::ostream& out, const Scenario& scenario, const Result& result);
// A human-readable account: the set-up, every phase and the counters.
void write_summary(std::ostream& out, const Scenario& scenario, const Result& result);

}  // namespace rnic::incast
