#include <catch2/catch.hpp>

#include "rnic/congestion/tx_pacer.hpp"

using rnic::cc::TxPacer;

TEST_CASE("frames are spaced by their wire time at the current rate", "[pacer]") {
    TxPacer pacer;
    CHECK(pacer.may_send(0, 1'000'000));
    pacer.on_sent(1'250, 0, 1'000'000);  // 10,000 bits at 1 Gb/s: 10 us
    CHECK(pacer.earliest_departure_ns(1'000'000) == 10'000);
    CHECK_FALSE(pacer.may_send(9'999, 1'000'000));
    CHECK(pacer.may_send(10'000, 1'000'000));
    pacer.on_sent(1'250, 10'000, 1'000'000);
    CHECK(pacer.earliest_departure_ns(100'000) == 110'000);  // cut to 100 Mb/s since: 100 us
}

TEST_CASE("an idle QP banks no credit for a burst", "[pacer]") {
    TxPacer pacer;
    pacer.on_sent(1'250, 0, 1'000'000);
    pacer.on_sent(1'250, 1'000'000, 1'000'000);  // sent long after it was allowed
    CHECK(pacer.earliest_departure_ns(1'000'000) == 1'010'000);
}

TEST_CASE("a rate changed after a frame left moves the next departure at once", "[pacer]") {
    TxPacer pacer;
    pacer.on_sent(4'096, 1'000, 1'000);  // 4 KB at rp_min_rate 1 Mb/s: 32.8 ms
    CHECK(pacer.earliest_departure_ns(1'000) == 1'000 + 32'768'000);
    // Recovered to 10 Gb/s: the same frame's wire time is 3.3 us, so the QP may go now.
    CHECK(pacer.earliest_departure_ns(10'000'000) == 1'000 + 3'276);
    CHECK(pacer.may_send(5'000, 10'000'000));
    CHECK_FALSE(pacer.may_send(5'000, 1'000));
    // A cut lengthens the wait the same way.
    pacer.on_sent(1'250, 5'000, 10'000'000);
    CHECK(pacer.earliest_departure_ns(100'000) == 5'000 + 100'000);
    pacer.reset();
    CHECK(pacer.may_send(0, 1'000));
}
