// Why a memory access was refused. Values, not exceptions: the engine turns them into a NAK
// or a completion status per packet.
//
// Mapping for the engine (IBA 9.7.5.2.x / rxe_resp.c): on the responder, InvalidKey,
// PdMismatch, AccessDenied, OutOfBounds, QpMismatch and Fault are all a Remote Access Error NAK; Misaligned
// (atomic) is an Invalid Request NAK. On the local side (SGE lkeys) every kind is a local
// protection error (IBV_WC_LOC_PROT_ERR).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rnic::mem {

enum class AccessError : uint8_t {
    None = 0,
    InvalidKey,    // no such MPT index, stale variant, or the MR was invalidated
    PdMismatch,    // the MR belongs to another protection domain than the QP
    AccessDenied,  // the MR lacks a right the operation needs
    OutOfBounds,   // [va, va + length) is not inside [iova, iova + mr length)
    Misaligned,    // an atomic on an address that is not 8-byte aligned
    Fault,         // the pages behind the region are gone (a client shrank its file): SIGBUS, caught
    QpMismatch,    // a type 2 memory window used through another QP than the one it is bound to
    // Not an error: an on-demand region's access is not done yet (OdpResult::Pending); ask again.
    // Not counted among the refusals (kAccessErrorKinds stops before it).
    Pending,
};

inline constexpr std::size_t kAccessErrorKinds = 8;

std::string_view access_error_name(AccessError error) noexcept;

}  // namespace rnic::mem
