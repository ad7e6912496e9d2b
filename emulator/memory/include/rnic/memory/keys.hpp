// L_Key/R_Key layout: the MPT index in the upper 24 bits, a variant byte in the lower 8.
// Every registration of an index gets a new variant, so a key kept past deregistration
// names a different variant than the entry's current one and fails (as rxe and mlx keys do).
#pragma once

#include <cstdint>

namespace rnic::mem {

inline constexpr uint32_t kKeyVariantBits = 8;
inline constexpr uint32_t kMaxMptIndex = (1u << (32 - kKeyVariantBits)) - 1;

// lkey and rkey are the same value, as in Linux rxe; the access rights decide what the peer
// may do, not which of the two numbers it holds.
struct MrKeys {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

constexpr uint32_t make_key(uint32_t mpt_index, uint8_t variant) noexcept {
    return (mpt_index << kKeyVariantBits) | variant;
}
constexpr uint32_t key_index(uint32_t key) noexcept {
    return key >> kKeyVariantBits;
}
constexpr uint8_t key_variant(uint32_t key) noexcept {
    return static_cast<uint8_t>(key & 0xFFu);
}

}  // namespace rnic::mem
