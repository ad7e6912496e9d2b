#include <catch2/catch.hpp>
#include <cerrno>
#include <limits>
#include <set>
#include <stdexcept>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {
void* fake_address(uintptr_t a) {
    return reinterpret_cast<void*>(a);
}
}  // namespace

TEST_CASE("registration fills the MPT entry and returns equal lkey and rkey", "[registration]") {
    MemoryTable table(small_config());
    PageBuffer buf(3);
    const RegResult r = table.register_mr(kPd, buf.data() + 100, 5000, 0x10000, kAllRights | kAccessRelaxedOrdering);
    REQUIRE(r.ok());
    CHECK(r.keys.lkey == r.keys.rkey);
    CHECK(key_index(r.keys.lkey) != 0);

    const std::optional<MptEntry> e = table.query(r.keys.lkey);
    REQUIRE(e.has_value());
    CHECK(e->pd == kPd);
    CHECK(e->iova == 0x10000);
    CHECK(e->length == 5000);
    CHECK(e->access == kAllRights);  // the optional hint is dropped
    CHECK(e->host_address == reinterpret_cast<uintptr_t>(buf.data() + 100));
    CHECK(e->first_page_offset == 100);
    CHECK(e->mtt_pages == 2);  // bytes 100..5099 of the buffer: pages 0 and 1
    CHECK(e->state == MrState::Valid);
    CHECK(table.mr_count() == 1);
}

TEST_CASE("registration errors carry ibv_reg_mr's errno values", "[registration]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    const uint64_t max = std::numeric_limits<uint64_t>::max();

    CHECK(table.register_mr(kPd, buf.data(), 64, 0, kAccessRemoteWrite).error == EINVAL);
    CHECK(table.register_mr(kPd, buf.data(), 64, 0, kAccessRemoteAtomic).error == EINVAL);
    CHECK(table.register_mr(kPd, buf.data(), 64, 0, 1u << 12).error == EINVAL);
    CHECK(table.register_mr(kPd, buf.data(), 64, 0, kAccessOnDemand).error == EOPNOTSUPP);
    CHECK(table.register_mr(kPd, buf.data(), 0, 0, kAccessLocalWrite).error == EINVAL);
    CHECK(table.register_mr(kPd, nullptr, 64, 0, kAccessLocalWrite).error == EINVAL);

    SECTION("over max_mr_size") {
        const uint64_t limit = small_config().max_mr_size;
        CHECK(table.register_mr(kPd, fake_address(0x100000), limit + 1, 0, 0).error == EINVAL);
        CHECK(table.register_mr(kPd, fake_address(0x100000), limit, 0, 0).ok());
    }
    SECTION("iova range wrapping past 2^64") {
        CHECK(table.register_mr(kPd, buf.data(), 2, max, 0).error == EINVAL);
        CHECK(table.register_mr(kPd, buf.data(), 1, max, 0).ok());  // ends exactly at 2^64
        CHECK(table.register_mr(kPd, buf.data(), 4096, max - 4095, 0).ok());
    }
    SECTION("host range wrapping past the end of the address space") {
        const uintptr_t top = std::numeric_limits<uintptr_t>::max();
        CHECK(table.register_mr(kPd, fake_address(top - 9), 11, 0, 0).error == EINVAL);
        CHECK(table.register_mr(kPd, fake_address(top - 9), 10, 0, 0).ok());
    }
    CHECK(table.raw_counters().mr_reg_errors >= 6);
}

TEST_CASE("a full MPT is ENOMEM and a freed entry is reusable", "[registration]") {
    MemoryTable table(small_config());  // 8 MRs
    PageBuffer buf(1);
    std::vector<uint32_t> keys;
    for (int i = 0; i < 8; ++i) {
        const RegResult r = table.register_mr(kPd, buf.data(), 64, 0, kAccessLocalWrite);
        REQUIRE(r.ok());
        keys.push_back(r.keys.lkey);
    }
    CHECK(table.register_mr(kPd, buf.data(), 64, 0, kAccessLocalWrite).error == ENOMEM);
    std::set<uint32_t> indexes;
    for (const uint32_t k : keys) indexes.insert(key_index(k));
    CHECK(indexes.size() == 8);
    CHECK(indexes.count(0) == 0);  // key 0 is never handed out

    REQUIRE(table.deregister_mr(keys[3]) == 0);
    const RegResult again = table.register_mr(kPd, buf.data(), 64, 0, kAccessLocalWrite);
    REQUIRE(again.ok());
    CHECK(key_index(again.keys.lkey) == key_index(keys[3]));
}

TEST_CASE("a full MTT is ENOMEM and frees are merged back", "[registration]") {
    MemoryConfig config = small_config();
    config.max_mtt_entries = 64;
    MemoryTable table(config);
    const uintptr_t base = 0x40000000;
    const RegResult a = table.register_mr(kPd, fake_address(base), 40 * kPageSize, 0, 0);
    const RegResult b = table.register_mr(kPd, fake_address(base), 24 * kPageSize, 0, 0);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(table.register_mr(kPd, fake_address(base), 1, 0, 0).error == ENOMEM);
    // Only the MTT ran out: the MPT entry taken for the failed attempt was given back.
    CHECK(table.mr_count() == 2);

    REQUIRE(table.deregister_mr(a.keys.lkey) == 0);
    REQUIRE(table.deregister_mr(b.keys.lkey) == 0);
    CHECK(table.register_mr(kPd, fake_address(base), 64 * kPageSize, 0, 0).ok());
}

TEST_CASE("a stale key fails after deregistration and re-registration of its index", "[registration]") {
    MemoryConfig config = small_config();
    config.max_mrs = 1;  // force the same index every time
    MemoryTable table(config);
    PageBuffer buf(1);
    const RegResult first = table.register_mr(kPd, buf.data(), 64, 0x1000, kAllRights);
    REQUIRE(first.ok());
    REQUIRE(table.deregister_mr(first.keys.lkey) == 0);
    CHECK(table.check_access(first.keys.rkey, kPd, 0x1000, 8, kAccessRemoteRead, true) == AccessError::InvalidKey);

    const RegResult second = table.register_mr(kPd, buf.data(), 64, 0x1000, kAllRights);
    REQUIRE(second.ok());
    CHECK(key_index(second.keys.lkey) == key_index(first.keys.lkey));
    CHECK(key_variant(second.keys.lkey) != key_variant(first.keys.lkey));
    CHECK(table.check_access(first.keys.rkey, kPd, 0x1000, 8, kAccessRemoteRead, true) == AccessError::InvalidKey);
    CHECK(table.check_access(second.keys.rkey, kPd, 0x1000, 8, kAccessRemoteRead, true) == AccessError::None);
    CHECK(table.deregister_mr(first.keys.lkey) == EINVAL);
    CHECK(!table.query(first.keys.lkey).has_value());

    // The variant is 8 bits: the index's next 254 registrations all get new keys; only the
    // 256th registration of the index hands the first key out again.
    REQUIRE(table.deregister_mr(second.keys.lkey) == 0);
    for (int i = 0; i < 254; ++i) {
        const uint32_t k = table.register_mr(kPd, buf.data(), 64, 0x1000, kAllRights).keys.lkey;
        CHECK(k != first.keys.lkey);
        CHECK(k != second.keys.lkey);
        REQUIRE(table.deregister_mr(k) == 0);
    }
    CHECK(table.register_mr(kPd, buf.data(), 64, 0x1000, kAllRights).keys.lkey == first.keys.lkey);
}

TEST_CASE("deregistration errors", "[registration]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    CHECK(table.deregister_mr(0) == EINVAL);
    CHECK(table.deregister_mr(make_key(5, 1)) == EINVAL);
    CHECK(table.deregister_mr(0xFFFFFFFFu) == EINVAL);
    const RegResult r = table.register_mr(kPd, buf.data(), 64, 0, 0);
    REQUIRE(r.ok());
    CHECK(table.deregister_mr(r.keys.lkey ^ 1u) == EINVAL);  // right index, wrong variant
    CHECK(table.deregister_mr(r.keys.lkey) == 0);
    CHECK(table.deregister_mr(r.keys.lkey) == EINVAL);
    CHECK(table.mr_count() == 0);
    CHECK(table.raw_counters().mr_deregistrations == 1);
}

TEST_CASE("page-list registration is validated", "[registration]") {
    MemoryTable table(small_config());
    PageBuffer buf(3);
    const uintptr_t p0 = reinterpret_cast<uintptr_t>(buf.page(0));
    const uintptr_t p2 = reinterpret_cast<uintptr_t>(buf.page(2));
    const std::vector<uintptr_t> two = {p2, p0};

    CHECK(table.register_mr_pages(kPd, two, 100, kPageSize, 0, 0).ok());           // spans 2 pages
    CHECK(table.register_mr_pages(kPd, two, 0, kPageSize, 0, 0).error == EINVAL);  // spans 1
    CHECK(table.register_mr_pages(kPd, two, 100, 3 * kPageSize, 0, 0).error == EINVAL);
    CHECK(table.register_mr_pages(kPd, two, static_cast<uint32_t>(kPageSize), 10, 0, 0).error == EINVAL);
    const std::vector<uintptr_t> unaligned = {p0 + 8};
    CHECK(table.register_mr_pages(kPd, unaligned, 0, 16, 0, 0).error == EINVAL);
    const std::vector<uintptr_t> null_page = {0};
    CHECK(table.register_mr_pages(kPd, null_page, 0, 16, 0, 0).error == EINVAL);
}

TEST_CASE("impossible configurations are refused at construction", "[registration]") {
    MemoryConfig config;
    config.max_mrs = 0;
    CHECK_THROWS_AS(MemoryTable(config), std::invalid_argument);
    config.max_mrs = kMaxMptIndex + 1;
    CHECK_THROWS_AS(MemoryTable(config), std::invalid_argument);
    config = MemoryConfig{};
    config.max_mr_size = 0;
    CHECK_THROWS_AS(MemoryTable(config), std::invalid_argument);
    config = MemoryConfig{};
    config.mpt_cache = CacheConfig{10, 4, 0};
    CHECK_THROWS_AS(MemoryTable(config), std::invalid_argument);
}
