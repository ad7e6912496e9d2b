#include <catch2/catch.hpp>
#include <limits>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

struct Fixture {
    static constexpr uint64_t kIova = 0x7000'0000'0000;
    static constexpr uint64_t kLength = 3 * kPageSize + 123;

    MemoryTable table{small_config()};
    PageBuffer buf{5};
    uint32_t key = 0;

    explicit Fixture(AccessFlags access = kAllRights) {
        const RegResult r = table.register_mr(kPd, buf.data() + 17, kLength, kIova, access);
        REQUIRE(r.ok());
        key = r.keys.rkey;
    }
    AccessError remote(uint64_t va, uint64_t length, AccessFlags required = kAccessRemoteRead) {
        return table.check_access(key, kPd, va, length, required, true);
    }
};

}  // namespace

TEST_CASE("check_access reports every error kind and counts it", "[check]") {
    Fixture f(kAccessLocalWrite | kAccessRemoteRead);
    const uint64_t iova = Fixture::kIova;
    CHECK(f.remote(iova, 8) == AccessError::None);
    CHECK(f.table.check_access(f.key + 1, kPd, iova, 8, kAccessRemoteRead, true) == AccessError::InvalidKey);
    CHECK(f.table.check_access(make_key(200, 1), kPd, iova, 8, kAccessRemoteRead, true) == AccessError::InvalidKey);
    CHECK(f.table.check_access(0, kPd, iova, 8, kAccessRemoteRead, true) == AccessError::InvalidKey);
    CHECK(f.table.check_access(f.key, kPd + 1, iova, 8, kAccessRemoteRead, true) == AccessError::PdMismatch);
    CHECK(f.remote(iova, 8, kAccessRemoteWrite) == AccessError::AccessDenied);
    CHECK(f.remote(iova, 8, kAccessRemoteAtomic) == AccessError::AccessDenied);
    CHECK(f.remote(iova - 1, 8) == AccessError::OutOfBounds);

    const MemoryCounters& c = f.table.raw_counters();
    CHECK(c.remote_access_errors[static_cast<std::size_t>(AccessError::InvalidKey)] == 3);
    CHECK(c.remote_access_errors[static_cast<std::size_t>(AccessError::PdMismatch)] == 1);
    CHECK(c.remote_access_errors[static_cast<std::size_t>(AccessError::AccessDenied)] == 2);
    CHECK(c.remote_access_errors[static_cast<std::size_t>(AccessError::OutOfBounds)] == 1);
    CHECK(c.remote_access_errors[static_cast<std::size_t>(AccessError::None)] == 0);
    for (const uint64_t n : c.local_access_errors) CHECK(n == 0);

    CHECK(f.table.check_access(f.key, kPd + 1, iova, 8, 0, false) == AccessError::PdMismatch);
    CHECK(c.local_access_errors[static_cast<std::size_t>(AccessError::PdMismatch)] == 1);
}

TEST_CASE("the key check comes before PD, rights and bounds", "[check]") {
    Fixture f(kAccessLocalWrite);
    // Everything is wrong; the first failing check wins.
    CHECK(f.table.check_access(f.key ^ 0x80u, kPd + 1, 0, 8, kAccessRemoteWrite, true) == AccessError::InvalidKey);
    CHECK(f.table.check_access(f.key, kPd + 1, 0, 8, kAccessRemoteWrite, true) == AccessError::PdMismatch);
    CHECK(f.table.check_access(f.key, kPd, 0, 8, kAccessRemoteWrite, true) == AccessError::AccessDenied);
    CHECK(f.table.check_access(f.key, kPd, 0, 8, kAccessLocalWrite, false) == AccessError::OutOfBounds);
}

TEST_CASE("local keys need LOCAL_WRITE only when the NIC writes", "[check]") {
    Fixture ro(kAccessRemoteRead);  // no local write
    CHECK(ro.table.check_access(ro.key, kPd, Fixture::kIova, 64, 0, false) == AccessError::None);
    CHECK(ro.table.check_access(ro.key, kPd, Fixture::kIova, 64, kAccessLocalWrite, false) ==
          AccessError::AccessDenied);

    Fixture rw(kAccessLocalWrite);
    CHECK(rw.table.check_access(rw.key, kPd, Fixture::kIova, 64, kAccessLocalWrite, false) == AccessError::None);
    CHECK(rw.table.check_access(rw.key, kPd, Fixture::kIova, 64, kAccessRemoteRead, true) == AccessError::AccessDenied);
}

TEST_CASE("bounds are exact at both edges", "[check][bounds]") {
    Fixture f;
    const uint64_t iova = Fixture::kIova;
    const uint64_t len = Fixture::kLength;
    CHECK(f.remote(iova, len) == AccessError::None);
    CHECK(f.remote(iova, len + 1) == AccessError::OutOfBounds);
    CHECK(f.remote(iova + len - 1, 1) == AccessError::None);
    CHECK(f.remote(iova + len, 1) == AccessError::OutOfBounds);
    CHECK(f.remote(iova + 1, len - 1) == AccessError::None);
    CHECK(f.remote(iova + 1, len) == AccessError::OutOfBounds);
    CHECK(f.remote(iova - 1, 1) == AccessError::OutOfBounds);
    CHECK(f.remote(0, 1) == AccessError::OutOfBounds);
}

TEST_CASE("bounds arithmetic does not wrap", "[check][bounds]") {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    Fixture f;
    const uint64_t iova = Fixture::kIova;
    // va + length wraps to a small number that a naive end check would accept.
    CHECK(f.remote(iova + 8, max) == AccessError::OutOfBounds);
    CHECK(f.remote(iova + 8, max - 7) == AccessError::OutOfBounds);
    CHECK(f.remote(iova, max) == AccessError::OutOfBounds);
    CHECK(f.remote(max, 2) == AccessError::OutOfBounds);

    SECTION("a region ending exactly at 2^64") {
        MemoryTable table(small_config());
        PageBuffer buf(1);
        const uint64_t top = max - kPageSize + 1;
        const RegResult r = table.register_mr(kPd, buf.data(), kPageSize, top, kAllRights);
        REQUIRE(r.ok());
        CHECK(table.check_access(r.keys.rkey, kPd, top, kPageSize, kAccessRemoteRead, true) == AccessError::None);
        CHECK(table.check_access(r.keys.rkey, kPd, max, 1, kAccessRemoteRead, true) == AccessError::None);
        CHECK(table.check_access(r.keys.rkey, kPd, max, 2, kAccessRemoteRead, true) == AccessError::OutOfBounds);
        CHECK(table.check_access(r.keys.rkey, kPd, top - 1, 2, kAccessRemoteRead, true) == AccessError::OutOfBounds);
        uint8_t last = 0;
        buf.data()[kPageSize - 1] = 0x5A;
        CHECK(table.copy_out(r.keys.rkey, kPd, max, {&last, 1}, true) == AccessError::None);
        CHECK(last == 0x5A);
    }
}

TEST_CASE("zero-length accesses skip the key check (IBA C9-88)", "[check]") {
    Fixture f(kAccessLocalWrite);
    CHECK(f.table.check_access(0xDEADBEEF, 0, 0, 0, kAccessRemoteWrite, true) == AccessError::None);
    CHECK(f.table.check_access(f.key, kPd + 1, ~uint64_t{0}, 0, kAccessRemoteAtomic, true) == AccessError::None);
    CHECK(f.table.copy_in(0xDEADBEEF, 0, 0, {}, true) == AccessError::None);
    CHECK(f.table.copy_out(0xDEADBEEF, 0, 0, {}, false) == AccessError::None);
    for (const uint64_t n : f.table.raw_counters().remote_access_errors) CHECK(n == 0);
}
