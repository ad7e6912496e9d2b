#include "rnic/memory/cache_model.hpp"

#include <stdexcept>

namespace rnic::mem {

CacheModel::CacheModel(CacheConfig config) : config_(config) {
    if (config_.entries == 0) return;
    if (config_.ways == 0 || config_.entries % config_.ways != 0) {
        throw std::invalid_argument("cache entries must be a non-zero multiple of ways");
    }
    sets_ = config_.entries / config_.ways;
    lines_.resize(config_.entries);
}

bool CacheModel::access(uint64_t key) noexcept {
    if (!enabled()) return true;
    ++clock_;
    Line* set = set_of(key);
    Line* victim = set;
    for (uint32_t way = 0; way < config_.ways; ++way) {
        Line& line = set[way];
        if (line.last_use != 0 && line.key == key) {
            line.last_use = clock_;
            ++stats_.hits;
            return true;
        }
        // An empty line (last_use 0) always wins over any valid one: fill before evicting.
        if (line.last_use < victim->last_use) victim = &line;
    }
    ++stats_.misses;
    if (victim->last_use != 0) ++stats_.evictions;
    *victim = Line{key, clock_};
    return false;
}

void CacheModel::invalidate(uint64_t key) noexcept {
    if (!enabled()) return;
    Line* set = set_of(key);
    for (uint32_t way = 0; way < config_.ways; ++way) {
        if (set[way].last_use != 0 && set[way].key == key) set[way] = Line{};
    }
}

void CacheModel::invalidate_all() noexcept {
    for (Line& line : lines_) line = Line{};
}

}  // namespace rnic::mem
