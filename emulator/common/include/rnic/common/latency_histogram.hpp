// A latency histogram cheap enough for the poll loop's hot path: recording is a count-leading-
// zeros, a shift and an increment, no allocation, no floating point. Buckets are log-linear
// (8 per power of two, as HdrHistogram with one significant octal digit): values below 8 ns are
// exact, every other bucket is at most 12.5 % of its value wide, so a percentile read from it is
// within 12.5 % above the true one. Values from 0 to 2^40 ns (18 minutes); larger ones land in
// the last bucket, and the exact maximum is kept beside the buckets.
//
// Written by one thread (the poll loop); readers on the same thread (the Stats op runs between
// turns), so no atomics.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace rnic::common {

class LatencyHistogram {
public:
    static constexpr uint32_t kSubBuckets = 8;  // per power of two
    static constexpr uint32_t kMaxOctave = 40;  // 2^40 ns
    static constexpr uint32_t kBuckets = (kMaxOctave - 2) * kSubBuckets + kSubBuckets;

    static constexpr uint32_t bucket_of(uint64_t ns) noexcept {
        if (ns < kSubBuckets) return static_cast<uint32_t>(ns);
        const auto msb = static_cast<uint32_t>(63 - std::countl_zero(ns));
        if (msb > kMaxOctave) return kBuckets - 1;
        const uint32_t sub = static_cast<uint32_t>(ns >> (msb - 3)) & (kSubBuckets - 1);
        return (msb - 2) * kSubBuckets + sub;
    }
    // The largest value that falls in `bucket`.
    static constexpr uint64_t bucket_ceiling(uint32_t bucket) noexcept {
        if (bucket < kSubBuckets) return bucket;
        const uint32_t msb = bucket / kSubBuckets + 2;
        const uint64_t sub = bucket % kSubBuckets;
        const uint64_t width = uint64_t{1} << (msb - 3);
        return ((kSubBuckets + sub) << (msb - 3)) + width - 1;
    }

    void record(uint64_t ns) noexcept {
        ++buckets_[bucket_of(ns)];
        ++count_;
        sum_ += ns;
        max_ = std::max(max_, ns);
        min_ = std::min(min_, ns);
    }

    uint64_t count() const noexcept { return count_; }
    uint64_t max() const noexcept { return max_; }
    uint64_t min() const noexcept { return count_ ? min_ : 0; }
    uint64_t mean() const noexcept { return count_ ? sum_ / count_ : 0; }

    // The value at or below which `permille`/1000 of the recorded values lie (p50 = 500,
    // p99 = 990), as the ceiling of its bucket, never above the exact maximum; 0 when empty.
    uint64_t percentile(uint32_t permille) const noexcept {
        if (count_ == 0) return 0;
        // The rank of the wanted value, 1-based, rounded up: p50 of 2 values is the first.
        const uint64_t rank = std::max<uint64_t>(1, (count_ * std::min<uint32_t>(permille, 1000) + 999) / 1000);
        uint64_t seen = 0;
        for (uint32_t b = 0; b < kBuckets; ++b) {
            seen += buckets_[b];
            if (seen >= rank) return std::min(bucket_ceiling(b), max_);
        }
        return max_;
    }

    void reset() noexcept { *this = LatencyHistogram{}; }

private:
    std::array<uint64_t, kBuckets> buckets_{};
    uint64_t count_ = 0;
    uint64_t sum_ = 0;
    uint64_t max_ = 0;
    uint64_t min_ = UINT64_MAX;
};

}  // namespace rnic::common
