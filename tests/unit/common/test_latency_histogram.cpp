#include <catch2/catch.hpp>

#include <cstdint>

#include "rnic/common/latency_histogram.hpp"

using rnic::common::LatencyHistogram;

TEST_CASE("latency histogram: every value lands in a bucket whose range holds it") {
    for (uint64_t v : {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 17ull, 100ull, 1023ull, 1024ull, 1025ull,
                       999'999ull, 1'000'000ull, (1ull << 40) - 1}) {
        const uint32_t b = LatencyHistogram::bucket_of(v);
        INFO("value " << v << " bucket " << b);
        REQUIRE(b < LatencyHistogram::kBuckets);
        CHECK(v <= LatencyHistogram::bucket_ceiling(b));
        if (b > 0) CHECK(v > LatencyHistogram::bucket_ceiling(b - 1));
    }
}

TEST_CASE("latency histogram: buckets are contiguous and at most 12.5 % wide") {
    for (uint32_t b = 1; b < LatencyHistogram::kBuckets; ++b) {
        const uint64_t lo = LatencyHistogram::bucket_ceiling(b - 1) + 1;
        const uint64_t hi = LatencyHistogram::bucket_ceiling(b);
        INFO("bucket " << b << " [" << lo << ", " << hi << "]");
        REQUIRE(LatencyHistogram::bucket_of(lo) == b);
        REQUIRE(LatencyHistogram::bucket_of(hi) == b);
        if (lo >= 8) CHECK((hi - lo + 1) * 8 <= lo);
    }
}

TEST_CASE("latency histogram: values past 2^40 ns go to the last bucket, the exact maximum is kept") {
    LatencyHistogram h;
    h.record(UINT64_MAX / 2);
    CHECK(LatencyHistogram::bucket_of(UINT64_MAX) == LatencyHistogram::kBuckets - 1);
    CHECK(h.max() == UINT64_MAX / 2);
    CHECK(h.percentile(500) == LatencyHistogram::bucket_ceiling(LatencyHistogram::kBuckets - 1));
}

TEST_CASE("latency histogram: percentiles of a known distribution") {
    LatencyHistogram h;
    CHECK(h.percentile(500) == 0);
    CHECK(h.min() == 0);
    // 1 .. 1000 us, one each: p50 is 500 us, p99 990 us, within one bucket (12.5 %) above.
    for (uint64_t us = 1; us <= 1000; ++us) h.record(us * 1000);
    CHECK(h.count() == 1000);
    CHECK(h.min() == 1000);
    CHECK(h.max() == 1'000'000);
    CHECK(h.mean() == 500'500);
    const uint64_t p50 = h.percentile(500), p99 = h.percentile(990), p100 = h.percentile(1000);
    CHECK(p50 >= 500'000);
    CHECK(p50 <= 500'000 + 500'000 / 8);
    CHECK(p99 >= 990'000);
    CHECK(p99 <= 1'000'000);  // capped by the exact maximum
    CHECK(p100 == 1'000'000);
    h.reset();
    CHECK(h.count() == 0);
    CHECK(h.max() == 0);
}

TEST_CASE("latency histogram: a single outlier moves p99 only when it is more than 1 % of the values") {
    LatencyHistogram h;
    for (int i = 0; i < 99; ++i) h.record(10'000);
    h.record(5'000'000);
    CHECK(h.percentile(990) <= 10'000 + 10'000 / 8);
    CHECK(h.percentile(1000) == 5'000'000);
    h.record(5'000'000);
    CHECK(h.percentile(990) >= 5'000'000 - 5'000'000 / 8);
}
