// Big-endian loads and stores on unaligned byte buffers.
// Byte-wise shifts instead of pointer casts: no alignment or aliasing UB, and g++/clang
// still fold them into a single load + bswap.
#pragma once

#include <cstdint>

namespace rnic::wire {

constexpr uint16_t load_be16(const uint8_t* p) noexcept {
    return static_cast<uint16_t>((uint16_t{p[0]} << 8) | p[1]);
}
constexpr uint32_t load_be24(const uint8_t* p) noexcept {
    return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
}
constexpr uint32_t load_be32(const uint8_t* p) noexcept {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
constexpr uint64_t load_be64(const uint8_t* p) noexcept {
    return (uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}

constexpr void store_be16(uint8_t* p, uint16_t v) noexcept {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
constexpr void store_be24(uint8_t* p, uint32_t v) noexcept {
    p[0] = static_cast<uint8_t>(v >> 16);
    p[1] = static_cast<uint8_t>(v >> 8);
    p[2] = static_cast<uint8_t>(v);
}
constexpr void store_be32(uint8_t* p, uint32_t v) noexcept {
    p[0] = static_cast<uint8_t>(v >> 24);
    p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8);
    p[3] = static_cast<uint8_t>(v);
}
constexpr void store_be64(uint8_t* p, uint64_t v) noexcept {
    store_be32(p, static_cast<uint32_t>(v >> 32));
    store_be32(p + 4, static_cast<uint32_t>(v));
}

// The ICRC is the one little-endian field of RoCEv2.
constexpr uint32_t load_le32(const uint8_t* p) noexcept {
    return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}
constexpr void store_le32(uint8_t* p, uint32_t v) noexcept {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
    p[2] = static_cast<uint8_t>(v >> 16);
    p[3] = static_cast<uint8_t>(v >> 24);
}

}  // namespace rnic::wire
