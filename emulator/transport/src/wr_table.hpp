// What each send work-request opcode is and which QP types accept it: one table that the checks
// at post time, the requester (which packets to send) and the completer (what a completion
// reports) all ask, in the way rxe keeps its WR-opcode info table.
#pragma once

#include <array>
#include <cstdint>

#include "rnic/transport/verbs_types.hpp"

namespace rnic::transport {

// LocalInv and BindMw are local operations: executed by the requester when they reach the head of
// the send queue, no packet, completed at once (rxe_do_local_ops).
enum class WrClass : uint8_t { Unsupported, Send, Write, Read, Atomic, LocalInv, BindMw };

struct WrInfo {
    WrClass kind = WrClass::Unsupported;
    bool on_rc = false;
    bool on_uc = false;
    bool on_ud = false;
    bool with_imm = false;        // the last packet carries ImmDt
    bool with_inv = false;        // SEND_WITH_INV: the last packet carries IETH
    bool inline_allowed = false;  // IBV_SEND_INLINE gathers the data into the WQE
    WcOpcode completes_as = WcOpcode::Send;

    bool read_or_atomic() const noexcept { return kind == WrClass::Read || kind == WrClass::Atomic; }
    // The local buffers receive data (READ response, atomic original): they need LOCAL_WRITE.
    bool writes_local() const noexcept { return read_or_atomic(); }
    bool allowed_on(QpType t) const noexcept {
        return (t == QpType::Rc && on_rc) || (t == QpType::Uc && on_uc) || (t == QpType::Ud && on_ud);
    }
};

namespace detail {
constexpr std::array<WrInfo, 16> make_wr_table() {
    std::array<WrInfo, 16> t{};
    constexpr bool Y = true, N = false;
    // clang-format off
    //                                        kind               RC UC UD imm inv inline completes as
    t[uint8_t(WrOpcode::RdmaWrite)]         = {WrClass::Write,    Y, Y, N, N,  N,  Y,     WcOpcode::RdmaWrite};
    t[uint8_t(WrOpcode::RdmaWriteWithImm)]  = {WrClass::Write,    Y, Y, N, Y,  N,  Y,     WcOpcode::RdmaWrite};
    t[uint8_t(WrOpcode::Send)]              = {WrClass::Send,     Y, Y, Y, N,  N,  Y,     WcOpcode::Send};
    t[uint8_t(WrOpcode::SendWithImm)]       = {WrClass::Send,     Y, Y, Y, Y,  N,  Y,     WcOpcode::Send};
    t[uint8_t(WrOpcode::SendWithInv)]       = {WrClass::Send,     Y, N, N, N,  Y,  Y,     WcOpcode::Send};
    t[uint8_t(WrOpcode::RdmaRead)]          = {WrClass::Read,     Y, N, N, N,  N,  N,     WcOpcode::RdmaRead};
    t[uint8_t(WrOpcode::AtomicCmpAndSwp)]   = {WrClass::Atomic,   Y, N, N, N,  N,  N,     WcOpcode::CompSwap};
    t[uint8_t(WrOpcode::AtomicFetchAndAdd)] = {WrClass::Atomic,   Y, N, N, N,  N,  N,     WcOpcode::FetchAdd};
    t[uint8_t(WrOpcode::LocalInv)]          = {WrClass::LocalInv, Y, Y, N, N,  N,  N,     WcOpcode::LocalInv};
    t[uint8_t(WrOpcode::BindMw)]            = {WrClass::BindMw,   Y, Y, N, N,  N,  N,     WcOpcode::BindMw};
    // clang-format on
    return t;
}
inline constexpr std::array<WrInfo, 16> kWrTable = make_wr_table();
}  // namespace detail

// Opcodes outside the table (TSO, flush, ...) are Unsupported on every QP type.
constexpr const WrInfo& wr_info(WrOpcode op) noexcept {
    const auto i = static_cast<uint8_t>(op);
    return detail::kWrTable[i < detail::kWrTable.size() ? i : 12];
}

}  // namespace rnic::transport
