// 24-bit packet sequence number arithmetic (IBA 9.7.1). PSNs live on a circle of 2^24;
// "a is before b" means b lies in the half circle following a.
#pragma once

#include <cstdint>

namespace rnic::wire {

inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kPsnHalfWindow = 1u << 23;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) noexcept { return (psn + n) & kPsnMask; }

// Forward distance from `from` to `to` on the circle: how many increments of `from` reach `to`.
constexpr uint32_t psn_distance(uint32_t from, uint32_t to) noexcept {
    return (to - from) & kPsnMask;
}

// Signed difference a - b in (-2^23, 2^23]: negative when a is before b. Two PSNs exactly
// half the circle apart are each "after" the other; no valid window is that wide.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) noexcept {
    const uint32_t d = (a - b) & kPsnMask;
    return d > kPsnHalfWindow ? static_cast<int32_t>(d) - static_cast<int32_t>(1u << 24)
                              : static_cast<int32_t>(d);
}

constexpr bool psn_before(uint32_t a, uint32_t b) noexcept { return psn_diff(a, b) < 0; }
constexpr bool psn_after(uint32_t a, uint32_t b) noexcept { return psn_diff(a, b) > 0; }
constexpr bool psn_before_or_equal(uint32_t a, uint32_t b) noexcept { return psn_diff(a, b) <= 0; }

// True when psn lies in [first, first + count).
constexpr bool psn_in_window(uint32_t psn, uint32_t first, uint32_t count) noexcept {
    return psn_distance(first, psn) < count;
}

// The 24-bit message sequence number carried by AETH wraps the same way.
constexpr uint32_t msn_add(uint32_t msn, uint32_t n) noexcept { return psn_add(msn, n); }

}  // namespace rnic::wire
