#include "rnic/memory/mtt.hpp"

#include <algorithm>

namespace rnic::mem {

std::optional<uint64_t> Mtt::allocate(uint64_t pages) {
    const std::optional<uint64_t> first = allocator_.allocate(pages);
    if (first && entries_.size() < *first + pages) entries_.resize(*first + pages);
    return first;
}

void Mtt::release(uint64_t first, uint64_t pages) {
    // Stale addresses must not survive into the next region that gets these entries.
    std::fill_n(entries_.begin() + static_cast<std::ptrdiff_t>(first), pages, uintptr_t{0});
    allocator_.release(first, pages);
}

}  // namespace rnic::mem
