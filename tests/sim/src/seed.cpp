#include "rnic/sim/seed.hpp"

#include <cerrno>
#include <cstdlib>

namespace rnic::sim {

std::string seed_info(uint64_t seed) {
    return "seed=" + std::to_string(seed);
}

uint64_t seed_from_env(uint64_t fallback) {
    const char* text = std::getenv("RNIC_SIM_SEED");
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 0);
    // A typo must not silently run some other seed than the one asked for.
    if (errno != 0 || end == text || *end != '\0') return fallback;
    return value;
}

}  // namespace rnic::sim
