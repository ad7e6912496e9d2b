// What ibv_query_device's device_cap_flags and ibv_query_port's port_cap_flags claim: one line
// per capability, claimed only when rnicd implements it (docs/fidelity.md compares them with
// Linux rxe's). Adding a capability is flipping its line to `true` once it works.
#pragma once

#include <cstdint>

namespace rnic::host::server {

struct Capability {
    uint64_t bit;  // enum ibv_device_cap_flags / ibv_port_cap_flags value
    bool offered;
    const char* what;  // why it is or is not claimed
};

// rxe (kernel 6.1) claims 0x01223c76: the bits below marked "rxe". The others are not claimed by
// rxe either.
inline constexpr Capability kDeviceCaps[] = {
    {1u << 1, false, "BAD_PKEY_CNTR (rxe): the port's P_Key violation counter is not reported"},
    {1u << 2, false, "BAD_QKEY_CNTR (rxe): the port's Q_Key violation counter is not reported"},
    {1u << 4, false, "AUTO_PATH_MIG (rxe): no alternate paths (ibv_modify_qp IBV_QP_ALT_PATH: EOPNOTSUPP)"},
    {1u << 5, false, "CHANGE_PHY_PORT (rxe): one port, no port change to offer"},
    {1u << 6, false, "UD_AV_PORT_ENFORCE (rxe): one port"},
    {1u << 10, false, "PORT_ACTIVE_EVENT (rxe): rnicd raises no port events"},
    {1u << 11, true, "SYS_IMAGE_GUID (rxe): sys_image_guid is the node GUID"},
    {1u << 12, true, "RC_RNR_NAK_GEN (rxe): the responder sends RNR NAKs"},
    {1u << 13, false, "SRQ_RESIZE (rxe): ibv_modify_srq IBV_SRQ_MAX_WR is refused"},
    {1u << 17, true, "MEM_WINDOW (rxe): memory windows, type 1 and 2 (docs/transport.md)"},
    {1u << 21, false, "MEM_MGT_EXTENSIONS (rxe): no fast registration (IB_WR_REG_MR is a kernel verb)"},
    {1u << 24, true, "MEM_WINDOW_TYPE_2B (rxe): type 2B windows, bound through IBV_WR_BIND_MW"},
};

inline constexpr Capability kPortCaps[] = {
    {1u << 16, true, "CM_SUP (rxe): rnicd runs the IB CM (rdma_cm, docs/rdma_cm.md)"},
    {1u << 26, false, "IP_BASED_GIDS: rxe does not claim it (a ConnectX driver flag)"},
};

template <size_t N>
constexpr uint64_t claimed(const Capability (&caps)[N]) {
    uint64_t flags = 0;
    for (const Capability& c : caps)
        if (c.offered) flags |= c.bit;
    return flags;
}

}  // namespace rnic::host::server
