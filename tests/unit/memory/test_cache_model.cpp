#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "rnic/memory/cache_model.hpp"

using namespace rnic::mem;

namespace {

// Runs `rounds` passes over `keys` and returns the summed cost.
uint64_t run(CacheModel& cache, const std::vector<uint64_t>& keys, int rounds) {
    uint64_t cost = 0;
    for (int r = 0; r < rounds; ++r) {
        for (const uint64_t k : keys) cost += cache.access_cost_ns(k);
    }
    return cost;
}

}  // namespace

TEST_CASE("8 entries, 2 ways: a cycle of 3 keys in one set always misses under LRU", "[cache]") {
    CacheModel cache({8, 2, 50});
    REQUIRE(cache.sets() == 4);
    const uint64_t cost = run(cache, {0, 4, 8}, 10);  // all map to set 0
    CHECK(cache.hits() == 0);
    CHECK(cache.misses() == 30);
    CHECK(cache.evictions() == 28);  // every miss after the first two fills
    CHECK(cost == 30 * 50);
}

TEST_CASE("8 entries, 2 ways: a working set that fits has only compulsory misses", "[cache]") {
    CacheModel cache({8, 2, 50});
    const uint64_t cost = run(cache, {0, 1, 2, 3, 4, 5, 6, 7}, 10);
    CHECK(cache.misses() == 8);
    CHECK(cache.hits() == 72);
    CHECK(cache.evictions() == 0);
    CHECK(cost == 8 * 50);
}

TEST_CASE("8 entries, 2 ways: 12 keys over 4 sets thrash every set", "[cache]") {
    CacheModel cache({8, 2, 1});
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 12; ++k) keys.push_back(k);
    run(cache, keys, 5);
    CHECK(cache.hits() == 0);
    CHECK(cache.misses() == 60);
    CHECK(cache.evictions() == 52);
}

TEST_CASE("the least recently used line is the victim, not the oldest fill", "[cache]") {
    CacheModel cache({8, 2, 0});
    const uint64_t a = 0, b = 4, c = 8;  // one set
    CHECK_FALSE(cache.access(a));
    CHECK_FALSE(cache.access(b));
    CHECK(cache.access(a));        // a is now more recent than b
    CHECK_FALSE(cache.access(c));  // evicts b (FIFO would evict a)
    CHECK(cache.access(a));
    CHECK_FALSE(cache.access(b));  // evicts c
    CHECK(cache.access(a));
    CHECK_FALSE(cache.access(c));  // evicts b
    CHECK(cache.hits() == 3);
    CHECK(cache.misses() == 5);
    CHECK(cache.evictions() == 3);
    CHECK_FALSE(cache.access(1));  // another set: a compulsory miss, no eviction
    CHECK(cache.evictions() == 3);
}

TEST_CASE("a fully associative cache holds exactly `entries` keys", "[cache]") {
    CacheModel cache({4, 4, 0});
    REQUIRE(cache.sets() == 1);
    run(cache, {10, 20, 30, 40}, 3);
    CHECK(cache.misses() == 4);
    CHECK(cache.hits() == 8);
    cache.invalidate_all();
    cache.reset_stats();
    run(cache, {10, 20, 30, 40, 50}, 3);
    CHECK(cache.hits() == 0);
    CHECK(cache.misses() == 15);
}

TEST_CASE("invalidation forces a miss without counting an eviction", "[cache]") {
    CacheModel cache({8, 2, 7});
    CHECK_FALSE(cache.access(5));
    CHECK(cache.access(5));
    cache.invalidate(5);
    cache.invalidate(99);  // absent: no effect
    CHECK_FALSE(cache.access(5));
    CHECK(cache.evictions() == 0);
    CHECK(cache.access(5));
    cache.invalidate_all();
    CHECK_FALSE(cache.access(5));
    CHECK(cache.misses() == 3);
    CHECK(cache.hits() == 2);
}

TEST_CASE("entries = 0 turns the model off: no counts, no cost", "[cache]") {
    CacheModel cache({0, 2, 1000});
    CHECK_FALSE(cache.enabled());
    for (uint64_t k = 0; k < 100; ++k) {
        CHECK(cache.access(k * 7919));
        CHECK(cache.access_cost_ns(k) == 0);
    }
    cache.invalidate(3);
    CHECK(cache.hits() == 0);
    CHECK(cache.misses() == 0);
    CHECK(cache.evictions() == 0);
    CHECK(CacheModel({0, 0, 5}).enabled() == false);  // ways are ignored when off
}

TEST_CASE("miss cost accumulates exactly misses * cost", "[cache]") {
    CacheModel cache({16, 4, 37});
    uint64_t cost = 0;
    uint64_t x = 12345;
    for (int i = 0; i < 5000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        cost += cache.access_cost_ns((x >> 33) % 40);
    }
    CHECK(cache.hits() + cache.misses() == 5000);
    CHECK(cache.misses() > 0);
    CHECK(cache.hits() > 0);
    CHECK(cost == cache.misses() * 37);
    CHECK(cache.evictions() == cache.misses() - 16);  // the 40 keys overflow all 4 sets
    cache.reset_stats();
    CHECK(cache.misses() == 0);
}

TEST_CASE("impossible geometries are refused", "[cache]") {
    CHECK_THROWS_AS(CacheModel({8, 0, 0}), std::invalid_argument);
    CHECK_THROWS_AS(CacheModel({10, 4, 0}), std::invalid_argument);
    CHECK_NOTHROW(CacheModel({12, 3, 0}));
}
