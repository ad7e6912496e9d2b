#include <array>

#include "rnic/memory/memory_table.hpp"

namespace rnic::mem {

namespace {

constexpr std::array<std::string_view, kAccessErrorKinds> kLocalErrorNames = {
    "",
    "local_access_invalid_key",
    "local_access_pd_mismatch",
    "local_access_denied",
    "local_access_out_of_bounds",
    "local_access_misaligned",
    "local_access_fault",
    "local_access_qp_mismatch",
};
constexpr std::array<std::string_view, kAccessErrorKinds> kRemoteErrorNames = {
    "",
    "remote_access_invalid_key",
    "remote_access_pd_mismatch",
    "remote_access_denied",
    "remote_access_out_of_bounds",
    "remote_access_misaligned",
    "remote_access_fault",
    "remote_access_qp_mismatch",
};

}  // namespace

CounterList MemoryTable::counters() const {
    CounterList list = {
        {"mr_in_use", mpt_.in_use()},
        {"mtt_entries_in_use", mtt_.entries_in_use()},
        {"mr_registrations", counters_.mr_registrations},
        {"mr_reg_errors", counters_.mr_reg_errors},
        {"mr_deregistrations", counters_.mr_deregistrations},
        {"mr_invalidations", counters_.mr_invalidations},
        {"mr_reregistrations", counters_.mr_reregistrations},
        {"mw_in_use", mw_mpt_.in_use()},
        {"mw_allocations", counters_.mw_allocations},
        {"mw_binds", counters_.mw_binds},
        {"mw_bind_errors", counters_.mw_bind_errors},
        {"mw_invalidations", counters_.mw_invalidations},
        {"mpt_cache_hits", mpt_cache_.hits()},
        {"mpt_cache_misses", mpt_cache_.misses()},
        {"mpt_cache_evictions", mpt_cache_.evictions()},
        {"mtt_cache_hits", mtt_cache_.hits()},
        {"mtt_cache_misses", mtt_cache_.misses()},
        {"mtt_cache_evictions", mtt_cache_.evictions()},
        {"mem_cache_miss_ns", counters_.cache_miss_ns},
        {"odp_accesses", counters_.odp_accesses},
        {"odp_bytes", counters_.odp_bytes},
        {"odp_faults", counters_.odp_faults},
        {"odp_pending", counters_.odp_pending},
    };
    for (std::size_t kind = 1; kind < kAccessErrorKinds; ++kind) {
        list.emplace_back(kLocalErrorNames[kind], counters_.local_access_errors[kind]);
    }
    for (std::size_t kind = 1; kind < kAccessErrorKinds; ++kind) {
        list.emplace_back(kRemoteErrorNames[kind], counters_.remote_access_errors[kind]);
    }
    return list;
}

}  // namespace rnic::mem
