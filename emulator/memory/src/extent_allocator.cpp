#include "rnic/memory/extent_allocator.hpp"

#include <iterator>

namespace rnic::mem {

ExtentAllocator::ExtentAllocator(uint64_t capacity) : capacity_(capacity), free_count_(capacity) {
    if (capacity > 0) free_.emplace(0, capacity);
}

std::optional<uint64_t> ExtentAllocator::allocate(uint64_t count) {
    if (count == 0 || count > free_count_) return std::nullopt;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < count) continue;
        const uint64_t first = it->first;
        const uint64_t rest = it->second - count;
        free_.erase(it);
        if (rest > 0) free_.emplace(first + count, rest);
        free_count_ -= count;
        return first;
    }
    return std::nullopt;
}

void ExtentAllocator::release(uint64_t first, uint64_t count) {
    if (count == 0) return;
    auto next = free_.lower_bound(first);
    uint64_t start = first;
    uint64_t length = count;
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == first) {
            start = prev->first;
            length += prev->second;
            free_.erase(prev);
        }
    }
    if (next != free_.end() && first + count == next->first) {
        length += next->second;
        free_.erase(next);
    }
    free_.emplace(start, length);
    free_count_ += count;
}

}  // namespace rnic::mem
