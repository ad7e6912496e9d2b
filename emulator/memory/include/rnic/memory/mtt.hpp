// The memory translation table: one global array of page entries, each the host address
// (in this process) of one 4 KiB page of some region. A region owns a consecutive range of
// entries; its page i is entry mtt_first + i, which is also the MTT cache key.
//
// Translation always goes through these entries page by page: in the daemon a region's pages
// are its mapping of a client's shared memory, and nothing promises they are contiguous.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "rnic/memory/extent_allocator.hpp"

namespace rnic::mem {

inline constexpr uint64_t kPageShift = 12;
inline constexpr uint64_t kPageSize = uint64_t{1} << kPageShift;
inline constexpr uint64_t kPageMask = kPageSize - 1;

// Pages touched by `length` (> 0) bytes starting `first_page_offset` bytes into a page.
constexpr uint64_t pages_spanned(uint64_t first_page_offset, uint64_t length) noexcept {
    return (first_page_offset + length - 1) / kPageSize + 1;
}

class Mtt {
public:
    explicit Mtt(uint64_t max_entries) : allocator_(max_entries) {}

    std::optional<uint64_t> allocate(uint64_t pages);
    void release(uint64_t first, uint64_t pages);

    void set_page(uint64_t index, uintptr_t page_address) noexcept { entries_[index] = page_address; }
    uintptr_t page(uint64_t index) const noexcept { return entries_[index]; }

    uint64_t max_entries() const noexcept { return allocator_.capacity(); }
    uint64_t entries_in_use() const noexcept { return allocator_.capacity() - allocator_.free_count(); }

private:
    ExtentAllocator allocator_;
    std::vector<uintptr_t> entries_;  // grows to the highest range handed out, never past max
};

}  // namespace rnic::mem
