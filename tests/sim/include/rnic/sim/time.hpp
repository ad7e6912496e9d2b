// Virtual time for the simulator. Everything is in nanoseconds since the start of a run; the
// wall clock is never read, so a run depends only on its inputs and its seed.
#pragma once

#include <cstdint>
#include <limits>

namespace rnic::sim {

using TimeNs = uint64_t;

inline constexpr TimeNs kNanosecond = 1;
inline constexpr TimeNs kMicrosecond = 1000;
inline constexpr TimeNs kMillisecond = 1000 * kMicrosecond;
inline constexpr TimeNs kSecond = 1000 * kMillisecond;
inline constexpr TimeNs kTimeNever = std::numeric_limits<TimeNs>::max();

// Deadlines near kTimeNever must not wrap around into the past.
constexpr TimeNs saturating_add(TimeNs a, TimeNs b) noexcept {
    return b > kTimeNever - a ? kTimeNever : a + b;
}

}  // namespace rnic::sim
