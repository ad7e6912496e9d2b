// An output-queued switch as a simulator node: hosts each have their own link into it
// (Simulator::set_uplink), and it forwards every frame by destination MAC to that port's egress
// queue, which drains at the port's rate. The queue is where congestion shows: RED-style ECN
// marking (Kmin, Kmax, Pmax) on dequeue or on enqueue, tail drop at the port's buffer limit,
// and the counters an incast study needs (peak queue, marks, drops, bytes out per source).
//
// Deterministic: the marking draws come from the switch's own generator, seeded by the caller,
// and frames leave in arrival order. The links from the switch to the hosts should have no
// bandwidth of their own (0): the egress port serializes, the link only adds its latency.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "rnic/sim/mac.hpp"
#include "rnic/sim/node.hpp"
#include "rnic/sim/random.hpp"
#include "rnic/sim/time.hpp"

namespace rnic::sim {

// Where RED looks at the queue. A switch that marks on dequeue (egress) decides when the frame
// starts to leave, from the bytes still queued behind it; on enqueue, when the frame arrives,
// from the bytes ahead of it. Dequeue marking tells the receiver about the queue as it is now,
// not as it was one queueing delay ago, which shortens DCQCN's control loop by that delay.
enum class EcnMarkPoint : uint8_t { kDequeue, kEnqueue };

struct EgressPortConfig {
    uint64_t rate_bps = 40'000'000'000;
    // Tail drop: a frame that would take the port's buffered bytes (waiting and in service)
    // beyond this is dropped. 0 = no limit.
    uint64_t buffer_bytes = 0;
    // RED on ECN-capable IP frames: marked CE with probability pmax * (q - kmin) / (kmax - kmin)
    // for kmin <= q < kmax, always from kmax on. Off while kmax is 0.
    uint64_t kmin_bytes = 0;
    uint64_t kmax_bytes = 0;
    double pmax = 0;
    EcnMarkPoint mark_point = EcnMarkPoint::kDequeue;
};

struct EgressPortCounters {
    uint64_t enqueued = 0;
    uint64_t dropped = 0;  // tail drops
    uint64_t ce_marked = 0;
    uint64_t not_ect = 0;  // would have been marked but are not ECN-capable
    uint64_t bytes_out = 0;
    uint64_t frames_out = 0;
    uint64_t peak_queue_bytes = 0;  // most bytes ever buffered (waiting and in service)
};

class SwitchNode : public Node {
public:
    explicit SwitchNode(uint64_t seed) : rng_(seed) {}

    // The egress port towards the host with this MAC. Frames for a MAC without a port are
    // counted (unknown_destination) and dropped, as are group-addressed frames.
    void add_port(const MacAddr& mac, const EgressPortConfig& config);
    EgressPortConfig& port_config(const MacAddr& mac);

    const EgressPortCounters& counters(const MacAddr& mac) const;
    // Bytes buffered at the port now: waiting plus the frame being clocked out.
    uint64_t queue_bytes(const MacAddr& mac) const;
    // Bytes this port has sent, by source MAC (a flow's share of the bottleneck).
    const std::map<MacAddr, uint64_t>& bytes_out_by_source(const MacAddr& mac) const;
    uint64_t unknown_destination() const noexcept { return unknown_destination_; }

    void receive(std::span<const uint8_t> frame, TimeNs now) override;
    void transmit(std::vector<std::vector<uint8_t>>& out, TimeNs now) override;
    std::optional<TimeNs> next_deadline() const override;
    void advance(TimeNs now) override;

private:
    struct Port {
        EgressPortConfig config;
        EgressPortCounters counters;
        std::deque<std::vector<uint8_t>> waiting;
        uint64_t waiting_bytes = 0;
        std::optional<std::vector<uint8_t>> in_service;
        TimeNs service_done = 0;
        std::map<MacAddr, uint64_t> by_source;
    };

    void maybe_mark(Port& port, std::vector<uint8_t>& frame, uint64_t queue_bytes);
    void start_service(Port& port, TimeNs now);
    const Port& find(const MacAddr& mac) const;

    Random rng_;
    std::map<MacAddr, Port> ports_;
    std::vector<std::vector<uint8_t>> ready_;  // clocked out, to hand to the simulator
    uint64_t unknown_destination_ = 0;
};

}  // namespace rnic::sim
