// Counters of the memory unit, named after vendor/`rdma statistic` counters where one exists.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "rnic/memory/access_error.hpp"

namespace rnic::mem {

struct MemoryCounters {
    uint64_t mr_registrations = 0;
    uint64_t mr_reg_errors = 0;
    uint64_t mr_deregistrations = 0;
    uint64_t mr_invalidations = 0;
    uint64_t mr_reregistrations = 0;  // ibv_rereg_mr that succeeded
    uint64_t mw_allocations = 0;
    uint64_t mw_binds = 0;  // unbinds (zero-length binds of type 1 windows) included
    uint64_t mw_bind_errors = 0;
    uint64_t mw_invalidations = 0;
    uint64_t cache_miss_ns = 0;  // every nanosecond ever charged, including what was taken
    // On-demand regions: accesses served through the owner's address space (each one faults
    // the pages it touches in, as a NIC page fault would), their bytes, and accesses that hit
    // memory nothing is mapped at (remote access / local protection errors).
    uint64_t odp_accesses = 0;
    uint64_t odp_bytes = 0;
    uint64_t odp_faults = 0;
    uint64_t odp_pending = 0;  // accesses answered Pending (a fault not yet resolved, a busy owner)
    // Indexed by AccessError; [None] stays 0. Local: lkeys in SGEs. Remote: rkeys from the peer.
    std::array<uint64_t, kAccessErrorKinds> local_access_errors{};
    std::array<uint64_t, kAccessErrorKinds> remote_access_errors{};
};

// (name, value) pairs in a fixed order; names are string literals.
using CounterList = std::vector<std::pair<std::string_view, uint64_t>>;

}  // namespace rnic::mem
