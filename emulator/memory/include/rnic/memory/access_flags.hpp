// Memory access rights with the exact values of rdma-core's enum ibv_access_flags (and the
// kernel's ib_uverbs_access_flags), so the verbs layer passes an application's flags through
// unchanged.
#pragma once

#include <cstdint>

namespace rnic::mem {

using AccessFlags = uint32_t;

inline constexpr AccessFlags kAccessLocalWrite = 1u << 0;        // IBV_ACCESS_LOCAL_WRITE
inline constexpr AccessFlags kAccessRemoteWrite = 1u << 1;       // IBV_ACCESS_REMOTE_WRITE
inline constexpr AccessFlags kAccessRemoteRead = 1u << 2;        // IBV_ACCESS_REMOTE_READ
inline constexpr AccessFlags kAccessRemoteAtomic = 1u << 3;      // IBV_ACCESS_REMOTE_ATOMIC
inline constexpr AccessFlags kAccessMwBind = 1u << 4;            // IBV_ACCESS_MW_BIND
inline constexpr AccessFlags kAccessZeroBased = 1u << 5;         // IBV_ACCESS_ZERO_BASED
inline constexpr AccessFlags kAccessOnDemand = 1u << 6;          // IBV_ACCESS_ON_DEMAND
inline constexpr AccessFlags kAccessHugeTlb = 1u << 7;           // IBV_ACCESS_HUGETLB
inline constexpr AccessFlags kAccessFlushGlobal = 1u << 8;       // IBV_ACCESS_FLUSH_GLOBAL
inline constexpr AccessFlags kAccessFlushPersistent = 1u << 9;   // IBV_ACCESS_FLUSH_PERSISTENT
inline constexpr AccessFlags kAccessRelaxedOrdering = 1u << 20;  // IBV_ACCESS_RELAXED_ORDERING
// IBV_ACCESS_OPTIONAL_RANGE (bits 20-29): hints a device may ignore instead of failing.
inline constexpr AccessFlags kAccessOptionalRange = 0x3FFu << 20;

inline constexpr AccessFlags kAccessRemoteAny = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

// errno for a registration asking for `flags`: 0, EINVAL (unknown bits, or remote write/atomic
// without local write), EOPNOTSUPP (on-demand paging, FLUSH_PERSISTENT: this device has no
// persistent memory). The same answers the kernel's ib_check_mr_access gives for a device
// whose caps have FLUSH_GLOBAL but not FLUSH_PERSISTENT or ODP.
int check_mr_access_flags(AccessFlags flags) noexcept;

// The rights an MR keeps: optional hints dropped, since nothing here acts on them.
constexpr AccessFlags effective_access_flags(AccessFlags flags) noexcept {
    return flags & ~kAccessOptionalRange;
}

}  // namespace rnic::mem
