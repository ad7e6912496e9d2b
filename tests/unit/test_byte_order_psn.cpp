#include <catch2/catch.hpp>

#include <array>

#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/psn.hpp"

using namespace rnic::wire;

TEST_CASE("big-endian loads and stores at unaligned offsets", "[byte_order]") {
    std::array<uint8_t, 17> buf{};
    store_be64(buf.data() + 1, 0x0102030405060708ull);
    CHECK(buf[1] == 0x01);
    CHECK(buf[8] == 0x08);
    CHECK(load_be64(buf.data() + 1) == 0x0102030405060708ull);
    store_be32(buf.data() + 9, 0xA1B2C3D4);
    CHECK(load_be32(buf.data() + 9) == 0xA1B2C3D4);
    CHECK(load_be16(buf.data() + 9) == 0xA1B2);
    store_be24(buf.data() + 3, 0xFFEEDD);
    CHECK(load_be24(buf.data() + 3) == 0xFFEEDD);
    store_le32(buf.data() + 13, 0x11223344);
    CHECK(buf[13] == 0x44);
    CHECK(load_le32(buf.data() + 13) == 0x11223344);
}

TEST_CASE("24-bit PSN arithmetic wraps", "[psn]") {
    CHECK(psn_add(0xFFFFFF, 1) == 0);
    CHECK(psn_add(0xFFFFFE, 5) == 3);
    CHECK(psn_distance(0xFFFFFE, 2) == 4);
    CHECK(psn_distance(5, 5) == 0);
    CHECK(psn_diff(2, 0xFFFFFE) == 4);
    CHECK(psn_diff(0xFFFFFE, 2) == -4);
    CHECK(psn_before(0xFFFFFE, 2));
    CHECK(psn_after(2, 0xFFFFFE));
    CHECK_FALSE(psn_before(7, 7));
    CHECK(psn_before_or_equal(7, 7));
    // Exactly half the circle apart: the later one is 2^23 ahead, never "before".
    CHECK(psn_diff(0x800000, 0) == 0x800000);
    CHECK(psn_diff(0, 0x800000) == 0x800000);
    CHECK(psn_diff(0x7FFFFF, 0) == 0x7FFFFF);
    CHECK(psn_diff(0, 0x7FFFFF) == -0x7FFFFF);
    CHECK(psn_in_window(1, 0xFFFFFF, 3));
    CHECK(psn_in_window(0xFFFFFF, 0xFFFFFF, 1));
    CHECK_FALSE(psn_in_window(2, 0xFFFFFF, 3));
    CHECK(msn_add(0xFFFFFF, 2) == 1);
}

TEST_CASE("PSN comparison is antisymmetric all around the circle", "[psn]") {
    for (uint32_t a = 0; a < (1u << 24); a += 0x10001) {
        for (uint32_t step : {1u, 2u, 1000u, 0x7FFFFFu}) {
            const uint32_t b = psn_add(a, step);
            REQUIRE(psn_before(a, b));
            REQUIRE(psn_after(b, a));
            REQUIRE(psn_diff(b, a) == static_cast<int32_t>(step));
        }
    }
}
