// One link on its own, and the random helpers: serialization delay, jitter, corruption.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <string>

#include "rnic/sim/link.hpp"
#include "rnic/sim/seed.hpp"
#include "rnic/sim/simulator.hpp"
#include "test_nodes.hpp"

using namespace rnic::sim;
using namespace rnic::sim::test;

TEST_CASE("bandwidth queues frames behind each other at the sender") {
    LinkConfig config;
    config.latency_ns = 2 * kMicrosecond;
    config.bandwidth_bps = 1'000'000'000;  // 1000-byte frames take 8 us each
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 10, 0, 0, 1000);
    SinkNode b;
    sim.connect(sim.add_node(a, toy_mac(1)), sim.add_node(b, toy_mac(2)), config);
    REQUIRE(sim.run_until([] { return false; }, kSecond, kDefaultMaxEvents).outcome == RunOutcome::kIdle);
    REQUIRE(b.received.size() == 10);
    for (uint64_t i = 0; i < 10; ++i) {
        CHECK(b.received[i].seq == i);
        CHECK(b.received[i].time == (i + 1) * 8 * kMicrosecond + 2 * kMicrosecond);
    }
}

TEST_CASE("frames spaced wider than their serialization time do not queue") {
    LinkConfig config;
    config.latency_ns = 0;
    config.bandwidth_bps = 1'000'000'000;
    Simulator sim(1);
    SenderNode a(toy_mac(1), toy_mac(2), 5, 0, 20 * kMicrosecond, 1000);
    SinkNode b;
    sim.connect(sim.add_node(a, toy_mac(1)), sim.add_node(b, toy_mac(2)), config);
    sim.run_until([] { return false; }, kSecond, kDefaultMaxEvents);
    REQUIRE(b.received.size() == 5);
    for (uint64_t i = 0; i < 5; ++i) CHECK(b.received[i].time == i * 20 * kMicrosecond + 8 * kMicrosecond);
}

TEST_CASE("serialization delay rounds up to the last bit") {
    LinkConfig config;
    config.latency_ns = 0;
    config.bandwidth_bps = 3;
    Link link(0, 1, config);
    Random rng(1);
    const std::vector<uint8_t> frame(1, 0);
    const LinkFate fate = link.offer(frame, 0, rng);
    REQUIRE(fate.arrivals.size() == 1);
    CHECK(fate.arrivals[0].time == 2'666'666'667);  // 8 bits at 3 b/s
}

TEST_CASE("jitter varies the latency but never reorders") {
    const uint64_t seed = seed_from_env(11);
    INFO(seed_info(seed));
    LinkConfig config;
    config.latency_ns = 10 * kMicrosecond;
    config.jitter_ns = 5 * kMicrosecond;
    Link link(0, 1, config);
    Random rng(seed);
    const std::vector<uint8_t> frame(64, 0);
    std::set<TimeNs> delays;
    TimeNs previous = 0;
    for (TimeNs sent = 0; sent < 1000 * kMicrosecond; sent += 1 * kMicrosecond) {
        const LinkFate fate = link.offer(frame, sent, rng);
        REQUIRE(fate.arrivals.size() == 1);
        const TimeNs arrival = fate.arrivals[0].time;
        CHECK(arrival >= previous);
        CHECK(arrival >= sent + 10 * kMicrosecond);
        // Above latency + jitter only when held behind a slower frame sent before it.
        CHECK(arrival <= std::max(sent + 15 * kMicrosecond, previous));
        delays.insert(arrival - sent);
        previous = arrival;
    }
    CHECK(delays.size() > 100);
}

TEST_CASE("corruption flips exactly one bit, anywhere in the frame") {
    const uint64_t seed = seed_from_env(12);
    INFO(seed_info(seed));
    LinkConfig config;
    config.corrupt_probability = 1;
    Link link(0, 1, config);
    Random rng(seed);
    const std::vector<uint8_t> frame = toy_frame(toy_mac(2), toy_mac(1), 0x1234, 32);
    std::set<size_t> bits_hit;
    for (int i = 0; i < 5000; ++i) {
        const LinkFate fate = link.offer(frame, 0, rng);
        REQUIRE(fate.arrivals.size() == 1);
        const std::vector<uint8_t>& got = fate.arrivals[0].frame;
        CHECK(fate.arrivals[0].corrupted);
        REQUIRE(got.size() == frame.size());
        int flipped = 0;
        for (size_t j = 0; j < got.size(); ++j) {
            const unsigned diff = got[j] ^ frame[j];
            flipped += std::popcount(diff);
            if (diff != 0) bits_hit.insert(j * 8 + static_cast<size_t>(std::countr_zero(diff)));
        }
        CHECK(flipped == 1);
    }
    CHECK(link.counters().corrupted == 5000);
    CHECK(bits_hit.size() == frame.size() * 8);  // 5000 draws over 256 bits reach every one
}

TEST_CASE("a duplicate of a corrupted frame carries the same damage") {
    LinkConfig config;
    config.corrupt_probability = 1;
    config.duplicate_probability = 1;
    Link link(0, 1, config);
    Random rng(3);
    const LinkFate fate = link.offer(toy_frame(toy_mac(2), toy_mac(1), 1), 0, rng);
    REQUIRE(fate.arrivals.size() == 2);
    CHECK(fate.arrivals[1].duplicate);
    CHECK(fate.arrivals[0].frame == fate.arrivals[1].frame);
    CHECK(link.counters().corrupted == 1);
    CHECK(link.counters().duplicated == 1);
}

TEST_CASE("random helpers") {
    Random rng(99);
    SECTION("uniform stays in range and reaches both ends") {
        bool lo = false, hi = false;
        for (int i = 0; i < 2000; ++i) {
            const uint64_t x = rng.uniform(5, 9);
            CHECK(x >= 5);
            CHECK(x <= 9);
            lo = lo || x == 5;
            hi = hi || x == 9;
        }
        CHECK(lo);
        CHECK(hi);
        CHECK(rng.uniform(7, 7) == 7);
        CHECK(rng.uniform(8, 3) == 8);
        rng.uniform(0, ~uint64_t{0});
    }
    SECTION("chance(0) draws nothing, so a fault-free link leaves the stream alone") {
        Random other(99);
        CHECK_FALSE(rng.chance(0));
        CHECK_FALSE(rng.chance(-1));
        CHECK(rng.next_u64() == other.next_u64());
    }
    SECTION("chance(1) is always true") {
        for (int i = 0; i < 1000; ++i) CHECK(rng.chance(1));
    }
    SECTION("next_unit is in [0, 1)") {
        for (int i = 0; i < 1000; ++i) {
            const double u = rng.next_unit();
            CHECK(u >= 0);
            CHECK(u < 1);
        }
    }
    SECTION("the stream is mt19937_64's, fixed by the standard") {
        Random standard(5489);  // std::mt19937_64's default seed
        for (int i = 0; i < 9999; ++i) standard.next_u64();
        CHECK(standard.next_u64() == 9981545732273789042ull);  // [rand.predef]
    }
}

TEST_CASE("seed_from_env reads RNIC_SIM_SEED") {
    const char* saved = std::getenv("RNIC_SIM_SEED");
    const std::string previous = saved ? saved : "";
    unsetenv("RNIC_SIM_SEED");
    CHECK(seed_from_env(17) == 17);
    setenv("RNIC_SIM_SEED", "123", 1);
    CHECK(seed_from_env(17) == 123);
    setenv("RNIC_SIM_SEED", "0x10", 1);
    CHECK(seed_from_env(17) == 16);
    setenv("RNIC_SIM_SEED", "12junk", 1);
    CHECK(seed_from_env(17) == 17);
    if (saved)
        setenv("RNIC_SIM_SEED", previous.c_str(), 1);
    else
        unsetenv("RNIC_SIM_SEED");
}
