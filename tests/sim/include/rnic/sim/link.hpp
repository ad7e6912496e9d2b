// One direction of a path between two nodes and the faults it injects. The simulator asks the
// link what becomes of each frame (dropped, or when it arrives and in what state); the link
// keeps its own counters and its serialization and ordering state, but no queue: the
// deliveries themselves live in the simulator's single event queue.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "rnic/sim/node.hpp"
#include "rnic/sim/random.hpp"
#include "rnic/sim/time.hpp"

namespace rnic::sim {

struct LinkConfig {
    // Propagation delay after the frame has been clocked out.
    TimeNs latency_ns = 1 * kMicrosecond;
    // Extra delay, uniform in [0, jitter_ns] per frame. Jitter alone never reorders: a frame
    // never arrives before the frame sent ahead of it (use reorder_probability for that).
    TimeNs jitter_ns = 0;
    // Probabilities per frame, each drawn independently, 0 = never, 1 = always.
    double loss_probability = 0;
    double duplicate_probability = 0;
    double reorder_probability = 0;
    double corrupt_probability = 0;  // flips exactly one random bit of the frame
    // A duplicate arrives uniform in [0, duplicate_delay_max_ns] after the original, so a
    // large value makes stale duplicates that show up after the sender has moved on.
    TimeNs duplicate_delay_max_ns = 0;
    // A reordered frame is held back by an extra delay uniform in [min, max]; frames sent
    // less than that after it overtake it.
    TimeNs reorder_delay_min_ns = 1 * kMicrosecond;
    TimeNs reorder_delay_max_ns = 10 * kMicrosecond;
    // Serialization rate in bits/s, 0 = infinite. Frames queue behind each other at the
    // sender's side of the link, frame bytes * 8 bits each (no preamble, IFG or FCS).
    uint64_t bandwidth_bps = 0;
    // A dead link or peer: frames are dropped when sent and frames in flight are dropped when
    // they would have arrived.
    bool down = false;
    // Returns true to drop a frame (e.g. "the first READ response"); sees every frame sent
    // on an up link, before the random faults.
    std::function<bool(std::span<const uint8_t>)> drop_filter;
    // RED-style ECN marking on the sender's queue, as a switch egress port does it: an
    // ECN-capable IP frame that finds at least kmin bytes queued ahead of it is marked CE with
    // probability pmax * (queued - kmin) / (kmax - kmin), always from kmax on. Off while kmax is 0.
    struct EcnMarking {
        uint64_t kmin_bytes = 0;
        uint64_t kmax_bytes = 0;
        double pmax = 0;
    } ecn;
};

struct LinkCounters {
    uint64_t sent = 0;       // frames offered to the link
    uint64_t delivered = 0;  // frames handed to the receiving node, duplicates included
    uint64_t dropped = 0;    // all drops; the three below say why
    uint64_t dropped_loss = 0;
    uint64_t dropped_link_down = 0;
    uint64_t dropped_filter = 0;
    uint64_t duplicated = 0;  // extra copies made
    uint64_t reordered = 0;   // frames held back (whether or not a later frame overtook them)
    uint64_t corrupted = 0;
    uint64_t bytes_sent = 0;
    uint64_t bytes_delivered = 0;
    uint64_t ce_marked = 0;         // frames this link marked CE
    uint64_t peak_queue_bytes = 0;  // most bytes ever waiting ahead of a frame (needs bandwidth_bps)
};

enum class DropReason : uint8_t { kLoss, kLinkDown, kFilter };

// What a link decided for one frame: a drop, or one arrival (two when duplicated).
struct LinkFate {
    struct Arrival {
        TimeNs time = 0;
        std::vector<uint8_t> frame;
        bool duplicate = false;
        bool reordered = false;
        bool corrupted = false;
    };
    std::optional<DropReason> dropped;
    std::vector<Arrival> arrivals;
};

class Link {
public:
    Link(NodeId from, NodeId to, LinkConfig config) : from_(from), to_(to), config_(std::move(config)) {}

    NodeId from() const noexcept { return from_; }
    NodeId to() const noexcept { return to_; }
    // Mutable so a test can change faults mid-run (bring the link down, set a filter).
    LinkConfig& config() noexcept { return config_; }
    const LinkConfig& config() const noexcept { return config_; }
    const LinkCounters& counters() const noexcept { return counters_; }

    // Decides the fate of a frame put on the link at `now` and counts it.
    LinkFate offer(std::span<const uint8_t> frame, TimeNs now, Random& rng);
    // Called when an arrival is due: false (and counted as a drop) if the link went down
    // while the frame was in flight.
    bool arrive(size_t frame_bytes);

    // Bytes still waiting to be clocked out at `now` (0 without a bandwidth).
    uint64_t queued_bytes(TimeNs now) const noexcept;

private:
    TimeNs serialization_delay(size_t frame_bytes) const noexcept;
    void count_drop(DropReason reason) noexcept;

    NodeId from_;
    NodeId to_;
    LinkConfig config_;
    LinkCounters counters_;
    TimeNs busy_until_ = 0;             // when the sender's side has clocked out its last frame
    TimeNs last_in_order_arrival_ = 0;  // FIFO floor for frames that are not reordered
};

const char* to_string(DropReason reason) noexcept;

// Sets an ECN-capable IPv4/IPv6 frame's ECN field to CE (fixing the IPv4 header checksum); false
// for frames that are not ECN-capable IP.
bool mark_ce(std::vector<uint8_t>& frame) noexcept;

}  // namespace rnic::sim
