#include <catch2/catch.hpp>
#include <cstring>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

struct Fixture {
    static constexpr uint64_t kIova = 0x5000'0000;
    MemoryTable table{small_config()};
    PageBuffer buf{2};
    uint32_t rkey = 0;

    explicit Fixture(AccessFlags access = kAllRights, std::size_t host_offset = 0) {
        const RegResult r =
            table.register_mr(kPd, buf.data() + host_offset, 2 * kPageSize - host_offset, kIova, access);
        REQUIRE(r.ok());
        rkey = r.keys.rkey;
    }
    uint64_t word(std::size_t host_offset) const {
        uint64_t v = 0;
        std::memcpy(&v, buf.data() + host_offset, sizeof v);
        return v;
    }
    void set_word(std::size_t host_offset, uint64_t v) { std::memcpy(buf.data() + host_offset, &v, sizeof v); }
};

}  // namespace

TEST_CASE("compare-and-swap returns the original value either way", "[atomic]") {
    Fixture f;
    f.set_word(4088, 41);  // the last word of the first page
    AtomicResult r = f.table.compare_and_swap(f.rkey, kPd, Fixture::kIova + 4088, 41, 99);
    CHECK(r.error == AccessError::None);
    CHECK(r.original == 41);
    CHECK(f.word(4088) == 99);

    r = f.table.compare_and_swap(f.rkey, kPd, Fixture::kIova + 4088, 41, 7);
    CHECK(r.error == AccessError::None);
    CHECK(r.original == 99);
    CHECK(f.word(4088) == 99);
    CHECK(f.word(4096) == 0);  // the neighbour is untouched
}

TEST_CASE("fetch-and-add returns the original value and wraps modulo 2^64", "[atomic]") {
    Fixture f;
    f.set_word(4096, 1000);
    AtomicResult r = f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova + 4096, 24);
    CHECK(r.error == AccessError::None);
    CHECK(r.original == 1000);
    CHECK(f.word(4096) == 1024);

    f.set_word(8, ~uint64_t{0});
    r = f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova + 8, 2);
    CHECK(r.original == ~uint64_t{0});
    CHECK(f.word(8) == 1);
}

TEST_CASE("atomics check alignment, rights and bounds", "[atomic]") {
    SECTION("a misaligned VA is its own error, counted, memory untouched") {
        Fixture f;
        for (uint64_t off = 1; off < 8; ++off) {
            CHECK(f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova + off, 1).error == AccessError::Misaligned);
        }
        CHECK(f.table.compare_and_swap(f.rkey, kPd, Fixture::kIova + 4, 0, 1).error == AccessError::Misaligned);
        CHECK(f.table.raw_counters().remote_access_errors[static_cast<std::size_t>(AccessError::Misaligned)] == 8);
        CHECK(f.word(0) == 0);
        CHECK(f.word(8) == 0);
    }
    SECTION("an aligned VA over a host address that is not") {
        Fixture f(kAllRights, 4);  // iova is 8-aligned, the host address is 4 off
        CHECK(f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova, 1).error == AccessError::Misaligned);
        CHECK(f.word(4) == 0);
    }
    SECTION("without REMOTE_ATOMIC") {
        Fixture f(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
        CHECK(f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova, 1).error == AccessError::AccessDenied);
        CHECK(f.word(0) == 0);
    }
    SECTION("the last word and one past it") {
        Fixture f;
        CHECK(f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova + 2 * kPageSize - 8, 1).error == AccessError::None);
        CHECK(f.word(2 * kPageSize - 8) == 1);
        CHECK(f.table.fetch_and_add(f.rkey, kPd, Fixture::kIova + 2 * kPageSize, 1).error == AccessError::OutOfBounds);
    }
    SECTION("wrong key or PD") {
        Fixture f;
        CHECK(f.table.compare_and_swap(f.rkey ^ 0x10u, kPd, Fixture::kIova, 0, 1).error == AccessError::InvalidKey);
        CHECK(f.table.compare_and_swap(f.rkey, kPd + 1, Fixture::kIova, 0, 1).error == AccessError::PdMismatch);
        CHECK(f.word(0) == 0);
    }
}
