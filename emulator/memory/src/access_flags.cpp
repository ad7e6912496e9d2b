#include "rnic/memory/access_flags.hpp"

#include <cerrno>

namespace rnic::mem {

namespace {
constexpr AccessFlags kAccessKnown = ((kAccessFlushPersistent << 1) - 1) | kAccessOptionalRange;
// FLUSH_GLOBAL is served (a fence: the NIC's stores are in the target's memory); persistence
// needs persistent memory behind the region, which this device never has, so it is refused
// the way the kernel refuses it for a device without IB_DEVICE_FLUSH_PERSISTENT.
constexpr AccessFlags kAccessUnsupported = kAccessOnDemand | kAccessFlushPersistent;
}  // namespace

int check_mr_access_flags(AccessFlags flags) noexcept {
    // The IBA requires Local Write whenever Remote Write or Remote Atomic is granted: a
    // region the peer may change must be one the local consumer may change (ibv_reg_mr(3)).
    if ((flags & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0 && (flags & kAccessLocalWrite) == 0) {
        return EINVAL;
    }
    if ((flags & ~kAccessKnown) != 0) return EINVAL;
    if ((flags & kAccessUnsupported) != 0) return EOPNOTSUPP;
    return 0;
}

}  // namespace rnic::mem
