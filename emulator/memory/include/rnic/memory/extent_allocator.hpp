// First-fit allocator of index ranges in [0, capacity), the way an RNIC driver carves MTT
// segments out of one table. Control path only (registration), so a std::map of free
// extents is fine; adjacent free extents are merged on release.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace rnic::mem {

class ExtentAllocator {
public:
    explicit ExtentAllocator(uint64_t capacity);

    // The first index of `count` consecutive free indexes (lowest such range), or nullopt.
    std::optional<uint64_t> allocate(uint64_t count);
    // Gives back a range obtained from allocate(); the caller passes the same first/count.
    void release(uint64_t first, uint64_t count);

    uint64_t capacity() const noexcept { return capacity_; }
    uint64_t free_count() const noexcept { return free_count_; }

private:
    uint64_t capacity_;
    uint64_t free_count_;
    std::map<uint64_t, uint64_t> free_;  // first index -> length
};

}  // namespace rnic::mem
