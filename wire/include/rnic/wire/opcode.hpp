// The one opcode table (IBA 9.2.1 + RoCEv2 annex A17 CNP). The parser and the builder both
// ask it which extension headers follow an opcode, in which order, and whether payload may
// follow; nothing else hard-codes per-opcode layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rnic::wire {

enum class Transport : uint8_t { RC, UC, RD, UD, CNP, None };

// Extension header bits, in wire order after the BTH.
enum ExtMask : uint16_t {
    kExtDeth = 1u << 0,
    kExtReth = 1u << 1,
    kExtAtomicEth = 1u << 2,
    kExtAeth = 1u << 3,
    kExtAtomicAckEth = 1u << 4,
    kExtImmDt = 1u << 5,
    kExtIeth = 1u << 6,
    kExtCnp = 1u << 7,  // the 16 reserved bytes of a CNP
    kExtFeth = 1u << 8,  // FLUSH (IBTA 1.5): comes first, before the RETH
};

// Position of a packet within its message.
enum class Segment : uint8_t { None, First, Middle, Last, Only };

// What the packet does, for dispatch by the transport.
enum class OpKind : uint8_t {
    Invalid,
    Send,
    RdmaWrite,
    RdmaReadRequest,
    RdmaReadResponse,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    AtomicWrite,  // IBTA 1.5: RETH + 8 bytes written as one, answered like a zero-length READ
    Flush,        // IBTA 1.5: FETH + RETH, no payload, answered like a zero-length READ
    Cnp,
};

struct OpcodeInfo {
    std::string_view name;  // e.g. "RC_SEND_FIRST", matching rxe's and Wireshark's naming
    Transport transport = Transport::None;
    OpKind kind = OpKind::Invalid;
    Segment segment = Segment::None;
    uint16_t ext = 0;         // ExtMask bits
    bool has_payload = false;  // payload may follow the headers
    uint8_t header_length = 0;  // BTH + all extension headers, bytes

    constexpr bool valid() const noexcept { return kind != OpKind::Invalid; }
    constexpr bool has(ExtMask m) const noexcept { return (ext & m) != 0; }
    constexpr bool is_request() const noexcept {
        return kind == OpKind::Send || kind == OpKind::RdmaWrite ||
               kind == OpKind::RdmaReadRequest || kind == OpKind::CompareSwap ||
               kind == OpKind::FetchAdd || kind == OpKind::AtomicWrite || kind == OpKind::Flush;
    }
    constexpr bool is_response() const noexcept {
        return kind == OpKind::RdmaReadResponse || kind == OpKind::Acknowledge ||
               kind == OpKind::AtomicAcknowledge;
    }
    constexpr bool starts_message() const noexcept {
        return segment == Segment::First || segment == Segment::Only;
    }
    constexpr bool ends_message() const noexcept {
        return segment == Segment::Last || segment == Segment::Only;
    }
};

// Opcode values by name, for code that emits packets.
namespace op {
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kRcReadRequest = 0x0C;
inline constexpr uint8_t kRcReadResponseFirst = 0x0D;
inline constexpr uint8_t kRcReadResponseMiddle = 0x0E;
inline constexpr uint8_t kRcReadResponseLast = 0x0F;
inline constexpr uint8_t kRcReadResponseOnly = 0x10;
inline constexpr uint8_t kRcAcknowledge = 0x11;
inline constexpr uint8_t kRcAtomicAcknowledge = 0x12;
inline constexpr uint8_t kRcCompareSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;
inline constexpr uint8_t kRcFlush = 0x1C;        // IBTA 1.5, Linux rxe since 6.2
inline constexpr uint8_t kRcAtomicWrite = 0x1D;  // IBTA 1.5, Linux rxe since 6.2
inline constexpr uint8_t kUcBase = 0x20;  // UC opcodes = RC opcode + 0x20 for SEND/WRITE
inline constexpr uint8_t kUcSendFirst = 0x20;
inline constexpr uint8_t kUcSendMiddle = 0x21;
inline constexpr uint8_t kUcSendLast = 0x22;
inline constexpr uint8_t kUcSendLastImm = 0x23;
inline constexpr uint8_t kUcSendOnly = 0x24;
inline constexpr uint8_t kUcSendOnlyImm = 0x25;
inline constexpr uint8_t kUcWriteFirst = 0x26;
inline constexpr uint8_t kUcWriteMiddle = 0x27;
inline constexpr uint8_t kUcWriteLast = 0x28;
inline constexpr uint8_t kUcWriteLastImm = 0x29;
inline constexpr uint8_t kUcWriteOnly = 0x2A;
inline constexpr uint8_t kUcWriteOnlyImm = 0x2B;
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

// Table lookup; invalid opcodes return an entry with valid() == false and name "INVALID".
const OpcodeInfo& opcode_info(uint8_t opcode) noexcept;

// Every valid opcode, ascending, for tests and tools.
const uint8_t* valid_opcodes(size_t* count) noexcept;

std::string_view transport_name(Transport t) noexcept;

}  // namespace rnic::wire
