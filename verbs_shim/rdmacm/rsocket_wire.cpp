#include "rsocket_wire.hpp"

#include <byteswap.h>

#include <cstring>

namespace rnic::rdmacm::rsock {

namespace {

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void put64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t get16(const uint8_t* p) {
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint32_t get32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
    return v;
}
uint64_t get64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

void put_sge(uint8_t* p, const WireSge& s) {
    put64(p, s.addr);
    put32(p + 8, s.key);
    put32(p + 12, s.length);
}
WireSge get_sge(const uint8_t* p) {
    return WireSge{get64(p), get32(p + 8), get32(p + 12)};
}

}  // namespace

// Layout: version, flags, credits (2), reserved (3), target_iomap_size, target_sgl (16),
// data_buf (16).
std::array<uint8_t, kConnDataSize> encode_conn_data(const ConnData& c) {
    std::array<uint8_t, kConnDataSize> out{};
    out[0] = c.version;
    out[1] = c.flags;
    put16(&out[2], c.credits);
    out[7] = c.target_iomap_size;
    put_sge(&out[8], c.target_sgl);
    put_sge(&out[24], c.data_buf);
    return out;
}

std::optional<ConnData> decode_conn_data(std::span<const uint8_t> bytes) {
    if (bytes.size() < kConnDataSize) return std::nullopt;
    ConnData c;
    c.version = bytes[0];
    c.flags = bytes[1];
    c.credits = get16(&bytes[2]);
    c.target_iomap_size = bytes[7];
    c.target_sgl = get_sge(&bytes[8]);
    c.data_buf = get_sge(&bytes[24]);
    return c;
}

WireSge swap_sge(const WireSge& s) {
    return WireSge{bswap_64(s.addr), bswap_32(s.key), bswap_32(s.length)};
}

WireIomap swap_iomap(const WireIomap& m) {
    return WireIomap{bswap_64(m.offset), swap_sge(m.sge)};
}

int value_to_scale(int value, int bits) {
    return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

int scale_to_value(int scale, int bits) {
    return scale <= (1 << (bits - 1)) ? scale : (scale & ~(1 << (bits - 1))) << bits;
}

}  // namespace rnic::rdmacm::rsock
