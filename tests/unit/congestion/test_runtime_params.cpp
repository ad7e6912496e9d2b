// Knobs changed while QPs run (rnicctl cc set): several at once, all or nothing, mlx5's
// per-priority switches, and what a reaction point in mid-episode does with new limits.
#include <catch2/catch.hpp>

#include <array>
#include <string>

#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/congestion/reaction_point.hpp"

using namespace rnic::cc;

namespace {
constexpr uint64_t us(uint64_t n) { return n * 1000; }
}  // namespace

TEST_CASE("set_params checks every knob, then the cross-field rules on the result", "[params]") {
    DcqcnParams params;
    // min above the old max would fail one at a time in this order; together they are consistent.
    REQUIRE_FALSE(set_param(params, "rp_max_rate", 100));
    const std::array both{ParamAssignment{"rp_max_rate", 1000}, ParamAssignment{"rp_min_rate", 200}};
    REQUIRE_FALSE(set_params(params, both));
    CHECK(params.rp_max_rate == 1000);
    CHECK(params.rp_min_rate == 200);

    // One bad knob anywhere: nothing changes, and the error names it.
    const std::array bad{ParamAssignment{"rp_ai_rate", 40}, ParamAssignment{"rp_gd", 3}};
    const auto error = set_params(params, bad);
    REQUIRE(error);
    CHECK(error->find("rp_gd") != std::string::npos);
    CHECK(params.rp_ai_rate == 5);
    const std::array unknown{ParamAssignment{"rp_ai_rate", 40}, ParamAssignment{"rp_nonsense", 3}};
    REQUIRE(set_params(params, unknown));
    CHECK(params.rp_ai_rate == 5);
    const std::array inconsistent{ParamAssignment{"rp_ai_rate", 40}, ParamAssignment{"rp_min_rate", 2000}};
    REQUIRE(set_params(params, inconsistent));
    CHECK(params.rp_ai_rate == 5);
    CHECK(params.rp_min_rate == 200);
}

TEST_CASE("rp_enable/N and np_enable/N switch one priority as mlx5's roce_rp/enable/N", "[params]") {
    DcqcnParams params;
    REQUIRE_FALSE(set_param_assignment(params, "rp_enable/3=0"));
    CHECK(params.rp_enable_prio_mask == 0xf7);
    CHECK_FALSE(params.rp_enabled_for(3));
    CHECK(params.np_enable_prio_mask == 0xff);
    REQUIRE_FALSE(set_param_assignment(params, "np_enable/0=0"));
    REQUIRE_FALSE(set_param_assignment(params, "np_enable/7=0"));
    CHECK(params.np_enable_prio_mask == 0x7e);
    REQUIRE_FALSE(set_param_assignment(params, "rp_enable/3=1"));
    CHECK(params.rp_enable_prio_mask == 0xff);
    CHECK(set_param_assignment(params, "rp_enable/8=0"));
    CHECK(set_param_assignment(params, "rp_enable/=0"));
    CHECK(set_param_assignment(params, "rp_enable/12=0"));
    const auto two = set_param_assignment(params, "np_enable/2=2");
    REQUIRE(two);
    CHECK(two->find("0 or 1") != std::string::npos);
    CHECK(params.np_enable_prio_mask == 0x7e);
}

TEST_CASE("a limited QP follows a raised rp_min_rate and a lowered ceiling at once", "[dcqcn]") {
    DcqcnParams params;
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    REQUIRE(rp.current_rate_kbps() == 5'004'883);
    REQUIRE(rp.limited());

    REQUIRE_FALSE(set_param(params, "rp_min_rate", 6000));
    rp.on_params_changed(us(1));
    CHECK(rp.current_rate_kbps() == 6'000'000);
    CHECK(rp.limited());

    // The ceiling comes down to the current rate: the episode is over, timers stop.
    REQUIRE_FALSE(set_param(params, "rp_max_rate", 6000));
    rp.on_params_changed(us(2));
    CHECK(rp.current_rate_kbps() == 6'000'000);
    CHECK_FALSE(rp.limited());
    CHECK_FALSE(rp.next_event_ns().has_value());

    // At full rate a QP follows the ceiling both ways.
    REQUIRE_FALSE(set_param(params, "rp_max_rate", 8000));
    rp.on_params_changed(us(3));
    CHECK(rp.current_rate_kbps() == 8'000'000);
    CHECK_FALSE(rp.limited());
}

TEST_CASE("a shorter rp_time_reset applies from the next increase event", "[dcqcn]") {
    DcqcnParams params;
    ReactionPoint rp(params, 10'000);
    rp.on_cnp(0);
    REQUIRE(rp.next_event_ns() == us(300));
    REQUIRE_FALSE(set_param(params, "rp_time_reset", 10));
    rp.on_params_changed(us(5));
    rp.advance(us(300));  // the event already scheduled runs; the next comes 10 us later
    CHECK(rp.stats().timer_events == 1);
    CHECK(rp.next_event_ns() == us(310));
}
