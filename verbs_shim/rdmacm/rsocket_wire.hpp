// What an rsocket puts on the wire, protocol version 1 as rdma-core's librdmacm speaks it
// (docs/rdma_cm.md, "rsockets"): the immediate data of every RDMA WRITE WITH IMMEDIATE (an op in
// the top three bits, its argument below), the 40 bytes of connection data in the CM REQ/REP
// private data, and the 16-byte SGEs and 24-byte iomap entries a peer RDMA-writes into our
// target buffer list. Pure functions: unit-tested against the golden rxe capture.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rnic::rdmacm::rsock {

enum class Op : uint8_t {
    Data = 0,          // argument: bytes written into the receive buffer
    DataMoreRsvd = 1,  // reserved by rdma-core, never sent
    Write = 2,         // riowrite's plain RDMA WRITE: only in our own work request ids
    DraMoreRsvd = 3,   // reserved
    Sgl = 4,           // argument: the sequence number up to which the peer may send
    Rsvd = 5,          // reserved
    IomapSgl = 6,      // argument: the iomap entry just written
    Ctrl = 7,          // argument: a Ctrl value
};

enum class Ctrl : uint32_t { Disconnect = 0, Keepalive = 1, Shutdown = 2 };

inline constexpr uint32_t kImmArgMask = 0x1FFFFFFF;

constexpr uint32_t make_imm(Op op, uint32_t arg) {
    return (static_cast<uint32_t>(op) << 29) | (arg & kImmArgMask);
}
constexpr Op imm_op(uint32_t imm) {
    return static_cast<Op>(imm >> 29);
}
constexpr uint32_t imm_arg(uint32_t imm) {
    return imm & kImmArgMask;
}

// An SGE a peer writes into our target buffer list: addr, key, length in the receiver's byte
// order (the writer swaps them when the two hosts' orders differ: RS_CONN_FLAG_NET).
struct WireSge {
    uint64_t addr;
    uint32_t key;
    uint32_t length;
};
static_assert(sizeof(WireSge) == 16);

// An iomap entry: where the peer's riowrite offsets land in our memory.
struct WireIomap {
    uint64_t offset;
    WireSge sge;
};
static_assert(sizeof(WireIomap) == 24);

// The target buffer list holds this many SGEs, then the iomap entries.
inline constexpr uint32_t kTargetSgeCount = 2;

inline constexpr uint8_t kConnVersion = 1;
inline constexpr uint8_t kConnFlagNet = 1 << 0;    // the sender is big-endian
inline constexpr uint8_t kConnFlagIomap = 1 << 1;  // the sender's target list has iomap room
inline constexpr size_t kConnDataSize = 40;

// The connection data each side sends (REQ after the rdma_cm header, REP at offset 0), in host
// order here; on the wire every multi-byte field is big-endian.
struct ConnData {
    uint8_t version = kConnVersion;
    uint8_t flags = 0;
    uint16_t credits = 0;           // the sender's receive queue size
    uint8_t target_iomap_size = 0;  // iomap entries, scaled (value_to_scale(n, 8))
    WireSge target_sgl{};           // the sender's target buffer list (length: kTargetSgeCount)
    WireSge data_buf{};             // the first half of the sender's receive buffer
};

std::array<uint8_t, kConnDataSize> encode_conn_data(const ConnData& c);
// nullopt when fewer than kConnDataSize bytes are given (the version is the caller's to check).
std::optional<ConnData> decode_conn_data(std::span<const uint8_t> bytes);

WireSge swap_sge(const WireSge& s);
WireIomap swap_iomap(const WireIomap& m);

// rdma-core's compressed sizes: values up to 2^(bits-1) as they are, larger ones as the top bit
// and value >> bits (so 8 bits reach 127 << 8).
int value_to_scale(int value, int bits);
int scale_to_value(int scale, int bits);

// Sequence numbers of the credit protocol are 16 bits and wrap; `a` is at or past `b` when the
// signed distance is not negative.
constexpr bool seq_reached(uint16_t a, uint16_t b) {
    return static_cast<int16_t>(static_cast<uint16_t>(a - b)) >= 0;
}

}  // namespace rnic::rdmacm::rsock
