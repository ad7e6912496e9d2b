// The switch: forwarding by destination MAC, flooding group addresses, and set-up errors.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "rnic/sim/simulator.hpp"
#include "test_nodes.hpp"

using namespace rnic::sim;
using namespace rnic::sim::test;

namespace {

const auto kNever = [] { return false; };

struct ThreeNodes {
    Simulator sim{1};
    SinkNode a, b, c;
    NodeId ia = sim.add_node(a, toy_mac(1));
    NodeId ib = sim.add_node(b, toy_mac(2));
    NodeId ic = sim.add_node(c, toy_mac(3));
    std::vector<TraceEvent> unroutable;

    ThreeNodes() {
        sim.set_trace([this](const TraceEvent& e) {
            if (e.kind == TraceKind::kUnroutable) unroutable.push_back(e);
        });
    }
    void run() { REQUIRE(sim.run_until(kNever, kSecond, 1000).outcome == RunOutcome::kIdle); }
};

}  // namespace

TEST_CASE("a unicast frame goes only to the node with its destination MAC") {
    ThreeNodes net;
    net.sim.connect_all(LinkConfig{});
    net.sim.send(net.ia, toy_frame(toy_mac(3), toy_mac(1), 1));
    net.sim.send(net.ic, toy_frame(toy_mac(2), toy_mac(3), 2));
    net.run();
    CHECK(net.a.received.empty());
    REQUIRE(net.b.received.size() == 1);
    CHECK(net.b.received[0].seq == 2);
    REQUIRE(net.c.received.size() == 1);
    CHECK(net.c.received[0].seq == 1);
    CHECK(net.sim.link(net.ia, net.ib).counters().sent == 0);
    CHECK(net.sim.link(net.ia, net.ic).counters().sent == 1);
    CHECK(net.sim.link(net.ic, net.ib).counters().delivered == 1);
}

TEST_CASE("broadcast and multicast are flooded to every linked node but the sender") {
    ThreeNodes net;
    net.sim.connect_all(LinkConfig{});
    net.sim.send(net.ib, toy_frame(kBroadcastMac, toy_mac(2), 1));
    net.sim.send(net.ib, toy_frame(MacAddr{0x01, 0x00, 0x5e, 0, 0, 1}, toy_mac(2), 2));
    net.run();
    CHECK(net.a.received.size() == 2);
    CHECK(net.b.received.empty());
    CHECK(net.c.received.size() == 2);
    CHECK(net.sim.link(net.ib, net.ia).counters().sent == 2);
    CHECK(net.sim.link(net.ib, net.ic).counters().sent == 2);
}

TEST_CASE("frames to an unknown MAC or an unlinked node are unroutable") {
    ThreeNodes net;
    net.sim.connect(net.ia, net.ib, LinkConfig{});
    net.sim.send(net.ia, toy_frame(toy_mac(9), toy_mac(1), 1));  // nobody
    net.sim.send(net.ia, toy_frame(toy_mac(3), toy_mac(1), 2));  // c, but no a-c link
    net.sim.send(net.ia, toy_frame(toy_mac(1), toy_mac(1), 3));  // itself
    net.run();
    CHECK(net.sim.counters().unroutable == 3);
    CHECK(net.b.received.empty());
    CHECK(net.c.received.empty());
    CHECK(net.a.received.empty());
    REQUIRE(net.unroutable.size() == 3);
    CHECK(net.unroutable[0].from == net.ia);
    CHECK(net.unroutable[0].to == kNoNode);
}

TEST_CASE("a frame shorter than an Ethernet header is counted as a runt") {
    ThreeNodes net;
    net.sim.connect_all(LinkConfig{});
    const std::vector<uint8_t> runt(13, 0x02);
    net.sim.send(net.ia, runt);
    net.run();
    CHECK(net.sim.counters().runts == 1);
    CHECK(net.unroutable.size() == 1);
    CHECK(net.b.received.empty());
}

TEST_CASE("each direction has its own configuration") {
    ThreeNodes net;
    LinkConfig slow, fast;
    slow.latency_ns = 9 * kMicrosecond;
    fast.latency_ns = 1 * kMicrosecond;
    net.sim.connect(net.ia, net.ib, slow, fast);
    net.sim.send(net.ia, toy_frame(toy_mac(2), toy_mac(1), 1));
    net.sim.send(net.ib, toy_frame(toy_mac(1), toy_mac(2), 2));
    net.run();
    REQUIRE(net.a.received.size() == 1);
    REQUIRE(net.b.received.size() == 1);
    CHECK(net.a.received[0].time == 1 * kMicrosecond);
    CHECK(net.b.received[0].time == 9 * kMicrosecond);
}

TEST_CASE("set-up mistakes are refused") {
    Simulator sim(1);
    SinkNode a, b;
    const NodeId ia = sim.add_node(a, toy_mac(1));
    CHECK_THROWS_AS(sim.add_node(b, toy_mac(1)), std::invalid_argument);     // same MAC
    CHECK_THROWS_AS(sim.add_node(b, kBroadcastMac), std::invalid_argument);  // group MAC
    const NodeId ib = sim.add_node(b, toy_mac(2));
    CHECK_THROWS_AS(sim.connect(ia, ia, LinkConfig{}), std::invalid_argument);  // itself
    CHECK_THROWS_AS(sim.connect(ia, 7, LinkConfig{}), std::invalid_argument);   // no node 7
    CHECK_THROWS_AS(sim.link(ia, ib), std::out_of_range);
    sim.connect(ia, ib, LinkConfig{});
    CHECK_THROWS_AS(sim.connect(ib, ia, LinkConfig{}), std::invalid_argument);  // twice
    CHECK_THROWS_AS(sim.send(9, toy_frame(toy_mac(2), toy_mac(1), 0)), std::invalid_argument);
    CHECK(sim.link(ib, ia).from() == ib);
}

TEST_CASE("MACs print in the usual notation") {
    CHECK(to_string(MacAddr{0x02, 0, 0xab, 0, 0, 0x0f}) == "02:00:ab:00:00:0f");
    CHECK(destination_mac(toy_frame(toy_mac(7), toy_mac(1), 0)) == toy_mac(7));
    CHECK_FALSE(destination_mac(std::vector<uint8_t>(13, 0)).has_value());
    CHECK(is_group_address(kBroadcastMac));
    CHECK_FALSE(is_group_address(toy_mac(1)));
}
