#include <catch2/catch.hpp>

#include "rnic/congestion/tx_pacer.hpp"

using rnic::cc::TxPacer;

TEST_CASE("frames are spaced by their wire time at the current rate", "[pacer]") {
    TxPacer pacer;
    CHECK(pacer.may_send(0));
    pacer.on_sent(1'250, 0, 1'000'000);  // 10,000 bits at 1 Gb/s: 10 us
    CHECK(pacer.earliest_departure_ns() == 10'000);
    CHECK_FALSE(pacer.may_send(9'999));
    CHECK(pacer.may_send(10'000));
    pacer.on_sent(1'250, 10'000, 100'000);  // at 100 Mb/s: 100 us
    CHECK(pacer.earliest_departure_ns() == 110'000);
}

TEST_CASE("an idle QP banks no credit for a burst", "[pacer]") {
    TxPacer pacer;
    pacer.on_sent(1'250, 0, 1'000'000);
    pacer.on_sent(1'250, 1'000'000, 1'000'000);  // sent long after it was allowed
    CHECK(pacer.earliest_departure_ns() == 1'010'000);
}
