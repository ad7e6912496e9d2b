// Multicast: rdma_join_multicast(_ex), rdma_leave_multicast. rnicd answers the join with
// ENOSYS for now, which is what Linux's rdma_join_multicast returns for a device that can do
// neither IB nor RoCE multicast; the application gets -1 with that errno. A join the daemon
// accepts is kept on the id; its MULTICAST_JOIN event (events.cpp) attaches the id's QP.
#include <cstring>

#include "daemon_calls.hpp"
#include "export.hpp"
#include "ids.hpp"

namespace rnic::rdmacm {

namespace {

int join(Id& id, const sockaddr* addr, uint16_t join_flags, void* context) try {
    const auto group = to_cm(addr);
    if (!group) return EINVAL;
    // Linux wants the id bound to a device or its address resolved.
    const IdPart* part = device_part(id);
    if (part == nullptr) return EINVAL;
    Multicast mc;
    mc.group = *group;
    std::memcpy(&mc.addr, addr, address_length(addr));
    mc.context = context;
    mc.join_flags = join_flags;
    if (const int rc = calls::join_multicast(*part->dev, part->handle, join_flags, *group, &mc.handle); rc != 0)
        return device_error(rc);
    {
        std::lock_guard lock(id.mut);
        id.multicasts.push_back(mc);
    }
    return complete(id) == 0 ? 0 : errno;
} catch (...) {
    return ENOMEM;
}

}  // namespace

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
    if (id == nullptr || attr == nullptr) return fail(EINVAL);
    if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return fail(ENOTSUP);
    if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
    if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
        return fail(EINVAL);
    if (address_length(attr->addr) == 0) return fail(EINVAL);
    const int rc = join(*id_of(id), attr->addr, static_cast<uint16_t>(attr->join_flags), context);
    return rc == 0 ? 0 : fail(rc);
}

RNIC_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
    if (id == nullptr || address_length(addr) == 0) return fail(EINVAL);
    const int rc = join(*id_of(id), addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
    return rc == 0 ? 0 : fail(rc);
}

RNIC_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
    const socklen_t length = address_length(addr);
    if (cm_id == nullptr || length == 0) return fail(EINVAL);
    Id& id = *id_of(cm_id);
    Multicast mc;
    {
        std::lock_guard lock(id.mut);
        auto it = id.multicasts.begin();
        while (it != id.multicasts.end() && std::memcmp(&it->addr, addr, length) != 0) ++it;
        if (it == id.multicasts.end()) return fail(EADDRNOTAVAIL);
        mc = *it;
        id.multicasts.erase(it);
    }
    if (cm_id->qp != nullptr && mc.join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
        ibv_detach_mcast(cm_id->qp, &mc.mgid, mc.mlid);
    const IdPart* part = device_part(id);
    if (part == nullptr) return fail(EINVAL);
    const int rc = calls::leave_multicast(*part->dev, part->handle, mc.group);
    return rc == 0 ? 0 : fail(device_error(rc));
}
