// A deterministic discrete-event network: nodes joined by a switch that forwards by
// destination MAC over per-direction links with faults, in virtual time.
//
// One run is a pure function of the nodes' behaviour and the seed: events are ordered by
// (time, sequence number), nodes are polled in the order they were added, and all randomness
// comes from one generator. Nothing here reads the wall clock, sleeps or starts a thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "rnic/sim/link.hpp"
#include "rnic/sim/mac.hpp"
#include "rnic/sim/node.hpp"
#include "rnic/sim/random.hpp"
#include "rnic/sim/time.hpp"

namespace rnic::sim {

inline constexpr NodeId kNoNode = ~NodeId{0};
// A generous bound for tests that do not care to pick one.
inline constexpr uint64_t kDefaultMaxEvents = 10'000'000;

enum class RunOutcome : uint8_t {
    kDone,        // the predicate became true
    kTimedOut,    // the next event lies beyond max_time_ns; now() == max_time_ns
    kEventLimit,  // max_events events were handled without the predicate becoming true
    kIdle,        // nothing in flight and no timer armed: nothing can happen any more
};

struct RunResult {
    RunOutcome outcome = RunOutcome::kIdle;
    uint64_t events = 0;  // deliveries and advance() calls handled by this run

    bool done() const noexcept { return outcome == RunOutcome::kDone; }
};

const char* to_string(RunOutcome outcome) noexcept;
std::ostream& operator<<(std::ostream& os, RunOutcome outcome);  // so Catch2 prints names

enum class TraceKind : uint8_t {
    kSent,       // a node put a frame on a link (once per link for a flooded frame)
    kDelivered,  // about to be handed to `to`
    kDroppedLoss,
    kDroppedLinkDown,  // when sent, or in flight
    kDroppedFilter,
    kDuplicated,  // `frame` is the extra copy, scheduled
    kReordered,   // `frame` has been held back
    kCorrupted,   // `frame` is the corrupted copy, scheduled
    kUnroutable,  // no node with that destination MAC or no link to it, or a runt; to = kNoNode
    kTimer,       // advance() called on `from`; frame is empty
};

const char* to_string(TraceKind kind) noexcept;

// Valid only during the trace callback: `frame` points into the simulator's buffers.
struct TraceEvent {
    TimeNs time = 0;
    TraceKind kind = TraceKind::kSent;
    NodeId from = kNoNode;
    NodeId to = kNoNode;
    std::span<const uint8_t> frame;
};

struct SimulatorCounters {
    uint64_t unroutable = 0;  // unknown destination MAC, or no link from the sender to it
    uint64_t runts = 0;       // frames shorter than an Ethernet header
    uint64_t deliveries = 0;
    uint64_t timer_calls = 0;
};

class Simulator {
public:
    explicit Simulator(uint64_t seed) : seed_(seed), rng_(seed) {}
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    uint64_t seed() const noexcept { return seed_; }
    TimeNs now() const noexcept { return now_; }
    const SimulatorCounters& counters() const noexcept { return counters_; }
    // Frames scheduled but not yet delivered or dropped.
    size_t in_flight() const noexcept { return queue_.size(); }

    // Set-up; these throw std::invalid_argument on misuse. The node must outlive the
    // simulator (it is not owned). Its MAC must be unicast and unique.
    NodeId add_node(Node& node, const MacAddr& mac);
    // Joins a and b with a link in each direction.
    void connect(NodeId a, NodeId b, const LinkConfig& config) { connect(a, b, config, config); }
    void connect(NodeId a, NodeId b, const LinkConfig& a_to_b, const LinkConfig& b_to_a);
    // Every pair of nodes, both directions, one config: a switch with uniform ports.
    void connect_all(const LinkConfig& config);
    // A host's single cable: unicast frames from `node` to a destination it has no link of its
    // own to go to `gateway` (a SwitchNode, which forwards them on). Both must be connected.
    void set_uplink(NodeId node, NodeId gateway);
    // The direction from -> to; throws std::out_of_range when not connected.
    Link& link(NodeId from, NodeId to);
    const Link& link(NodeId from, NodeId to) const;

    // Called for every event with the event; must not call back into the simulator.
    void set_trace(std::function<void(const TraceEvent&)> trace) { trace_ = std::move(trace); }

    // Forwards a frame as if `from` had transmitted it at now(): lets a test inject a frame
    // that no node would build.
    void send(NodeId from, std::span<const uint8_t> frame);

    // Runs the loop: poll every node's transmit(), forward what it sent, move time to the next
    // event (the earliest delivery or node deadline), deliver every frame due then and call
    // advance() on every node whose deadline has come (deliveries before timers at the same
    // instant, so an ACK that lands exactly at a timeout wins), and repeat. `done` is checked
    // before anything runs and after every poll. max_time_ns is absolute virtual time: events
    // at max_time_ns still run.
    RunResult run_until(const std::function<bool()>& done, TimeNs max_time_ns, uint64_t max_events);
    // Runs until now() + duration whatever happens: kDone when that time is reached (idle
    // stretches are skipped), kEventLimit otherwise.
    RunResult run_for(TimeNs duration, uint64_t max_events);

private:
    struct Delivery {
        TimeNs time;
        uint64_t sequence;
        Link* link;
        std::vector<uint8_t> frame;
    };
    // Heap order: earliest (time, sequence) on top.
    struct LaterFirst {
        bool operator()(const Delivery& a, const Delivery& b) const noexcept {
            return std::pair(a.time, a.sequence) > std::pair(b.time, b.sequence);
        }
    };
    struct Port {
        Node* node;
        MacAddr mac;
    };

    void poll_transmits();
    void forward(NodeId from, std::span<const uint8_t> frame);
    void send_on(Link& link, std::span<const uint8_t> frame);
    void schedule(Link& link, TimeNs time, std::vector<uint8_t> frame);
    std::optional<TimeNs> next_event_time() const;
    // Handles the events due at now(), at most `budget` of them; returns how many.
    uint64_t run_due_events(uint64_t budget);
    void emit(TraceKind kind, NodeId from, NodeId to, std::span<const uint8_t> frame);
    void check_node(NodeId id) const;
    Link& find_link(NodeId from, NodeId to) const;

    uint64_t seed_;
    Random rng_;
    TimeNs now_ = 0;
    uint64_t next_sequence_ = 0;
    std::vector<Port> ports_;
    std::map<MacAddr, NodeId> by_mac_;
    std::deque<Link> links_;  // a deque keeps Link& and Delivery::link valid as links are added
    std::map<std::pair<NodeId, NodeId>, Link*> link_index_;
    std::map<NodeId, NodeId> uplink_;
    std::vector<Delivery> queue_;  // a heap under LaterFirst
    std::function<void(const TraceEvent&)> trace_;
    SimulatorCounters counters_;
    std::vector<std::vector<uint8_t>> tx_scratch_;
};

}  // namespace rnic::sim
