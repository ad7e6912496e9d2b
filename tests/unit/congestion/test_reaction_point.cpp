// DCQCN reaction point against sequences computed by hand from the rules in docs/congestion.md
// (rates in kb/s, alpha in 1/1024 as reported, times in ns).
#include <catch2/catch.hpp>

#include "rnic/congestion/reaction_point.hpp"

using rnic::cc::DcqcnParams;
using rnic::cc::ReactionPoint;

namespace {
constexpr uint64_t us(uint64_t n) { return n * 1000; }
}  // namespace

TEST_CASE("a QP without CNPs runs at the port rate and schedules nothing", "[dcqcn]") {
    DcqcnParams params;
    ReactionPoint rp(params, 10'000);
    CHECK(rp.current_rate_kbps() == 10'000'000);
    CHECK_FALSE(rp.limited());
    CHECK_FALSE(rp.next_event_ns().has_value());
    rp.on_bytes_sent(1'000'000, us(5));
    rp.advance(us(10'000));
    CHECK(rp.current_rate_kbps() == 10'000'000);
    CHECK(rp.stats().byte_events == 0);
}

TEST_CASE("NVIDIA's defaults: first CNP, fast recovery, additive then hyper increase", "[dcqcn]") {
    DcqcnParams params;  // F = 1, no target clamp unless the timer raised the rate
    ReactionPoint rp(params, 10'000);

    rp.on_cnp(0);  // alpha = initial 1023: cut by 10,000,000 * 1023 / 2048 = 4,995,117
    CHECK(rp.alpha() == 1023);
    CHECK(rp.current_rate_kbps() == 5'004'883);
    CHECK(rp.target_rate_kbps() == 10'000'000);
    REQUIRE(rp.next_event_ns() == us(300));

    rp.advance(us(300));  // T = 1 = F: fast recovery to the midpoint (rounded up)
    CHECK(rp.current_rate_kbps() == 7'502'442);
    CHECK(rp.stats().fast_recovery == 1);
    rp.advance(us(600));  // T = 2 > F, BC = 0: additive, target already at the ceiling
    CHECK(rp.target_rate_kbps() == 10'000'000);
    CHECK(rp.current_rate_kbps() == 8'751'221);
    CHECK(rp.stats().additive_increase == 1);

    rp.on_bytes_sent(32'767, us(601));  // BC = 1: max 2 > F, min 1 = F: additive
    CHECK(rp.current_rate_kbps() == 9'375'611);
    rp.on_bytes_sent(32'767, us(602));  // BC = 2: both above F: hyper increase
    CHECK(rp.current_rate_kbps() == 9'687'806);
    CHECK(rp.stats().hyper_increase == 1);
    CHECK(rp.stats().byte_events == 2);
}

TEST_CASE("clamped target: alpha decays between CNPs and both increases move the target", "[dcqcn]") {
    DcqcnParams params;
    params.rp_clamp_tgt_rate = 1;
    ReactionPoint rp(params, 1'000);

    rp.on_cnp(0);
    CHECK(rp.current_rate_kbps() == 500'489);
    CHECK(rp.target_rate_kbps() == 1'000'000);

    // 100 alpha periods without a CNP: 1023 decays by 1019/1024 per period to 627.04 (kept
    // with 20 fraction bits: 642,057 / 2^20). The cut is 500,489 * 642,057 / 2^21 = 153,228
    // and the target is clamped to the rate before it.
    rp.on_cnp(us(100));
    CHECK(rp.alpha() == 627);
    CHECK(rp.current_rate_kbps() == 347'261);
    CHECK(rp.target_rate_kbps() == 500'489);
    CHECK(rp.stats().cuts == 2);

    rp.advance(us(400));  // T = 1: fast recovery
    CHECK(rp.current_rate_kbps() == 423'875);
    CHECK(rp.target_rate_kbps() == 500'489);
    rp.advance(us(1'000));  // T = 2 and T = 3: additive increase twice, +5 Mb/s each
    CHECK(rp.target_rate_kbps() == 510'489);
    CHECK(rp.current_rate_kbps() == 487'586);
    CHECK(rp.timer_count() == 3);

    rp.on_bytes_sent(32'767, us(1'001));  // BC = 1: additive
    CHECK(rp.target_rate_kbps() == 515'489);
    CHECK(rp.current_rate_kbps() == 501'538);
    rp.on_bytes_sent(32'767, us(1'002));  // BC = 2 > F and T = 3 > F: hyper, i = 1: +50 Mb/s
    CHECK(rp.target_rate_kbps() == 565'489);
    CHECK(rp.current_rate_kbps() == 533'514);
}

TEST_CASE("alpha rises at the end of a period that saw a CNP and falls otherwise", "[dcqcn]") {
    DcqcnParams params;
    params.rp_initial_alpha_value = 500;
    params.rp_rate_reduce_monitor_period = 1'000;  // keep cuts out of the way
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    CHECK(rp.alpha() == 500);
    rp.on_cnp(us(0) + 500);    // inside the first period: only marks it
    CHECK(rp.alpha() == 500);
    rp.advance(us(1));         // 500 * 1019 / 1024 + 5 = 502.56, reported rounded
    CHECK(rp.alpha() == 503);
    rp.advance(us(2));         // no CNP in [1, 2) us: 502.56 * 1019 / 1024 = 500.10
    CHECK(rp.alpha() == 500);
}

TEST_CASE("CNPs inside one monitor period fold into one cut at its end", "[dcqcn]") {
    DcqcnParams params;
    params.rp_dce_tcp_g = 1023;  // alpha moves by at most 1 per period here
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    const uint64_t after_first = rp.current_rate_kbps();
    rp.on_cnp(us(1));
    rp.on_cnp(us(2));
    CHECK(rp.stats().cuts == 1);
    CHECK(rp.current_rate_kbps() == after_first);
    REQUIRE(rp.next_event_ns() == us(4));
    rp.advance(us(4));
    CHECK(rp.stats().cuts == 2);
    CHECK(rp.stats().cnps == 3);
    CHECK(rp.current_rate_kbps() < after_first);
    rp.advance(us(8));  // nothing pending any more
    CHECK(rp.stats().cuts == 2);
}

TEST_CASE("cuts respect rp_min_dec_fac and rp_min_rate", "[dcqcn]") {
    DcqcnParams params;
    params.rp_gd = 10;  // alpha 1023 / 1024 would remove almost everything
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    CHECK(rp.current_rate_kbps() == 5'000'000);  // rp_min_dec_fac 50 %
    params.rp_min_dec_fac = 0;
    params.rp_min_rate = 4'000;
    rp.on_cnp(us(10));
    CHECK(rp.current_rate_kbps() == 4'000'000);  // the floor, not 5,000,000 * (1 - ~0.99)
}

TEST_CASE("rp_rate_to_set_on_first_cnp replaces the first cut", "[dcqcn]") {
    DcqcnParams params;
    params.rp_rate_to_set_on_first_cnp = 2'000;
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    CHECK(rp.current_rate_kbps() == 2'000'000);
    CHECK(rp.target_rate_kbps() == 2'000'000);
    CHECK(rp.limited());
}

TEST_CASE("recovery ends at the ceiling and the timers stop", "[dcqcn]") {
    DcqcnParams params;
    params.rp_hai_rate = 5'000;
    params.rp_max_rate = 8'000;  // below the port's 10 Gb/s
    ReactionPoint rp(params, 10'000);
    CHECK(rp.current_rate_kbps() == 8'000'000);
    rp.on_cnp(0);
    CHECK(rp.limited());
    for (uint64_t t = 1; t <= 100 && rp.limited(); ++t) {
        rp.on_bytes_sent(32'767, us(t * 300) - 1);
        rp.advance(us(t * 300));
    }
    CHECK_FALSE(rp.limited());
    CHECK(rp.current_rate_kbps() == 8'000'000);
    CHECK_FALSE(rp.next_event_ns().has_value());
    // A later CNP starts a new episode, with the initial alpha again.
    rp.on_cnp(us(100'000));
    CHECK(rp.limited());
    CHECK(rp.alpha() == 1023);
    CHECK(rp.current_rate_kbps() < 8'000'000);
}

TEST_CASE("a long spell without CNPs ages alpha to 0 in bounded work", "[dcqcn]") {
    DcqcnParams params;
    params.rp_time_reset = 131'071;  // no increase before 131 ms: the QP stays limited
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    const uint64_t rate = rp.current_rate_kbps();
    rp.advance(us(100'000));  // 100,000 alpha periods, decayed until alpha reaches 0
    CHECK(rp.alpha() == 0);
    CHECK(rp.current_rate_kbps() == rate);
    rp.on_cnp(us(100'001));  // alpha 0: the CNP cuts nothing, the period it opened will
    CHECK(rp.current_rate_kbps() == rate);
    rp.advance(us(100'002));
    CHECK(rp.alpha() == 5);  // 0 * 1019 / 1024 + (1024 - 1019)
}

TEST_CASE("a small alpha decays by g and not by a whole 1/1024 per period", "[dcqcn]") {
    // g = 1/256 (the paper's): exact decay of alpha 0.1 (102/1024) is 0.4/1024 per period.
    // Floored at 10 bits it lost 1/1024 per period and reached 0 after 102 periods; kept with
    // 20 bits it follows (1 - 1/256)^n: 102 * (1020/1024)^100 = 68.96, ^500 = 14.41.
    DcqcnParams params;
    params.rp_dce_tcp_g = 1020;
    params.rp_initial_alpha_value = 102;
    params.rp_time_reset = 131'071;  // stay limited, no increase in the way
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    rp.advance(us(100));
    CHECK(rp.alpha() == 69);
    rp.advance(us(500));
    CHECK(rp.alpha() == 14);
}

TEST_CASE("under light marking alpha settles near the fraction of periods with a CNP", "[dcqcn]") {
    // One CNP every 10th alpha period with g = 1/256: the real-valued recursion (one rise
    // a(1-g) + g, nine decays a(1-g)) settles at 100.6/1024 at the end of a cycle. At 10 bits
    // the floored decay (1 per period below alpha 256/1024) outran the rise (+3) and alpha sat
    // at 0, so CNPs cut nothing.
    DcqcnParams params;
    params.rp_dce_tcp_g = 1020;
    params.rp_dce_tcp_rtt = 1;
    params.rp_rate_reduce_monitor_period = 1;
    params.rp_time_reset = 131'071;
    ReactionPoint rp(params, 10'000);
    for (uint64_t t = 0; t < 20'000; t += 10) rp.on_cnp(us(t) + 500);
    rp.advance(us(20'001));  // the end of a cycle: a rise and nine decays since the last CNP
    CHECK(rp.alpha() >= 99);
    CHECK(rp.alpha() <= 102);
}
