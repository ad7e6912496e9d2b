// The one source of randomness of a simulation. The helpers below are written out instead of
// using <random>'s distributions because those are implementation-defined: a seed must replay
// the same run whichever standard library built the test.
#pragma once

#include <cstdint>
#include <random>

namespace rnic::sim {

class Random {
public:
    explicit Random(uint64_t seed) : engine_(seed) {}

    uint64_t next_u64() { return engine_(); }
    // Uniform in [0, 1).
    double next_unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
    // True with probability p. Draws nothing when p <= 0, so a fault-free link does not shift
    // the random stream seen by the others.
    bool chance(double p);
    // Uniform in [lo, hi]; lo when hi <= lo (no draw).
    uint64_t uniform(uint64_t lo, uint64_t hi);

private:
    std::mt19937_64 engine_;
};

}  // namespace rnic::sim
