#include <catch2/catch.hpp>

#include "rnic/wire/aeth.hpp"

using namespace rnic::wire;

TEST_CASE("AETH syndromes encode and decode", "[aeth]") {
    CHECK(AethSyndrome::ack().encode() == 0x1F);  // what rxe sends: ACK, no credit information
    CHECK(AethSyndrome::rnr_nak(12).encode() == 0x2C);
    CHECK(AethSyndrome::nak(NakCode::PsnSequenceError).encode() == 0x60);
    CHECK(AethSyndrome::nak(NakCode::InvalidRequest).encode() == 0x61);
    CHECK(AethSyndrome::nak(NakCode::RemoteAccessError).encode() == 0x62);
    CHECK(AethSyndrome::nak(NakCode::RemoteOperationalError).encode() == 0x63);
    for (int s = 0; s < 128; ++s) {
        const auto d = AethSyndrome::decode(static_cast<uint8_t>(s));
        REQUIRE(d.encode() == s);
    }
    CHECK_FALSE(AethSyndrome::reserved_bit_clear(0x9F));
    const auto rnr = AethSyndrome::decode(0x2C);
    CHECK(rnr.type == AckType::RnrNak);
    CHECK(rnr.value == 12);
    CHECK(AethSyndrome::decode(0x62).nak_code() == NakCode::RemoteAccessError);
    CHECK(nak_code_name(NakCode::PsnSequenceError) == "PSN_SEQ_ERR");
    CHECK(ack_type_name(AckType::RnrNak) == "RNR_NAK");
}

TEST_CASE("RNR timer table (IBA table 45)", "[aeth]") {
    CHECK(rnr_timer_ns(0) == 655'360'000);
    CHECK(rnr_timer_ns(1) == 10'000);
    CHECK(rnr_timer_ns(12) == 640'000);
    CHECK(rnr_timer_ns(31) == 491'520'000);
    for (uint8_t c = 2; c < 32; ++c) REQUIRE(rnr_timer_ns(c) > rnr_timer_ns(static_cast<uint8_t>(c - 1)));
    CHECK(rnr_timer_code_at_least(0) == 1);
    CHECK(rnr_timer_code_at_least(640'000) == 12);
    CHECK(rnr_timer_code_at_least(640'001) == 13);
    CHECK(rnr_timer_code_at_least(600'000'000) == 0);
    CHECK(rnr_timer_code_at_least(700'000'000) == 31);
}

TEST_CASE("ACK credit codes (IBA table 44)", "[aeth]") {
    CHECK(credits_from_code(0) == 0);
    CHECK(credits_from_code(5) == 6);
    CHECK(credits_from_code(30) == 32768);
    CHECK(credits_from_code(31) == -1);
    CHECK(credit_code_for(0) == 0);
    CHECK(credit_code_for(7) == 5);
    CHECK(credit_code_for(8) == 6);
    CHECK(credit_code_for(100000) == 30);
    for (uint32_t n = 0; n < 40000; n += 37) {
        const uint8_t c = credit_code_for(n);
        REQUIRE(static_cast<uint32_t>(credits_from_code(c)) <= n);
        if (c < 30) REQUIRE(static_cast<uint32_t>(credits_from_code(static_cast<uint8_t>(c + 1))) > n);
    }
}
