// Helpers shared by the memory tests: page-aligned buffers and a table with small limits.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "rnic/memory/memory_table.hpp"

namespace rnic::mem::test {

inline constexpr uint32_t kPd = 7;
inline constexpr AccessFlags kAllRights =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

// A zeroed, 4 KiB-aligned buffer, so tests choose exactly where in a page a region starts.
class PageBuffer {
public:
    explicit PageBuffer(std::size_t pages)
        : size_(pages * kPageSize), data_(static_cast<uint8_t*>(std::aligned_alloc(kPageSize, size_))) {
        std::memset(data_.get(), 0, size_);
    }
    uint8_t* data() const noexcept { return data_.get(); }
    uint8_t* page(std::size_t i) const noexcept { return data_.get() + i * kPageSize; }
    std::size_t size() const noexcept { return size_; }
    std::span<uint8_t> span() const noexcept { return {data_.get(), size_}; }

private:
    struct Free {
        void operator()(uint8_t* p) const noexcept { std::free(p); }
    };
    std::size_t size_;
    std::unique_ptr<uint8_t, Free> data_;
};

inline MemoryConfig small_config() {
    MemoryConfig config;
    config.max_mrs = 8;
    config.max_mr_size = uint64_t{1} << 20;
    config.max_mtt_entries = 512;
    return config;
}

// A byte pattern with no period a page-offset bug could hide behind.
inline uint8_t pattern_byte(std::size_t i, uint8_t seed = 0) {
    return static_cast<uint8_t>((i * 131u + (i >> 8) * 7u + seed) & 0xFF);
}

}  // namespace rnic::mem::test
