#include <catch2/catch.hpp>

#include <string>

#include "rnic/congestion/dcqcn_params.hpp"

using namespace rnic::cc;

TEST_CASE("every knob has mlx5's name, a range containing NVIDIA's default, and reads back", "[params]") {
    const DcqcnParams defaults;
    REQUIRE(dcqcn_param_table().size() >= 20);
    for (const auto& info : dcqcn_param_table()) {
        INFO(std::string(info.name));
        const uint32_t value = get_param(defaults, info);
        CHECK(value >= info.min);
        CHECK(value <= info.max);
        CHECK(find_dcqcn_param(info.name) == &info);
    }
    CHECK(defaults.rp_ai_rate == 5);
    CHECK(defaults.rp_hai_rate == 50);
    CHECK(defaults.rp_time_reset == 300);
    CHECK(defaults.rp_byte_reset == 32767);
    CHECK(defaults.rp_dce_tcp_g == 1019);
    CHECK(defaults.rp_initial_alpha_value == 1023);
    CHECK(defaults.np_cnp_dscp == 48);
}

TEST_CASE("setting a knob checks its range and the cross-field rules", "[params]") {
    DcqcnParams params;
    CHECK_FALSE(set_param(params, "rp_ai_rate", 40).has_value());
    CHECK(params.rp_ai_rate == 40);
    CHECK_FALSE(set_param_assignment(params, "np_min_time_between_cnps=0").has_value());
    CHECK(params.np_min_time_between_cnps == 0);
    CHECK_FALSE(set_param_assignment(params, "rp_enable_prio_mask=8").has_value());
    CHECK(params.rp_enabled_for(3));
    CHECK_FALSE(params.rp_enabled_for(0));

    const auto unknown = set_param(params, "rp_bogus", 1);
    REQUIRE(unknown);
    CHECK(unknown->find("unknown") != std::string::npos);
    const auto range = set_param(params, "rp_gd", 12);
    REQUIRE(range);
    CHECK(range->find("[10, 11]") != std::string::npos);
    CHECK(params.rp_gd == 11);

    REQUIRE_FALSE(set_param(params, "rp_max_rate", 100));
    const auto cross = set_param(params, "rp_min_rate", 200);
    REQUIRE(cross);
    CHECK(params.rp_min_rate == 1);
    CHECK(set_param_assignment(params, "rp_ai_rate").has_value());
    CHECK(set_param_assignment(params, "rp_ai_rate=12x").has_value());
    CHECK(set_param_assignment(params, "rp_ai_rate=").has_value());
}
