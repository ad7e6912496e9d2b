// Seeds for reproducible runs. Tests print the seed of every run with Catch2's INFO, so a
// failure names the seed that replays it, and RNIC_SIM_SEED overrides the tests' default seed.
#pragma once

#include <cstdint>
#include <string>

namespace rnic::sim {

// "seed=N", for INFO(seed_info(seed)).
std::string seed_info(uint64_t seed);

// The value of the environment variable RNIC_SIM_SEED when set to a decimal or 0x-prefixed
// number, otherwise `fallback`.
uint64_t seed_from_env(uint64_t fallback);

}  // namespace rnic::sim
