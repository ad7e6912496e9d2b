// rdma_getaddrinfo's translation: getaddrinfo(3) with hints derived from the rdma_addrinfo ones
// (RAI_PASSIVE -> AI_PASSIVE, RAI_NUMERICHOST -> AI_NUMERICHOST, QP type -> socket type, port
// space -> protocol), its first answer turned back into an rdma_addrinfo (source for a passive
// lookup, destination otherwise), as rdma-core's librdmacm/addrinfo.c. No device is needed:
// rdma_getaddrinfo checks for one first, as librdmacm does.
#pragma once

#include <rdma/rdma_cma.h>

namespace rnic::rdmacm {

// 0, a getaddrinfo error (EAI_*, negative), or -1 with errno (EINVAL, ENOMEM).
int translate_addrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res);
void free_addrinfo(rdma_addrinfo* res);

}  // namespace rnic::rdmacm
