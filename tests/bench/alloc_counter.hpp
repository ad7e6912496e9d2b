// Counts every heap allocation the process makes through operator new (all its forms), for the
// benchmarks that prove the data path allocates nothing per work request. Linking
// alloc_counter.cpp replaces the global operators; the count is process-wide (every thread).
#pragma once

#include <cstdint>

namespace rnic::bench {

uint64_t allocations() noexcept;

}  // namespace rnic::bench
