// The devices librdmacm works on: every rnicd our libibverbs lists, each opened on first need
// (a verbs context, its attributes, a CM session and its addresses), as librdmacm's
// ucma_init/ucma_init_device open the kernel's devices.
#pragma once

#include <vector>

#include "cm_objects.hpp"

namespace rnic::rdmacm {

// librdmacm's ucma_init: 0, or ENODEV when no rnicd answers.
int init_devices();
// Every live device, opened (those that fail to open are marked dead and left out).
std::vector<CmDevice*> open_devices();
// Opens `dev` if it is not yet: 0 or ENODEV.
int open_device(CmDevice& dev);
// The live device holding `addr` (not a wildcard), opened. EADDRNOTAVAIL when no device and no
// interface of this host has it, ENODEV when the host has it on a non-RDMA interface (Linux's
// answers for an address without an RDMA device).
int device_owning(const abi::CmAddress& addr, CmDevice** out);
// Of `among` (live, opened devices), the one that reaches `dst` (address.hpp: route_to).
// ENETUNREACH when none has an address of dst's family.
int device_routing(const abi::CmAddress& dst, const std::vector<CmDevice*>& among, CmDevice** out);
// Marks a device whose daemon is gone: its ids learn it from their channels (DEVICE_REMOVAL).
void mark_dead(CmDevice& dev);
bool is_dead(CmDevice& dev);

// The device's default PD (librdmacm's cma_dev->pd), allocated for its first id and freed with
// its last one. NULL with errno when it cannot be allocated.
ibv_pd* acquire_pd(CmDevice& dev);
void release_pd(CmDevice& dev);

// rdma_get_devices/rdma_free_devices reference counting.
std::vector<ibv_context*> list_contexts();

}  // namespace rnic::rdmacm
