// Address handles (UD), including the reply address a UD receiver builds from a completion and
// the 40-byte GRH area in front of the payload. Multicast is not offered.
#include <arpa/inet.h>

#include <cstring>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

using namespace rnic::shim;

namespace {

constexpr size_t kIpv4InGrh = 20;  // RoCEv2 over IPv4: 20 bytes of zeros, then the IPv4 header

// Which of our GIDs a received packet was addressed to: the sgid index for the reply.
int own_gid_index(ibv_context* context, const uint8_t (&gid)[16]) {
    const auto& hello = hello_of(context);
    for (uint32_t i = 0; i < hello.gid_count; ++i)
        if (std::memcmp(hello.gids[i], gid, 16) == 0) return static_cast<int>(i);
    return -1;
}

void ipv4_mapped(uint8_t (&gid)[16], const uint8_t* ipv4) {
    std::memset(gid, 0, 10);
    gid[10] = gid[11] = 0xff;
    std::memcpy(gid + 12, ipv4, 4);
}

}  // namespace

RNIC_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    if (pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
    auto* a = new (std::nothrow) Ah();
    if (a == nullptr) return fail_null<ibv_ah>(ENOMEM);
    auto r = conn_of(pd->context).create_ah(pd_of(pd)->impl, to_abi(*attr));
    if (!r) {
        delete a;
        trace_failure("ibv_create_ah", r.error());
        return fail_null<ibv_ah>(r.error());
    }
    a->impl = *r;
    a->ah.context = pd->context;
    a->ah.pd = pd;
    a->ah.handle = (*r)->handle;
    return &a->ah;
}

RNIC_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
    if (ah == nullptr) return EINVAL;
    if (const int rc = conn_of(ah->context).destroy_ah(ah_of(ah)->impl); rc != 0) return rc;
    delete ah_of(ah);
    return 0;
}

// The GRH area of a RoCEv2 UD receive holds the IPv6 header, or for IPv4 the IPv4 header in its
// last 20 bytes (what rxe and mlx5 write). The reply goes back to the sender's address from our
// address the packet came to.
RNIC_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                    ibv_ah_attr* ah_attr) {
    if (context == nullptr || wc == nullptr || ah_attr == nullptr || port_num != 1) return fail_minus_one(EINVAL);
    *ah_attr = {};
    ah_attr->dlid = wc->slid;
    ah_attr->sl = wc->sl;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    ah_attr->port_num = port_num;
    // RoCE addresses by GID only: without the GRH there is no way back.
    if (!(wc->wc_flags & IBV_WC_GRH) || grh == nullptr) return fail_minus_one(EINVAL);
    const auto* raw = reinterpret_cast<const uint8_t*>(grh);
    uint8_t source[16], dest[16];
    const uint8_t* v4 = raw + kIpv4InGrh;
    if ((v4[0] >> 4) == 4) {
        ipv4_mapped(source, v4 + 12);
        ipv4_mapped(dest, v4 + 16);
        ah_attr->grh.traffic_class = v4[1];
    } else if ((raw[0] >> 4) == 6) {
        std::memcpy(source, grh->sgid.raw, 16);
        std::memcpy(dest, grh->dgid.raw, 16);
        const uint32_t vtf = ntohl(grh->version_tclass_flow);
        ah_attr->grh.traffic_class = static_cast<uint8_t>((vtf >> 20) & 0xff);
        ah_attr->grh.flow_label = vtf & 0xfffff;
    } else {
        return fail_minus_one(EINVAL);
    }
    const int sgid_index = own_gid_index(context, dest);
    if (sgid_index < 0) return fail_minus_one(ENOENT);
    ah_attr->is_global = 1;
    std::memcpy(ah_attr->grh.dgid.raw, source, 16);
    ah_attr->grh.sgid_index = static_cast<uint8_t>(sgid_index);
    ah_attr->grh.hop_limit = 0xff;
    return 0;
}

RNIC_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
    if (pd == nullptr) return fail_null<ibv_ah>(EINVAL);
    ibv_ah_attr attr{};
    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;  // errno set
    return ibv_create_ah(pd, &attr);
}

// UD multicast needs group membership on the wire (IGMP/MLD for RoCE) that rnicd does not do.
RNIC_EXPORT int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return EOPNOTSUPP;
}
RNIC_EXPORT int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return EOPNOTSUPP;
}

// rdma-core resolves the peer MAC in the application through netlink; with rnicd the daemon
// resolves it (ARP or IPv6 neighbour discovery) when the AH or path is set, so there is nothing
// to ask here.
RNIC_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
    return EOPNOTSUPP;
}
