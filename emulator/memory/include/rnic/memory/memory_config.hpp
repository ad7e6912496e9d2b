// Limits and cache geometry of the emulated RNIC's memory protection unit. Parsed once at
// start-up; the defaults keep the cache models off.
#pragma once

#include <cstdint>

#include "rnic/memory/cache_model.hpp"

namespace rnic::mem {

struct MemoryConfig {
    uint32_t max_mrs = 1u << 16;                   // MPT entries for regions
    uint32_t max_mws = 1u << 12;                   // MPT entries for windows (rxe: 4096); with max_mrs at most kMaxMptIndex
    uint64_t max_mr_size = uint64_t{1} << 32;      // bytes per region (at most 2^63)
    uint64_t max_mtt_entries = uint64_t{1} << 20;  // pages over all regions (4 GiB)
    CacheConfig mpt_cache{};                       // keyed by MPT index
    CacheConfig mtt_cache{};                       // keyed by global MTT entry index
};

}  // namespace rnic::mem
