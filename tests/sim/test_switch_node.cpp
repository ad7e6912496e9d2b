// The output-queued switch node: hosts reach each other through it (uplinks), its egress port
// serializes at its rate in FIFO order, drops at its buffer limit and marks CE RED-style on
// dequeue or enqueue.
#include <catch2/catch.hpp>

#include "rnic/sim/simulator.hpp"
#include "rnic/sim/switch_node.hpp"
#include "test_nodes.hpp"

using namespace rnic::sim;
using namespace rnic::sim::test;

namespace {

const auto kNever = [] { return false; };
const MacAddr kSwitchMac{0x02, 0, 0, 0, 0, 0xfe};

// An IPv4 frame of `size` bytes whose ECN field is `ecn` (2 = ECT(0)).
std::vector<uint8_t> ip_frame(const MacAddr& dst, const MacAddr& src, size_t size, uint8_t ecn = 2) {
    std::vector<uint8_t> f(size, 0);
    std::copy(dst.begin(), dst.end(), f.begin());
    std::copy(src.begin(), src.end(), f.begin() + 6);
    f[12] = 0x08;
    f[14] = 0x45;
    f[15] = ecn;
    f[22] = 64;
    f[23] = 17;
    return f;
}

bool is_ce(const std::vector<uint8_t>& frame) {
    return (frame[15] & 3) == 3;
}

// Hosts 1 and 2 send to host 3, each over its own cable into the switch.
struct Star {
    Simulator sim{5};
    SwitchNode sw{11};
    SinkNode h1, h2, h3;
    NodeId is = sim.add_node(sw, kSwitchMac);
    NodeId i1 = sim.add_node(h1, toy_mac(1));
    NodeId i2 = sim.add_node(h2, toy_mac(2));
    NodeId i3 = sim.add_node(h3, toy_mac(3));

    explicit Star(EgressPortConfig to_h3) {
        LinkConfig cable;
        cable.latency_ns = 1 * kMicrosecond;
        for (NodeId h : {i1, i2, i3}) {
            sim.connect(h, is, cable);
            sim.set_uplink(h, is);
        }
        EgressPortConfig fast;
        fast.rate_bps = 100'000'000'000;
        sw.add_port(toy_mac(1), fast);
        sw.add_port(toy_mac(2), fast);
        sw.add_port(toy_mac(3), to_h3);
    }
    void run() { REQUIRE(sim.run_until(kNever, kSecond, 100'000).outcome == RunOutcome::kIdle); }
};

EgressPortConfig gigabit() {
    EgressPortConfig c;
    c.rate_bps = 1'000'000'000;  // 1000 B = 8 us
    return c;
}

}  // namespace

TEST_CASE("hosts reach each other through the switch and its egress port serializes in arrival order") {
    Star net(gigabit());
    for (uint64_t i = 0; i < 3; ++i) {
        net.sim.send(net.i1, toy_frame(toy_mac(3), toy_mac(1), i, 1000));
        net.sim.send(net.i2, toy_frame(toy_mac(3), toy_mac(2), 10 + i, 1000));
    }
    net.run();
    REQUIRE(net.h3.received.size() == 6);
    // Both cables deliver at 1 us; the port then clocks one frame per 8 us, in arrival order
    // (the simulator delivers in send order at equal times, so the hosts alternate), and the
    // cable to host 3 adds 1 us.
    const uint64_t order[] = {0, 10, 1, 11, 2, 12};
    for (size_t i = 0; i < 6; ++i) {
        CHECK(net.h3.received[i].seq == order[i]);
        CHECK(net.h3.received[i].time == 1 * kMicrosecond + (i + 1) * 8 * kMicrosecond + 1 * kMicrosecond);
    }
    const EgressPortCounters& c = net.sw.counters(toy_mac(3));
    CHECK(c.frames_out == 6);
    CHECK(c.bytes_out == 6000);
    CHECK(c.peak_queue_bytes == 6000);
    CHECK(net.sw.bytes_out_by_source(toy_mac(3)).at(toy_mac(1)) == 3000);
    CHECK(net.sw.bytes_out_by_source(toy_mac(3)).at(toy_mac(2)) == 3000);
    CHECK(net.sw.queue_bytes(toy_mac(3)) == 0);
    CHECK(net.sim.counters().unroutable == 0);
}

TEST_CASE("the egress port drops the tail beyond its buffer") {
    EgressPortConfig c = gigabit();
    c.buffer_bytes = 3500;
    Star net(c);
    for (uint64_t i = 0; i < 5; ++i) net.sim.send(net.i1, toy_frame(toy_mac(3), toy_mac(1), i, 1000));
    net.run();
    REQUIRE(net.h3.received.size() == 3);
    CHECK(net.h3.received[2].seq == 2);
    CHECK(net.sw.counters(toy_mac(3)).dropped == 2);
    CHECK(net.sw.counters(toy_mac(3)).peak_queue_bytes == 3000);
}

TEST_CASE("RED marks on dequeue from the bytes behind a frame and on enqueue from the bytes ahead") {
    // pmax 1 and kmax = kmin + 1: a frame is marked exactly when more than kmin bytes count.
    EgressPortConfig c = gigabit();
    c.kmin_bytes = 3000;
    c.kmax_bytes = 3001;
    c.pmax = 1;
    SECTION("dequeue: the first frames leave ahead of a long queue") {
        c.mark_point = EcnMarkPoint::kDequeue;
        Star net(c);
        for (int i = 0; i < 6; ++i) net.sim.send(net.i1, ip_frame(toy_mac(3), toy_mac(1), 1000));
        net.run();
        REQUIRE(net.h3.received.size() == 6);
        // Frame 0 starts alone (nothing behind yet: the others arrive at the same instant but
        // after it); frame 1 leaves 4000 B behind, frame 2 3000 B (not more than kmin).
        const bool expected[] = {false, true, false, false, false, false};
        for (size_t i = 0; i < 6; ++i) CHECK(is_ce(net.h3.received[i].frame) == expected[i]);
        CHECK(net.sw.counters(toy_mac(3)).ce_marked == 1);
    }
    SECTION("enqueue: the last frames arrive behind a long queue") {
        c.mark_point = EcnMarkPoint::kEnqueue;
        Star net(c);
        for (int i = 0; i < 6; ++i) net.sim.send(net.i1, ip_frame(toy_mac(3), toy_mac(1), 1000));
        net.run();
        REQUIRE(net.h3.received.size() == 6);
        const bool expected[] = {false, false, false, false, true, true};
        for (size_t i = 0; i < 6; ++i) CHECK(is_ce(net.h3.received[i].frame) == expected[i]);
        CHECK(net.sw.counters(toy_mac(3)).ce_marked == 2);
    }
    SECTION("frames that are not ECN-capable are counted, not marked") {
        c.mark_point = EcnMarkPoint::kEnqueue;
        Star net(c);
        for (int i = 0; i < 6; ++i) net.sim.send(net.i1, ip_frame(toy_mac(3), toy_mac(1), 1000, 0));
        net.run();
        for (const auto& a : net.h3.received) CHECK_FALSE(is_ce(a.frame));
        CHECK(net.sw.counters(toy_mac(3)).ce_marked == 0);
        CHECK(net.sw.counters(toy_mac(3)).not_ect == 2);
    }
}

TEST_CASE("RED's probabilistic marks replay from the switch's seed") {
    EgressPortConfig c = gigabit();
    c.kmin_bytes = 1000;
    c.kmax_bytes = 50'000;
    c.pmax = 0.5;
    auto marks = [&] {
        Star net(c);
        for (int i = 0; i < 60; ++i) net.sim.send(net.i1 + static_cast<NodeId>(i % 2),
                                                 ip_frame(toy_mac(3), toy_mac(static_cast<uint8_t>(1 + i % 2)), 1000));
        net.run();
        std::vector<bool> v;
        for (const auto& a : net.h3.received) v.push_back(is_ce(a.frame));
        return v;
    };
    const auto first = marks();
    REQUIRE(first.size() == 60);
    CHECK(first == marks());
    const auto marked = std::count(first.begin(), first.end(), true);
    CHECK(marked > 0);
    CHECK(marked < 60);
}

TEST_CASE("switch set-up mistakes and unknown destinations") {
    SwitchNode sw(1);
    EgressPortConfig c;
    sw.add_port(toy_mac(1), c);
    CHECK_THROWS_AS(sw.add_port(toy_mac(1), c), std::invalid_argument);
    c.rate_bps = 0;
    CHECK_THROWS_AS(sw.add_port(toy_mac(2), c), std::invalid_argument);
    c.rate_bps = 1000;
    c.kmin_bytes = 10;
    c.kmax_bytes = 10;
    CHECK_THROWS_AS(sw.add_port(toy_mac(2), c), std::invalid_argument);
    CHECK_THROWS_AS(sw.counters(toy_mac(9)), std::out_of_range);
    sw.receive(toy_frame(toy_mac(9), toy_mac(1), 0), 0);
    sw.receive(toy_frame(kBroadcastMac, toy_mac(1), 0), 0);
    CHECK(sw.unknown_destination() == 2);
    Simulator sim(1);
    SinkNode a, b;
    const NodeId ia = sim.add_node(a, toy_mac(1));
    const NodeId ib = sim.add_node(b, toy_mac(2));
    CHECK_THROWS_AS(sim.set_uplink(ia, ib), std::out_of_range);  // not connected
}
