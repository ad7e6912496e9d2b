#include <catch2/catch.hpp>

#include "rnic/congestion/notification_point.hpp"

using rnic::cc::DcqcnParams;
using rnic::cc::NotificationPoint;

TEST_CASE("the NP sends at most one CNP per QP per np_min_time_between_cnps", "[dcqcn]") {
    DcqcnParams params;  // 4 us
    NotificationPoint np;
    CHECK(np.on_ce_marked(params, 10'000));
    CHECK_FALSE(np.on_ce_marked(params, 10'001));
    CHECK_FALSE(np.on_ce_marked(params, 13'999));
    CHECK(np.on_ce_marked(params, 14'000));
    params.np_min_time_between_cnps = 0;  // every marked frame
    CHECK(np.on_ce_marked(params, 14'000));
    CHECK(np.on_ce_marked(params, 14'000));
}

TEST_CASE("the first marked frame at time 0 still gets its CNP", "[dcqcn]") {
    DcqcnParams params;
    NotificationPoint np;
    CHECK(np.on_ce_marked(params, 0));
    CHECK_FALSE(np.on_ce_marked(params, 3'999));
}
