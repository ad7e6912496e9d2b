// The hostile client's program: the fuzz input read front to back as actions, each an action
// byte and its arguments in the order fuzz_host_service.cpp reads them. Past the end every read
// is 0, so any input is a valid program. ProgramWriter writes the same layout for the seed corpus
// (host_seeds.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rnic::host::fuzz {

enum class Action : uint8_t {
    OpenSession,  // u8 variant (0 Hello, 1 no Hello, 2 Hello with a descriptor it does not take)
    Control,      // u8 session, u8 op, then the op's fields (see the interpreter)
    RawMessage,   // u8 session, u8 length, bytes, u8 flags (1: valid header), u8 fd kinds
    Setup,        // u8 session, u8 buffer pages, size cqe: PD, registered buffer, CQ
    QpPair,       // u8 session, u8 type (RC, UC, UD), u8 gid: two QPs connected to each other
    PostSend,     // u8 session, u8 qp, WQE fields, u8 publish mode
    PostRecv,     // u8 session, u8 qp, u8 srq?, u8 sges, SGE fields, u8 publish mode
    SetIndex,     // u8 session, u8 target, u8 mode, u32 value
    CqWrite,      // u8 session, u8 cq, u8 field, u32 value
    Doorbell,     // u8 session, u8 mode, u16 slot, u64 value
    Kick,         // u8 session
    Turns,        // u8 count, u8 step
    PartialTurn,  // u8 which
    Disconnect,   // u8 session
    Garbage,      // u8 session, u8 region, u16 offset, u8 length, bytes
    PollCq,       // u8 session, u8 cq
    Inject,       // u8 kind: 0 u8 length/4, bytes; 1 the peer's ARP reply; 2 u8 session, a RoCEv2 frame
    Shrink,       // u8 session, u8 segment, u8 pages: ftruncate a shared segment under its MRs
    // The connection manager (cm_actions.hpp has each layout).
    CmControl,    // u8 session, u8 op, the op's fields, u8 body shape: one CM op
    CmListen,     // u8 session, u8 channel, port space, QP type, u8 options, address, backlog
    CmConnect,    // u8 session, u8 channel, port space, QP type, u8 options, 2 addresses, timeout, reactions
    CmRespond,    // u8 session, u8 channel, reactions: take events and answer them
    CmMad,        // a CM MAD from the wire: attribute, route, ids, fields, mutations
    CmTime,       // u8 count, u8 mode: the clock jumps to the CM's next deadline (or further)
    CmChannelIo,  // u8 session, u8 channel, u8 mode, u8 count: the channel sockets' bytes
    Count
};

class ProgramReader {
public:
    explicit ProgramReader(std::span<const uint8_t> data) : data_(data) {}
    bool done() const { return pos_ >= data_.size(); }
    uint8_t u8() { return pos_ < data_.size() ? data_[pos_++] : 0; }
    uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
    uint32_t u32() { return u16() | uint32_t{u16()} << 16; }
    uint64_t u64() { return u32() | uint64_t{u32()} << 32; }
    // Up to `n` bytes (fewer at the end).
    std::span<const uint8_t> bytes(size_t n) {
        const size_t k = std::min(n, data_.size() - std::min(pos_, data_.size()));
        const auto out = data_.subspan(std::min(pos_, data_.size()), k);
        pos_ += k;
        return out;
    }

private:
    std::span<const uint8_t> data_;
    size_t pos_ = 0;
};

class ProgramWriter {
public:
    ProgramWriter& action(Action a) { return u8(static_cast<uint8_t>(a)); }
    ProgramWriter& u8(uint8_t v) {
        bytes.push_back(v);
        return *this;
    }
    ProgramWriter& u16(uint16_t v) { return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8)); }
    ProgramWriter& u32(uint32_t v) { return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16)); }
    ProgramWriter& u64(uint64_t v) { return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32)); }
    ProgramWriter& raw(std::span<const uint8_t> b) {
        bytes.insert(bytes.end(), b.begin(), b.end());
        return *this;
    }
    std::vector<uint8_t> bytes;
};

// Selectors, shared by both sides.
// A handle: below kPickOther, object (b % count) of the acting session; kPickOther then a u8
// session and a u8 index: another session's object; kPickRaw then a u32: any value.
inline constexpr uint8_t kPickOther = 0xE0;
inline constexpr uint8_t kPickRaw = 0xF0;
// CM ids only: from kPickLive a u8 index into every id the daemon's CM holds (any session's,
// connection requests not yet taken included); kPickRaw up to it is then a u32.
inline constexpr uint8_t kPickLive = 0xF8;
// A size: below kSizeShift the value itself; from kSizeShift, 1 << (b - kSizeShift) (at most
// 1 << 31); 0xFF then a u32.
inline constexpr uint8_t kSizeShift = 0xC0;
inline constexpr uint8_t kSizeRaw = 0xFF;

}  // namespace rnic::host::fuzz
