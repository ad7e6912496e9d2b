// rdma_set_option (the kernel's ucma_set_option checks: lengths, levels, the QP type of an ACK
// timeout), and the ECE calls of RDMACM_1.3.
#include <cstring>

#include "daemon_calls.hpp"
#include "export.hpp"
#include "ids.hpp"

namespace rnic::rdmacm {

namespace {

int check_id_option(const Id& id, int optname, const void* optval, size_t optlen, uint32_t* value) {
    switch (optname) {
        case RDMA_OPTION_ID_TOS:
        case RDMA_OPTION_ID_ACK_TIMEOUT: {
            if (optlen != sizeof(uint8_t)) return EINVAL;
            uint8_t v;
            std::memcpy(&v, optval, sizeof v);
            *value = v;
            // Only connected QPs have an ACK timeout (the kernel asks the id's QP type).
            if (optname == RDMA_OPTION_ID_ACK_TIMEOUT && id.pub.ps == RDMA_PS_UDP) return EINVAL;
            if (optname == RDMA_OPTION_ID_ACK_TIMEOUT && id.pub.ps == RDMA_PS_IPOIB) return EINVAL;
            if (optname == RDMA_OPTION_ID_ACK_TIMEOUT && id.pub.ps == RDMA_PS_IB && id.pub.qp_type != IBV_QPT_RC)
                return EINVAL;
            return 0;
        }
        case RDMA_OPTION_ID_REUSEADDR:
        case RDMA_OPTION_ID_AFONLY: {
            if (optlen != sizeof(int)) return EINVAL;
            int v;
            std::memcpy(&v, optval, sizeof v);
            *value = v != 0;
            return 0;
        }
        default:
            return ENOSYS;
    }
}

// RDMA_OPTION_IB_PATH hands the kernel path records from ibacm; a RoCE route here is rnicd's
// to compute, and the CM messages carry no path record, so a well-formed one is refused as an
// unknown option would be.
int check_ib_option(int optname, const void* optval, size_t optlen) {
    if (optname != RDMA_OPTION_IB_PATH) return ENOSYS;
    if (optlen == 0 || optlen % sizeof(ibv_path_data) != 0) return EINVAL;
    (void)optval;
    return ENOSYS;
}

}  // namespace

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval, size_t optlen) try {
    if (cm_id == nullptr) return fail(EINVAL);
    if (optval == nullptr && optlen != 0) return fail(EFAULT);
    Id& id = *id_of(cm_id);
    uint32_t value = 0;
    int rc = ENOSYS;
    if (level == RDMA_OPTION_ID)
        rc = optval == nullptr ? EINVAL : check_id_option(id, optname, optval, optlen, &value);
    else if (level == RDMA_OPTION_IB)
        rc = check_ib_option(optname, optval, optlen);
    if (rc != 0) return fail(rc);
    if (id.parts.empty()) {
        // An idle id keeps it for the daemon id it gets later (every option is allowed there).
        id.options.push_back(PendingOption{static_cast<uint32_t>(level), static_cast<uint32_t>(optname), value});
        return 0;
    }
    for (const IdPart& p : id.parts)
        if ((rc = calls::set_option(*p.dev, p.handle, static_cast<uint32_t>(level), static_cast<uint32_t>(optname),
                                    value)) != 0)
            return fail(device_error(rc));
    id.options.push_back(PendingOption{static_cast<uint32_t>(level), static_cast<uint32_t>(optname), value});
    return 0;
} catch (...) {
    return fail(ENOMEM);
}

// ECE (enhanced connection establishment) options travel in the REQ/REP of Mellanox devices; the
// CM here carries none, so the remote side's always reads as "no ECE".
RNIC_EXPORT int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
    if (id == nullptr || id->qp != nullptr || ece == nullptr || ece->vendor_id == 0 || ece->comp_mask != 0)
        return fail(EINVAL);
    id_of(id)->local_ece = *ece;
    return 0;
}

RNIC_EXPORT int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
    if (id == nullptr || id->qp != nullptr || ece == nullptr) return fail(EINVAL);
    ece->vendor_id = id_of(id)->remote_ece.vendor_id;
    ece->options = id_of(id)->remote_ece.options;
    ece->comp_mask = 0;
    return 0;
}
