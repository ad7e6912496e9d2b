#include <catch2/catch.hpp>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = pattern_byte(i, seed);
    return v;
}

}  // namespace

TEST_CASE("copy_in and copy_out cross pages from an unaligned start", "[copy]") {
    MemoryTable table(small_config());
    PageBuffer buf(5);
    constexpr std::size_t kHostOffset = 1000;
    constexpr uint64_t kIova = 0x12345;  // page offset 0x345, unlike the host's 1000
    constexpr uint64_t kLength = 3 * kPageSize + 500;
    const RegResult r = table.register_mr(kPd, buf.data() + kHostOffset, kLength, kIova, kAllRights);
    REQUIRE(r.ok());

    constexpr std::size_t kAt = 3000;  // region offset; host offset 4000: 96 bytes before a page end
    const std::vector<uint8_t> src = pattern(9000, 3);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, kIova + kAt, src, true) == AccessError::None);

    for (std::size_t i = 0; i < buf.size(); ++i) {
        const bool inside = i >= kHostOffset + kAt && i < kHostOffset + kAt + src.size();
        const uint8_t expected = inside ? src[i - kHostOffset - kAt] : 0;
        if (buf.data()[i] != expected)
            FAIL("byte " << i << " is " << int(buf.data()[i]) << ", expected " << int(expected));
    }

    std::vector<uint8_t> back(src.size());
    REQUIRE(table.copy_out(r.keys.lkey, kPd, kIova + kAt, back, false) == AccessError::None);
    CHECK(back == src);

    // One byte at a time across the page boundary at region offset 3096 (host offset 4096).
    for (uint64_t at = 3090; at < 3102; ++at) {
        uint8_t one = 0;
        REQUIRE(table.copy_out(r.keys.rkey, kPd, kIova + at, {&one, 1}, true) == AccessError::None);
        CHECK(one == src[at - kAt]);
    }
}

TEST_CASE("translation walks the MTT: scattered pages receive the right bytes", "[copy]") {
    MemoryTable table(small_config());
    PageBuffer buf(8);
    const std::vector<std::size_t> order = {6, 1, 4, 3};  // region page i lives in buffer page order[i]
    std::vector<uintptr_t> pages;
    for (const std::size_t p : order) pages.push_back(reinterpret_cast<uintptr_t>(buf.page(p)));
    constexpr uint32_t kFirstOffset = 300;
    constexpr uint64_t kLength = 3 * kPageSize + 10;  // 300 + 12298 bytes: 4 pages
    constexpr uint64_t kIova = 0x9000'0000;
    const RegResult r = table.register_mr_pages(kPd, pages, kFirstOffset, kLength, kIova, kAllRights);
    REQUIRE(r.ok());

    const std::vector<uint8_t> src = pattern(kLength, 11);
    REQUIRE(table.copy_in(r.keys.lkey, kPd, kIova, src, false) == AccessError::None);

    std::vector<uint8_t> expected(buf.size(), 0);
    for (std::size_t i = 0; i < kLength; ++i) {
        const std::size_t position = kFirstOffset + i;
        expected[order[position / kPageSize] * kPageSize + position % kPageSize] = src[i];
    }
    for (std::size_t i = 0; i < buf.size(); ++i) {
        if (buf.data()[i] != expected[i]) FAIL("byte " << i << " of the buffer is wrong");
    }

    std::vector<uint8_t> back(kLength - 5000);
    REQUIRE(table.copy_out(r.keys.rkey, kPd, kIova + 5000, back, true) == AccessError::None);
    CHECK(std::equal(back.begin(), back.end(), src.begin() + 5000));
}

TEST_CASE("copies need the rights of the direction and move nothing on error", "[copy]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    const std::vector<uint8_t> src = pattern(64, 5);
    std::vector<uint8_t> dst(64, 0xEE);

    SECTION("a region the NIC may not write") {
        const RegResult r = table.register_mr(kPd, buf.data(), 256, 0x1000, kAccessRemoteRead);
        REQUIRE(r.ok());
        CHECK(table.copy_in(r.keys.lkey, kPd, 0x1000, src, false) == AccessError::AccessDenied);
        CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000, src, true) == AccessError::AccessDenied);
        CHECK(table.copy_out(r.keys.rkey, kPd, 0x1000, dst, true) == AccessError::None);
        CHECK(table.copy_out(r.keys.lkey, kPd, 0x1000, dst, false) == AccessError::None);
    }
    SECTION("a region only the local consumer may touch") {
        const RegResult r = table.register_mr(kPd, buf.data(), 256, 0x1000, kAccessLocalWrite);
        REQUIRE(r.ok());
        CHECK(table.copy_in(r.keys.lkey, kPd, 0x1000, src, false) == AccessError::None);
        CHECK(table.copy_out(r.keys.rkey, kPd, 0x1000, dst, true) == AccessError::AccessDenied);
        CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000, src, true) == AccessError::AccessDenied);
        std::fill(buf.data(), buf.data() + 256, uint8_t{0});
        CHECK(dst == std::vector<uint8_t>(64, 0xEE));
    }
    SECTION("an access running past the end") {
        const RegResult r = table.register_mr(kPd, buf.data(), 100, 0x1000, kAllRights);
        REQUIRE(r.ok());
        CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000 + 40, src, true) == AccessError::OutOfBounds);
        CHECK(table.copy_out(r.keys.rkey, kPd, 0x1000 + 40, dst, true) == AccessError::OutOfBounds);
        CHECK(dst == std::vector<uint8_t>(64, 0xEE));
        CHECK(table.raw_counters().remote_access_errors[static_cast<std::size_t>(AccessError::OutOfBounds)] == 2);
    }
    for (std::size_t i = 0; i < buf.size(); ++i) REQUIRE(buf.data()[i] == 0);
}
