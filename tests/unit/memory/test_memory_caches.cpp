#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

constexpr uint64_t kMptCost = 100;
constexpr uint64_t kMttCost = 10;

MemoryConfig cached_config() {
    MemoryConfig config = small_config();
    config.mpt_cache = CacheConfig{4, 1, kMptCost};
    config.mtt_cache = CacheConfig{8, 2, kMttCost};
    return config;
}

std::map<std::string, uint64_t> counter_map(const MemoryTable& table) {
    std::map<std::string, uint64_t> m;
    for (const auto& [name, value] : table.counters()) m.emplace(std::string(name), value);
    return m;
}

}  // namespace

TEST_CASE("MPT lookups and MTT page walks go through their caches and charge misses", "[caches]") {
    MemoryTable table(cached_config());
    PageBuffer buf(3);
    const RegResult r = table.register_mr(kPd, buf.data(), 3 * kPageSize, 0x10000, kAllRights);
    REQUIRE(r.ok());
    CHECK(table.charged_ns() == 0);  // registration is not a data-path lookup

    CHECK(table.check_access(r.keys.rkey, kPd, 0x10000, 64, kAccessRemoteRead, true) == AccessError::None);
    CHECK(table.charged_ns() == kMptCost);
    CHECK(table.check_access(r.keys.rkey, kPd, 0x10000, 64, kAccessRemoteRead, true) == AccessError::None);
    CHECK(table.charged_ns() == kMptCost);  // MPT hit; check_access walks no pages

    std::vector<uint8_t> out(3 * kPageSize);
    REQUIRE(table.copy_out(r.keys.rkey, kPd, 0x10000, out, true) == AccessError::None);
    CHECK(table.charged_ns() == kMptCost + 3 * kMttCost);  // MPT hit, 3 MTT misses
    REQUIRE(table.copy_out(r.keys.rkey, kPd, 0x10000, out, true) == AccessError::None);
    CHECK(table.charged_ns() == kMptCost + 3 * kMttCost);

    // 100 bytes across the boundary between pages 1 and 2: two MTT hits.
    REQUIRE(table.copy_out(r.keys.rkey, kPd, 0x10000 + 2 * kPageSize - 50, {out.data(), 100}, true) ==
            AccessError::None);
    CHECK(table.mtt_cache().hits() == 5);
    CHECK(table.mtt_cache().misses() == 3);
    CHECK(table.mpt_cache().hits() == 4);
    CHECK(table.mpt_cache().misses() == 1);

    CHECK(table.take_charged_ns() == kMptCost + 3 * kMttCost);
    CHECK(table.charged_ns() == 0);
    CHECK(table.take_charged_ns() == 0);

    const auto counters = counter_map(table);
    CHECK(counters.at("mpt_cache_hits") == 4);
    CHECK(counters.at("mpt_cache_misses") == 1);
    CHECK(counters.at("mpt_cache_evictions") == 0);
    CHECK(counters.at("mtt_cache_hits") == 5);
    CHECK(counters.at("mtt_cache_misses") == 3);
    CHECK(counters.at("mtt_cache_evictions") == 0);
    CHECK(counters.at("mem_cache_miss_ns") == kMptCost + 3 * kMttCost);
    CHECK(counters.at("mr_in_use") == 1);
    CHECK(counters.at("mtt_entries_in_use") == 3);
}

TEST_CASE("charged time is exactly MPT misses * cost + MTT misses * cost", "[caches]") {
    MemoryTable table(cached_config());
    PageBuffer buf(16);
    std::vector<uint32_t> keys;
    for (int i = 0; i < 6; ++i) {
        const RegResult r = table.register_mr(kPd, buf.page(static_cast<std::size_t>(i) * 2), 2 * kPageSize + 8,
                                              0x100000 * (i + 1), kAllRights);
        REQUIRE(r.ok());
        keys.push_back(r.keys.rkey);
    }
    uint64_t taken = 0;
    uint64_t x = 99;
    std::vector<uint8_t> tmp(300);
    for (int i = 0; i < 2000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::size_t which = (x >> 40) % keys.size();
        const uint64_t offset = (x >> 20) % (2 * kPageSize + 8 - tmp.size());
        REQUIRE(table.copy_out(keys[which], kPd, 0x100000 * (which + 1) + offset, tmp, true) == AccessError::None);
        if (i % 7 == 0) taken += table.take_charged_ns();
    }
    taken += table.take_charged_ns();
    CHECK(table.mpt_cache().misses() > 6);  // 6 regions over 4 direct-mapped MPT lines
    CHECK(table.mpt_cache().evictions() > 0);
    CHECK(table.mtt_cache().evictions() > 0);
    CHECK(taken == table.mpt_cache().misses() * kMptCost + table.mtt_cache().misses() * kMttCost);
    CHECK(table.raw_counters().cache_miss_ns == taken);
}

TEST_CASE("deregistration drops the region's cache lines", "[caches]") {
    MemoryConfig config = cached_config();
    config.max_mrs = 1;  // the next region gets the same MPT index and MTT entries
    MemoryTable table(config);
    PageBuffer buf(2);
    const RegResult a = table.register_mr(kPd, buf.data(), 2 * kPageSize, 0x1000, kAllRights);
    REQUIRE(a.ok());
    std::vector<uint8_t> tmp(2 * kPageSize);
    REQUIRE(table.copy_out(a.keys.rkey, kPd, 0x1000, tmp, true) == AccessError::None);
    REQUIRE(table.copy_out(a.keys.rkey, kPd, 0x1000, tmp, true) == AccessError::None);
    CHECK(table.mpt_cache().misses() == 1);
    CHECK(table.mtt_cache().misses() == 2);

    REQUIRE(table.deregister_mr(a.keys.lkey) == 0);
    const RegResult b = table.register_mr(kPd, buf.data(), 2 * kPageSize, 0x1000, kAllRights);
    REQUIRE(b.ok());
    REQUIRE(key_index(b.keys.lkey) == key_index(a.keys.lkey));
    REQUIRE(table.copy_out(b.keys.rkey, kPd, 0x1000, tmp, true) == AccessError::None);
    CHECK(table.mpt_cache().misses() == 2);
    CHECK(table.mtt_cache().misses() == 4);
    CHECK(table.mpt_cache().evictions() == 0);
    CHECK(table.mtt_cache().evictions() == 0);
}

TEST_CASE("with the caches off nothing is counted or charged", "[caches]") {
    MemoryTable table(small_config());
    PageBuffer buf(2);
    const RegResult r = table.register_mr(kPd, buf.data(), 2 * kPageSize, 0, kAllRights);
    REQUIRE(r.ok());
    std::vector<uint8_t> tmp(2 * kPageSize);
    for (int i = 0; i < 10; ++i) REQUIRE(table.copy_in(r.keys.rkey, kPd, 0, tmp, true) == AccessError::None);
    CHECK(table.charged_ns() == 0);
    const auto counters = counter_map(table);
    CHECK(counters.at("mpt_cache_hits") == 0);
    CHECK(counters.at("mpt_cache_misses") == 0);
    CHECK(counters.at("mtt_cache_misses") == 0);
}

TEST_CASE("the counter list names every access error kind on both sides", "[caches]") {
    MemoryTable table(small_config());
    const auto counters = counter_map(table);
    for (const char* side : {"local_access_", "remote_access_"}) {
        for (const char* kind : {"invalid_key", "pd_mismatch", "denied", "out_of_bounds", "misaligned"}) {
            CHECK(counters.count(std::string(side) + kind) == 1);
        }
    }
    CHECK(counters.count("mr_registrations") == 1);
    CHECK(counters.size() == table.counters().size());  // no duplicate names
}
