// rdma_getaddrinfo and rdma_freeaddrinfo (addrinfo.hpp). No ibacm here: an active lookup gets
// no route (ai_route) and no connect data (ai_connect), as librdmacm without an ibacm daemon.
#include "addrinfo.hpp"

#include <endian.h>
#include <infiniband/ib.h>
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cm_objects.hpp"
#include "devices.hpp"
#include "export.hpp"

namespace rnic::rdmacm {

namespace {

addrinfo to_socket_hints(const rdma_addrinfo& rai) {
    addrinfo ai{};
    if (rai.ai_flags & RAI_PASSIVE) ai.ai_flags = AI_PASSIVE;
    if (rai.ai_flags & RAI_NUMERICHOST) ai.ai_flags |= AI_NUMERICHOST;
    if (rai.ai_family != AF_IB) ai.ai_family = rai.ai_family;
    switch (rai.ai_qp_type) {
        case IBV_QPT_RC:
        case IBV_QPT_UC:
        case IBV_QPT_XRC_SEND:
        case IBV_QPT_XRC_RECV:
            ai.ai_socktype = SOCK_STREAM;
            break;
        case IBV_QPT_UD:
            ai.ai_socktype = SOCK_DGRAM;
            break;
        default:
            break;
    }
    switch (rai.ai_port_space) {
        case RDMA_PS_TCP:
            ai.ai_protocol = IPPROTO_TCP;
            break;
        case RDMA_PS_IPOIB:
        case RDMA_PS_UDP:
            ai.ai_protocol = IPPROTO_UDP;
            break;
        case RDMA_PS_IB:
            if (ai.ai_socktype == SOCK_STREAM) ai.ai_protocol = IPPROTO_TCP;
            if (ai.ai_socktype == SOCK_DGRAM) ai.ai_protocol = IPPROTO_UDP;
            break;
        default:
            break;
    }
    return ai;
}

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t src_len) {
    *dst = static_cast<sockaddr*>(std::malloc(src_len));
    if (*dst == nullptr) return fail(ENOMEM);
    std::memcpy(*dst, src, src_len);
    *dst_len = src_len;
    return 0;
}

// An IPv6 address as the AF_IB address of its GID, with the port space and port as service ID
// (RAI_FAMILY with AF_IB and RAI_NUMERICHOST).
int to_ib_addr(int ps, sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t src_len) {
    if (src->sa_family != AF_INET6 || src_len < sizeof(sockaddr_in6)) return copy_addr(dst, dst_len, src, src_len);
    sockaddr_in6 in6;
    std::memcpy(&in6, src, sizeof in6);
    auto* sib = static_cast<sockaddr_ib*>(std::calloc(1, sizeof(sockaddr_ib)));
    if (sib == nullptr) return fail(ENOMEM);
    sib->sib_family = AF_IB;
    sib->sib_pkey = htobe16(0xffff);
    sib->sib_flowinfo = in6.sin6_flowinfo;
    std::memcpy(&sib->sib_addr, &in6.sin6_addr, 16);
    const uint16_t port = be16toh(in6.sin6_port);
    sib->sib_sid = htobe64((static_cast<uint64_t>(ps) << 16) + port);
    if (ps != 0) sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
    if (port != 0) sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
    sib->sib_scope_id = in6.sin6_scope_id;
    *dst = reinterpret_cast<sockaddr*>(sib);
    *dst_len = sizeof(sockaddr_ib);
    return 0;
}

int from_socket_answer(rdma_addrinfo& rai, const rdma_addrinfo& hints, const addrinfo& ai) {
    if (hints.ai_qp_type != 0)
        rai.ai_qp_type = hints.ai_qp_type;
    else if (ai.ai_socktype == SOCK_STREAM)
        rai.ai_qp_type = IBV_QPT_RC;
    else if (ai.ai_socktype == SOCK_DGRAM)
        rai.ai_qp_type = IBV_QPT_UD;
    if (hints.ai_port_space != 0)
        rai.ai_port_space = hints.ai_port_space;
    else if (ai.ai_protocol == IPPROTO_TCP)
        rai.ai_port_space = RDMA_PS_TCP;
    else if (ai.ai_protocol == IPPROTO_UDP)
        rai.ai_port_space = RDMA_PS_UDP;
    const bool ib = (hints.ai_flags & RAI_FAMILY) && hints.ai_family == AF_IB && (hints.ai_flags & RAI_NUMERICHOST);
    const bool passive = ai.ai_flags & AI_PASSIVE;
    char** canon = passive ? &rai.ai_src_canonname : &rai.ai_dst_canonname;
    sockaddr** addr = passive ? &rai.ai_src_addr : &rai.ai_dst_addr;
    socklen_t* len = passive ? &rai.ai_src_len : &rai.ai_dst_len;
    if (passive) rai.ai_flags = RAI_PASSIVE;
    if (ai.ai_canonname != nullptr) *canon = strdup(ai.ai_canonname);
    rai.ai_family = ib ? AF_IB : ai.ai_family;
    return ib ? to_ib_addr(rai.ai_port_space, addr, len, ai.ai_addr, ai.ai_addrlen)
              : copy_addr(addr, len, ai.ai_addr, ai.ai_addrlen);
}

}  // namespace

int translate_addrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
    if (service == nullptr && node == nullptr && hints == nullptr) return fail(EINVAL);
    static const rdma_addrinfo no_hints{};
    auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    if (rai == nullptr) return fail(ENOMEM);
    const bool hinted = hints != nullptr;
    if (!hinted) hints = &no_hints;
    int ret = 0;
    if (node != nullptr || service != nullptr) {
        const addrinfo socket_hints = to_socket_hints(*hints);
        addrinfo* ai = nullptr;
        ret = getaddrinfo(node, service, hinted ? &socket_hints : nullptr, &ai);
        if (ret == 0) {
            ret = from_socket_answer(*rai, *hints, *ai);
            freeaddrinfo(ai);
        }
    } else {
        rai->ai_flags = hints->ai_flags;
        rai->ai_family = hints->ai_family;
        rai->ai_qp_type = hints->ai_qp_type;
        rai->ai_port_space = hints->ai_port_space;
        if (hints->ai_dst_len != 0)
            ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
    }
    if (ret == 0 && rai->ai_src_len == 0 && hints->ai_src_len != 0)
        ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
    if (ret != 0) {
        const int err = errno;
        free_addrinfo(rai);
        errno = err;
        return ret;
    }
    *res = rai;
    return 0;
}

void free_addrinfo(rdma_addrinfo* res) {
    while (res != nullptr) {
        rdma_addrinfo* next = res->ai_next;
        std::free(res->ai_connect);
        std::free(res->ai_route);
        std::free(res->ai_src_canonname);
        std::free(res->ai_dst_canonname);
        std::free(res->ai_src_addr);
        std::free(res->ai_dst_addr);
        std::free(res);
        res = next;
    }
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                 rdma_addrinfo** res) {
    if (service == nullptr && node == nullptr && hints == nullptr) return fail(EINVAL);
    if (res == nullptr) return fail(EINVAL);
    if (const int rc = init_devices(); rc != 0) return fail(rc);
    return translate_addrinfo(node, service, hints, res);
}

RNIC_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
    free_addrinfo(res);
}
