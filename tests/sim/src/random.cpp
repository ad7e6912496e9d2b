#include "rnic/sim/random.hpp"

namespace rnic::sim {

bool Random::chance(double p) {
    if (!(p > 0)) return false;  // also catches NaN
    return next_unit() < p;
}

uint64_t Random::uniform(uint64_t lo, uint64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = hi - lo;
    if (span == ~uint64_t{0}) return next_u64();
    // Rejection keeps the draw exactly uniform; it loops more than once with probability < 1/2
    // per round, and the bound makes the loop finite no matter what.
    const uint64_t range = span + 1;
    const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % range);
    for (int round = 0; round < 64; ++round) {
        const uint64_t x = next_u64();
        if (x < limit) return lo + x % range;
    }
    return lo + next_u64() % range;
}

}  // namespace rnic::sim
