// A set-associative LRU cache model standing in for the SRAM caches of an RNIC (MPT, MTT,
// QPC/ICM). It records which keys are present, never data: the tables hold the data, and the
// model only says whether a lookup would have had to go to host memory, which is what makes
// real RNICs slow down when the working set of QPs or pages outgrows the cache (Kalia
// ATC'16, Husky NSDI'23).
//
// A key maps to set `key % sets`, so consecutive indexes (QPNs, MPT or MTT indexes) spread
// over the sets as they do with a hardware index-based cache. No allocation after
// construction; access() is O(ways).
#pragma once

#include <cstdint>
#include <vector>

namespace rnic::mem {

struct CacheConfig {
    uint32_t entries = 0;       // total lines; 0 turns the model off (no counting, no cost)
    uint32_t ways = 1;          // lines per set; entries must be a multiple of it
    uint64_t miss_cost_ns = 0;  // what one miss adds to the processing time
};

struct CacheStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;  // a valid line replaced by a miss (invalidation is not eviction)
};

class CacheModel {
public:
    // Throws std::invalid_argument for ways == 0 or entries not a multiple of ways (set-up only).
    explicit CacheModel(CacheConfig config = {});

    // True on a hit. With the model off every access "hits": it costs nothing and is not counted.
    bool access(uint64_t key) noexcept;
    // 0 on a hit, miss_cost_ns on a miss: the form the engine adds to its clock.
    uint64_t access_cost_ns(uint64_t key) noexcept { return access(key) ? 0 : config_.miss_cost_ns; }

    void invalidate(uint64_t key) noexcept;
    void invalidate_all() noexcept;
    void reset_stats() noexcept { stats_ = {}; }

    bool enabled() const noexcept { return config_.entries != 0; }
    uint32_t sets() const noexcept { return sets_; }
    const CacheConfig& config() const noexcept { return config_; }
    const CacheStats& stats() const noexcept { return stats_; }
    uint64_t hits() const noexcept { return stats_.hits; }
    uint64_t misses() const noexcept { return stats_.misses; }
    uint64_t evictions() const noexcept { return stats_.evictions; }

private:
    struct Line {
        uint64_t key = 0;
        uint64_t last_use = 0;  // 0: empty line; otherwise the access clock at its last use
    };

    Line* set_of(uint64_t key) noexcept { return lines_.data() + (key % sets_) * config_.ways; }

    CacheConfig config_;
    uint32_t sets_ = 0;
    uint64_t clock_ = 0;
    std::vector<Line> lines_;
    CacheStats stats_;
};

}  // namespace rnic::mem
