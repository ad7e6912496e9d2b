// Faults through the whole simulator: loss, duplication, reordering, corruption, a dead link,
// the drop filter, and reproducibility from the seed.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "rnic/sim/seed.hpp"
#include "rnic/sim/simulator.hpp"
#include "test_nodes.hpp"

using namespace rnic::sim;
using namespace rnic::sim::test;

namespace {

const auto kNever = [] { return false; };

// A sender and a sink joined by one link, the usual set-up of these tests.
struct OneWay {
    Simulator sim;
    SenderNode a;
    SinkNode b;
    NodeId ia;
    NodeId ib;

    OneWay(uint64_t seed, const LinkConfig& config, uint64_t count, TimeNs interval = 0, size_t size = kToyMinFrame)
        : sim(seed), a(toy_mac(1), toy_mac(2), count, 0, interval, size) {
        ia = sim.add_node(a, toy_mac(1));
        ib = sim.add_node(b, toy_mac(2));
        sim.connect(ia, ib, config);
    }
    const LinkCounters& counters() const { return sim.link(ia, ib).counters(); }
    RunResult run() { return sim.run_until(kNever, kTimeNever, kDefaultMaxEvents); }
};

// |observed - n p| within `sigmas` binomial standard deviations.
bool near_expected(uint64_t observed, uint64_t n, double p, double sigmas = 5) {
    const double mean = static_cast<double>(n) * p;
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    return std::abs(static_cast<double>(observed) - mean) <= sigmas * sd;
}

}  // namespace

TEST_CASE("the seed helper formats seed=N") {
    CHECK(seed_info(0) == "seed=0");
    CHECK(seed_info(18446744073709551615ull) == "seed=18446744073709551615");
}

TEST_CASE("loss drops about p of the frames") {
    const uint64_t seed = seed_from_env(101);
    INFO(seed_info(seed));
    const double p = GENERATE(0.01, 0.1, 0.5);
    INFO("p=" << p);
    LinkConfig config;
    config.loss_probability = p;
    constexpr uint64_t kFrames = 20000;
    OneWay net(seed, config, kFrames);
    REQUIRE(net.run().outcome == RunOutcome::kIdle);

    const LinkCounters& c = net.counters();
    CHECK(c.sent == kFrames);
    CHECK(c.dropped == c.dropped_loss);
    CHECK(c.delivered + c.dropped == kFrames);
    CHECK(net.b.received.size() == c.delivered);
    CHECK(near_expected(c.dropped, kFrames, p));
    // Loss alone keeps the survivors in order.
    CHECK(std::is_sorted(net.b.received.begin(), net.b.received.end(),
                         [](const auto& x, const auto& y) { return x.seq < y.seq; }));
}

TEST_CASE("loss 0 and 1 are exact") {
    LinkConfig config;
    config.loss_probability = 1;
    OneWay all(1, config, 1000);
    all.run();
    CHECK(all.counters().dropped_loss == 1000);
    CHECK(all.b.received.empty());

    config.loss_probability = 0;
    OneWay none(1, config, 1000);
    none.run();
    CHECK(none.b.received.size() == 1000);
}

TEST_CASE("duplication makes extra copies and counts them") {
    const uint64_t seed = seed_from_env(202);
    INFO(seed_info(seed));
    LinkConfig config;
    config.duplicate_probability = 0.1;
    constexpr uint64_t kFrames = 10000;
    OneWay net(seed, config, kFrames, 1 * kMicrosecond);
    net.run();

    const LinkCounters& c = net.counters();
    CHECK(near_expected(c.duplicated, kFrames, 0.1));
    CHECK(c.delivered == kFrames + c.duplicated);
    REQUIRE(net.b.received.size() == c.delivered);
    std::map<uint64_t, int> copies;
    for (const auto& arrival : net.b.received) ++copies[arrival.seq];
    CHECK(copies.size() == kFrames);
    uint64_t twice = 0;
    for (const auto& [seq, n] : copies) {
        CHECK(n <= 2);
        twice += n == 2;
    }
    CHECK(twice == c.duplicated);
    // With no duplicate delay the copy lands right behind its original.
    for (size_t i = 1; i < net.b.received.size(); ++i) {
        if (net.b.received[i].seq == net.b.received[i - 1].seq)
            CHECK(net.b.received[i].time == net.b.received[i - 1].time);
    }
}

TEST_CASE("a duplicate delay makes stale duplicates arrive after later frames") {
    LinkConfig config;
    config.duplicate_probability = 1;
    config.duplicate_delay_max_ns = 50 * kMicrosecond;
    OneWay net(seed_from_env(7), config, 200, 1 * kMicrosecond);
    net.run();
    uint64_t stale = 0;
    uint64_t highest = 0;
    for (const auto& arrival : net.b.received) {
        if (arrival.seq < highest) ++stale;
        highest = std::max(highest, arrival.seq);
    }
    CHECK(stale > 100);
}

TEST_CASE("reordering holds frames back so later frames overtake them") {
    const uint64_t seed = seed_from_env(303);
    INFO(seed_info(seed));
    LinkConfig config;
    config.latency_ns = 5 * kMicrosecond;
    config.reorder_probability = 0.05;
    config.reorder_delay_min_ns = 3 * kMicrosecond;
    config.reorder_delay_max_ns = 10 * kMicrosecond;
    constexpr uint64_t kFrames = 5000;
    OneWay net(seed, config, kFrames, 1 * kMicrosecond);
    std::set<uint64_t> held_back;
    net.sim.set_trace([&](const TraceEvent& e) {
        if (e.kind == TraceKind::kReordered) held_back.insert(toy_seq(e.frame));
    });
    net.run();

    const LinkCounters& c = net.counters();
    CHECK(near_expected(c.reordered, kFrames, 0.05));
    CHECK(held_back.size() == c.reordered);
    CHECK(c.delivered == kFrames);
    REQUIRE(net.b.received.size() == kFrames);

    std::set<uint64_t> seen;
    std::optional<uint64_t> last_in_order;
    for (const auto& arrival : net.b.received) {
        CHECK(seen.insert(arrival.seq).second);  // exactly once
        const TimeNs sent = arrival.seq * kMicrosecond;
        if (held_back.contains(arrival.seq)) {
            CHECK(arrival.time >= sent + 8 * kMicrosecond);
            CHECK(arrival.time <= sent + 15 * kMicrosecond);
        } else {
            // Only the held-back frames are out of place.
            CHECK(arrival.time == sent + 5 * kMicrosecond);
            if (last_in_order) CHECK(arrival.seq > *last_in_order);
            last_in_order = arrival.seq;
        }
    }
    // Overtaken: a higher sequence number arrived first. Frames are 1 us apart and held back
    // at least 3 us, so nearly every held-back frame is overtaken (not one that other
    // held-back frames shadow, or one of the last few).
    std::set<uint64_t> overtaken;
    uint64_t highest = 0;
    for (const auto& arrival : net.b.received) {
        if (arrival.seq < highest) overtaken.insert(arrival.seq);
        highest = std::max(highest, arrival.seq);
    }
    CHECK(std::includes(held_back.begin(), held_back.end(), overtaken.begin(), overtaken.end()));
    CHECK(overtaken.size() * 10 >= held_back.size() * 9);
}

TEST_CASE("corruption flips exactly one bit of a corrupted frame") {
    const uint64_t seed = seed_from_env(404);
    INFO(seed_info(seed));
    LinkConfig config;
    config.corrupt_probability = 0.3;
    constexpr uint64_t kFrames = 3000;
    OneWay net(seed, config, kFrames, 0, 64);
    net.run();

    REQUIRE(net.b.received.size() == kFrames);  // corruption alone keeps order and count
    uint64_t corrupted = 0;
    std::set<size_t> bytes_hit;
    for (uint64_t i = 0; i < kFrames; ++i) {
        const std::vector<uint8_t> original = toy_frame(toy_mac(2), toy_mac(1), i, 64);
        const std::vector<uint8_t>& got = net.b.received[i].frame;
        REQUIRE(got.size() == original.size());
        int flipped = 0;
        for (size_t j = 0; j < got.size(); ++j) {
            flipped += std::popcount(static_cast<unsigned>(got[j] ^ original[j]));
            if (got[j] != original[j]) bytes_hit.insert(j);
        }
        CHECK(flipped <= 1);
        corrupted += flipped;
    }
    CHECK(corrupted == net.counters().corrupted);
    CHECK(near_expected(corrupted, kFrames, 0.3));
    CHECK(bytes_hit.size() > 50);  // anywhere in the frame, the addresses included
}

TEST_CASE("a link that is down drops everything, in flight too, and recovers") {
    LinkConfig config;
    config.latency_ns = 10 * kMicrosecond;
    OneWay net(1, config, 30, 1 * kMicrosecond);
    Link& link = net.sim.link(net.ia, net.ib);

    // Frames 0..5 are on the wire when the link dies.
    REQUIRE(net.sim.run_until(kNever, 5500, kDefaultMaxEvents).outcome == RunOutcome::kTimedOut);
    CHECK(net.a.sent() == 6);
    CHECK(net.sim.in_flight() == 6);
    link.config().down = true;
    REQUIRE(net.sim.run_until(kNever, 15500, kDefaultMaxEvents).outcome == RunOutcome::kTimedOut);
    CHECK(net.b.received.empty());
    CHECK(net.a.sent() == 16);
    CHECK(link.counters().dropped_link_down == 16);  // 10 when sent, 6 in flight
    CHECK(net.sim.in_flight() == 0);

    link.config().down = false;
    net.run();
    REQUIRE(net.b.received.size() == 14);
    for (uint64_t i = 0; i < 14; ++i) CHECK(net.b.received[i].seq == 16 + i);
    CHECK(link.counters().sent == 30);
    CHECK(link.counters().dropped == 16);
    CHECK(link.counters().delivered == 14);
}

TEST_CASE("a link down from the start is a dead peer") {
    LinkConfig config;
    config.down = true;
    config.loss_probability = 0.5;  // irrelevant: a dead link drops before any draw
    OneWay net(1, config, 500);
    net.run();
    CHECK(net.b.received.empty());
    CHECK(net.counters().dropped_link_down == 500);
    CHECK(net.counters().dropped_loss == 0);
}

TEST_CASE("the drop filter drops exactly the frames it picks") {
    LinkConfig config;
    OneWay net(1, config, 10, 1 * kMicrosecond);
    std::vector<uint64_t> filtered;
    net.sim.link(net.ia, net.ib).config().drop_filter = [&](std::span<const uint8_t> frame) {
        const uint64_t seq = toy_seq(frame);
        // "The first frame 3 and every frame 7": a stateful filter, as a test dropping the
        // first READ response would write.
        const bool drop = (seq == 3 && filtered.empty()) || seq == 7;
        if (drop) filtered.push_back(seq);
        return drop;
    };
    net.run();
    CHECK(filtered == std::vector<uint64_t>{3, 7});
    std::vector<uint64_t> got;
    for (const auto& arrival : net.b.received) got.push_back(arrival.seq);
    CHECK(got == std::vector<uint64_t>{0, 1, 2, 4, 5, 6, 8, 9});
    CHECK(net.counters().dropped_filter == 2);
    CHECK(net.counters().dropped == 2);
}

namespace {

using Trace = std::vector<std::tuple<TimeNs, TraceKind, NodeId, NodeId, std::vector<uint8_t>>>;

struct FaultyRun {
    RunOutcome outcome;
    Trace trace;
    LinkCounters forward;
    LinkCounters backward;
    SimulatorCounters totals;
};

// Echo traffic both ways over links with every fault on.
FaultyRun faulty_run(uint64_t seed) {
    LinkConfig config;
    config.latency_ns = 2 * kMicrosecond;
    config.jitter_ns = 500;
    config.loss_probability = 0.05;
    config.duplicate_probability = 0.05;
    config.duplicate_delay_max_ns = 3 * kMicrosecond;
    config.reorder_probability = 0.05;
    config.corrupt_probability = 0.05;
    config.bandwidth_bps = 10'000'000'000;
    Simulator sim(seed);
    SenderNode a(toy_mac(1), toy_mac(2), 2000, 0, 700);
    SinkNode b(/*echo=*/true);
    const NodeId ia = sim.add_node(a, toy_mac(1));
    const NodeId ib = sim.add_node(b, toy_mac(2));
    sim.connect(ia, ib, config);
    FaultyRun run;
    sim.set_trace([&](const TraceEvent& e) {
        run.trace.emplace_back(e.time, e.kind, e.from, e.to, std::vector<uint8_t>(e.frame.begin(), e.frame.end()));
    });
    run.outcome = sim.run_until(kNever, kTimeNever, kDefaultMaxEvents).outcome;
    run.forward = sim.link(ia, ib).counters();
    run.backward = sim.link(ib, ia).counters();
    run.totals = sim.counters();
    return run;
}

}  // namespace

TEST_CASE("the same seed replays the same run and another seed does not") {
    const uint64_t seed = seed_from_env(505);
    INFO(seed_info(seed));
    const FaultyRun first = faulty_run(seed);
    REQUIRE(first.outcome == RunOutcome::kIdle);
    CHECK(first.trace == faulty_run(seed).trace);
    CHECK(first.trace != faulty_run(seed + 1).trace);
}

TEST_CASE("every frame sent is accounted for once all faults are on") {
    const uint64_t seed = seed_from_env(606);
    INFO(seed_info(seed));
    const FaultyRun run = faulty_run(seed);
    REQUIRE(run.outcome == RunOutcome::kIdle);
    for (const LinkCounters& c : {run.forward, run.backward}) {
        CHECK(c.sent + c.duplicated == c.delivered + c.dropped);
        CHECK(c.dropped == c.dropped_loss + c.dropped_link_down + c.dropped_filter);
        CHECK(c.dropped_loss > 0);
        CHECK(c.duplicated > 0);
        CHECK(c.reordered > 0);
        CHECK(c.corrupted > 0);
    }
    CHECK(run.forward.sent == 2000);
    // b echoes everything it gets; an echo whose addresses a bit flip has mangled either goes
    // nowhere (unroutable) or is flooded back to a (a group address).
    CHECK(run.backward.sent + run.totals.unroutable == run.forward.delivered);
    std::map<TraceKind, uint64_t> kinds;
    for (const auto& event : run.trace) ++kinds[std::get<1>(event)];
    CHECK(kinds[TraceKind::kSent] == run.forward.sent + run.backward.sent);
    CHECK(kinds[TraceKind::kDelivered] == run.forward.delivered + run.backward.delivered);
    CHECK(kinds[TraceKind::kDuplicated] == run.forward.duplicated + run.backward.duplicated);
    CHECK(kinds[TraceKind::kCorrupted] == run.forward.corrupted + run.backward.corrupted);
    CHECK(kinds[TraceKind::kReordered] == run.forward.reordered + run.backward.reordered);
    CHECK(kinds[TraceKind::kDroppedLoss] == run.forward.dropped_loss + run.backward.dropped_loss);
    CHECK(kinds[TraceKind::kUnroutable] == run.totals.unroutable);
    CHECK(run.totals.deliveries == run.forward.delivered + run.backward.delivered);
}
