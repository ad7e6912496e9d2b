// The event loop: ordering, latency, timers, and the bounds that stop runaway runs.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "rnic/sim/simulator.hpp"
#include "test_nodes.hpp"

using namespace rnic::sim;
using namespace rnic::sim::test;

namespace {

LinkConfig latency(TimeNs ns) {
    LinkConfig config;
    config.latency_ns = ns;
    return config;
}

const auto kNever = [] { return false; };

}  // namespace

TEST_CASE("without faults frames arrive in order after exactly the latency") {
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 100, 0, 1 * kMicrosecond);
    SinkNode b;
    const NodeId ia = sim.add_node(a, toy_mac(1));
    const NodeId ib = sim.add_node(b, toy_mac(2));
    sim.connect(ia, ib, latency(5 * kMicrosecond));

    const RunResult result = sim.run_until([&] { return b.received.size() == 100; }, kSecond, kDefaultMaxEvents);
    REQUIRE(result.outcome == RunOutcome::kDone);
    for (uint64_t i = 0; i < 100; ++i) {
        CHECK(b.received[i].seq == i);
        CHECK(b.received[i].time == i * kMicrosecond + 5 * kMicrosecond);
    }
    CHECK(sim.now() == 99 * kMicrosecond + 5 * kMicrosecond);
    const LinkCounters& c = sim.link(ia, ib).counters();
    CHECK(c.sent == 100);
    CHECK(c.delivered == 100);
    CHECK(c.dropped + c.duplicated + c.reordered + c.corrupted == 0);
    CHECK(sim.link(ib, ia).counters().sent == 0);
}

TEST_CASE("a burst sent at one instant arrives at one instant, in the order sent") {
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 50);
    SinkNode b;
    sim.connect(sim.add_node(a, toy_mac(1)), sim.add_node(b, toy_mac(2)), latency(2 * kMicrosecond));
    REQUIRE(sim.run_until(kNever, kSecond, kDefaultMaxEvents).outcome == RunOutcome::kIdle);
    REQUIRE(b.received.size() == 50);
    for (uint64_t i = 0; i < 50; ++i) {
        CHECK(b.received[i].seq == i);
        CHECK(b.received[i].time == 2 * kMicrosecond);
    }
}

TEST_CASE("an echo comes back after the latencies of both directions") {
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 10, 0, 10 * kMicrosecond);
    SinkNode b(/*echo=*/true);
    const NodeId ia = sim.add_node(a, toy_mac(1));
    const NodeId ib = sim.add_node(b, toy_mac(2));
    sim.connect(ia, ib, latency(3 * kMicrosecond), latency(4 * kMicrosecond));

    REQUIRE(sim.run_until([&] { return a.received.size() == 10; }, kSecond, kDefaultMaxEvents).done());
    for (uint64_t i = 0; i < 10; ++i) {
        CHECK(a.received[i].seq == i);
        CHECK(a.received[i].time == i * 10 * kMicrosecond + 7 * kMicrosecond);
    }
}

TEST_CASE("timers fire at their virtual time") {
    Simulator sim(1);
    TimerNode t({12 * kMicrosecond, 5 * kMicrosecond, 12 * kMicrosecond, kMillisecond});
    sim.add_node(t, toy_mac(1));

    REQUIRE(sim.run_until([&] { return t.fired.size() == 3; }, kSecond, 100).done());
    CHECK(t.fired == std::vector<TimeNs>{5 * kMicrosecond, 12 * kMicrosecond, 12 * kMicrosecond});
    CHECK(sim.now() == 12 * kMicrosecond);

    const RunResult rest = sim.run_until(kNever, kSecond, 100);
    CHECK(rest.outcome == RunOutcome::kIdle);
    CHECK(rest.events == 1);
    CHECK(t.fired.back() == kMillisecond);
    CHECK(sim.now() == kMillisecond);
    CHECK(sim.counters().timer_calls == 3);  // the two 12 us timers fire in one call
}

TEST_CASE("a timer beyond max_time stops the run at max_time") {
    Simulator sim(1);
    TimerNode t({kMillisecond});
    sim.add_node(t, toy_mac(1));
    const RunResult result = sim.run_until(kNever, 400 * kMicrosecond, 100);
    CHECK(result.outcome == RunOutcome::kTimedOut);
    CHECK(result.events == 0);
    CHECK(sim.now() == 400 * kMicrosecond);
    CHECK(t.fired.empty());
    // An event exactly at max_time still runs.
    CHECK(sim.run_until(kNever, kMillisecond, 100).outcome == RunOutcome::kIdle);
    CHECK(t.fired == std::vector<TimeNs>{kMillisecond});
}

namespace {

// Logs the order in which frames and its timer reach it.
class OrderNode : public Node {
public:
    explicit OrderNode(TimeNs deadline) : deadline_(deadline) {}
    std::vector<std::string> log;
    void receive(std::span<const uint8_t>, TimeNs now) override { log.push_back("rx@" + std::to_string(now)); }
    void transmit(std::vector<std::vector<uint8_t>>&, TimeNs) override {}
    std::optional<TimeNs> next_deadline() const override { return deadline_; }
    void advance(TimeNs now) override {
        log.push_back("timer@" + std::to_string(now));
        deadline_.reset();
    }

private:
    std::optional<TimeNs> deadline_;
};

}  // namespace

TEST_CASE("a frame landing exactly at a timer's deadline is delivered before the timer fires") {
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 1);
    OrderNode b(10 * kMicrosecond);
    sim.connect(sim.add_node(a, toy_mac(1)), sim.add_node(b, toy_mac(2)), latency(10 * kMicrosecond));
    REQUIRE(sim.run_until(kNever, kSecond, 100).outcome == RunOutcome::kIdle);
    CHECK(b.log == std::vector<std::string>{"rx@10000", "timer@10000"});
}

TEST_CASE("a timer set in the past fires now and time never runs backwards") {
    Simulator sim(1);
    TimerNode t({3 * kMicrosecond});
    sim.add_node(t, toy_mac(1));
    REQUIRE(sim.run_for(10 * kMicrosecond, 100).done());
    CHECK(t.fired == std::vector<TimeNs>{3 * kMicrosecond});
    OrderNode late(1 * kMicrosecond);  // its deadline is already past when it joins
    sim.add_node(late, toy_mac(2));
    REQUIRE(sim.run_until(kNever, kSecond, 100).outcome == RunOutcome::kIdle);
    CHECK(late.log == std::vector<std::string>{"timer@10000"});
    CHECK(sim.now() == 10 * kMicrosecond);
}

TEST_CASE("run_until returns at once when the predicate already holds") {
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 5);
    SinkNode b;
    sim.connect(sim.add_node(a, toy_mac(1)), sim.add_node(b, toy_mac(2)), latency(1));
    const RunResult result = sim.run_until([] { return true; }, kSecond, 100);
    CHECK(result.outcome == RunOutcome::kDone);
    CHECK(result.events == 0);
    CHECK(a.sent() == 0);
    CHECK(sim.now() == 0);
}

TEST_CASE("run_until bounds stop runaway loops") {
    Simulator sim(1);

    SECTION("a timer that never clears hits the event limit") {
        StuckTimerNode stuck;
        sim.add_node(stuck, toy_mac(1));
        const RunResult result = sim.run_until(kNever, kTimeNever, 1000);
        CHECK(result.outcome == RunOutcome::kEventLimit);
        CHECK(result.events == 1000);
        CHECK(stuck.calls == 1000);
        CHECK(sim.now() == 0);
    }
    SECTION("two echo nodes ping-pong forever: virtual time runs out") {
        SinkNode a(true), b(true);
        const NodeId ia = sim.add_node(a, toy_mac(1));
        const NodeId ib = sim.add_node(b, toy_mac(2));
        sim.connect(ia, ib, latency(1 * kMicrosecond));
        sim.send(ia, toy_frame(toy_mac(2), toy_mac(1), 7));
        const RunResult result = sim.run_until(kNever, kMillisecond, kDefaultMaxEvents);
        CHECK(result.outcome == RunOutcome::kTimedOut);
        CHECK(result.events == 1000);  // one delivery every microsecond
        CHECK(sim.now() == kMillisecond);
        CHECK(a.received.size() + b.received.size() == 1000);
        CHECK(sim.in_flight() == 1);
    }
    SECTION("ping-pong without latency never advances time: the event limit stops it") {
        SinkNode a(true), b(true);
        const NodeId ia = sim.add_node(a, toy_mac(1));
        const NodeId ib = sim.add_node(b, toy_mac(2));
        sim.connect(ia, ib, latency(0));
        sim.send(ia, toy_frame(toy_mac(2), toy_mac(1), 7));
        const RunResult result = sim.run_until(kNever, kMillisecond, 5000);
        CHECK(result.outcome == RunOutcome::kEventLimit);
        CHECK(result.events == 5000);
        CHECK(sim.now() == 0);
    }
    SECTION("a periodic timer runs until max_time") {
        TimerNode t({0}, 10 * kMicrosecond);
        sim.add_node(t, toy_mac(1));
        const RunResult result = sim.run_until(kNever, kMillisecond, kDefaultMaxEvents);
        CHECK(result.outcome == RunOutcome::kTimedOut);
        CHECK(t.fired.size() == 101);  // 0, 10 us, ..., 1 ms
        CHECK(t.fired.back() == kMillisecond);
    }
    SECTION("a zero event budget handles nothing") {
        TimerNode t({0});
        sim.add_node(t, toy_mac(1));
        CHECK(sim.run_until(kNever, kSecond, 0).outcome == RunOutcome::kEventLimit);
        CHECK(t.fired.empty());
    }
}

TEST_CASE("run_for reaches its end time across idle stretches") {
    Simulator sim(1);
    CHECK(sim.run_until(kNever, kSecond, 10).outcome == RunOutcome::kIdle);
    CHECK(sim.now() == 0);
    const RunResult result = sim.run_for(kMillisecond, 10);
    CHECK(result.outcome == RunOutcome::kDone);
    CHECK(sim.now() == kMillisecond);

    TimerNode t({0}, kMicrosecond);
    sim.add_node(t, toy_mac(1));
    CHECK(sim.run_for(kMillisecond, 10).outcome == RunOutcome::kEventLimit);
}

TEST_CASE("run outcomes print by name") {
    CHECK(std::string(to_string(RunOutcome::kEventLimit)) == "event limit");
    std::ostringstream os;
    os << RunOutcome::kTimedOut;
    CHECK(os.str() == "timed out");
}
