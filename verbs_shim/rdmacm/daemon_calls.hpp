// The CmOps of abi/cm.hpp as typed calls on a device's CM session. Each returns 0 or the errno
// the daemon answered (EIO once the daemon is gone, EPROTO for a reply of the wrong size).
#pragma once

#include <cstdint>
#include <vector>

#include "cm_objects.hpp"

namespace rnic::rdmacm::calls {

// A channel's handle and its socket (the daemon's end is closed at once: the socket then hangs
// up when the daemon dies, which is how a waiting application learns of it).
int create_channel(CmDevice& dev, uint32_t* handle, int* fd);
int destroy_channel(CmDevice& dev, uint32_t handle);
int create_id(CmDevice& dev, uint32_t channel, uint32_t port_space, uint32_t qp_type, uint32_t* handle);
int destroy_id(CmDevice& dev, uint32_t handle);
int migrate_id(CmDevice& dev, uint32_t handle, uint32_t channel);
int bind_addr(CmDevice& dev, uint32_t handle, const abi::CmAddress& addr, abi::CmQueryReply* reply);
int resolve_addr(CmDevice& dev, uint32_t handle, const abi::CmAddress& src, const abi::CmAddress& dst,
                 uint32_t timeout_ms);
int resolve_route(CmDevice& dev, uint32_t handle, uint32_t timeout_ms);
int query(CmDevice& dev, uint32_t handle, abi::CmQueryReply* reply);
int listen(CmDevice& dev, uint32_t handle, uint32_t backlog);
int connect(CmDevice& dev, uint32_t handle, const abi::CmConnParam& param);
int accept(CmDevice& dev, uint32_t handle, const abi::CmConnParam& param);
int reject(CmDevice& dev, uint32_t handle, uint32_t reason, const void* private_data, uint32_t length);
int disconnect(CmDevice& dev, uint32_t handle);
int init_qp_attr(CmDevice& dev, uint32_t handle, uint32_t qp_state, abi::CmInitQpAttrReply* reply);
int notify(CmDevice& dev, uint32_t handle, uint32_t event);
int set_option(CmDevice& dev, uint32_t handle, uint32_t level, uint32_t optname, uint32_t value);
// EAGAIN when the channel has no event queued.
int get_event(CmDevice& dev, uint32_t channel, abi::CmEvent* event);
int join_multicast(CmDevice& dev, uint32_t handle, uint32_t join_flags, const abi::CmAddress& group,
                   uint32_t* mc_handle);
int leave_multicast(CmDevice& dev, uint32_t handle, const abi::CmAddress& group);
int establish(CmDevice& dev, uint32_t handle);

}  // namespace rnic::rdmacm::calls
