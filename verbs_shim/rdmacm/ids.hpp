// What the rdma_* calls share about ids: their daemon ids (parts), their device and route, the
// synchronous mode of ids created without a channel, and the QP transitions librdmacm performs
// itself. Functions returning int give 0 or an errno unless they say "-1 with errno".
#pragma once

#include "cm_objects.hpp"
#include "event_channel.hpp"

namespace rnic::rdmacm {

// rdma_create_id's work: `channel` NULL makes a synchronous id with a channel of its own.
int new_id(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type, Id** out);
// Frees an id whose daemon ids are gone and whose events are acknowledged.
void free_id(Id* id);

// A daemon id for `id` on `dev`, reporting to the id's channel, with the options set so far.
int attach(Id& id, CmDevice& dev, IdPart* out);
// Destroys one daemon id of `id` (a device already gone needs no call).
void detach(Id& id, const IdPart& part);
// The id is on `dev` from now on: id->verbs and the device's default PD, as librdmacm's
// ucma_get_device.
int set_device(Id& id, CmDevice& dev);
// The single daemon id of an id that is on one device, or nullptr (unbound, or a wildcard).
const IdPart* device_part(Id& id);
// What the daemon says about an id, into rdma_cm_id's route (addresses, GIDs, P_Key, path).
void apply_query(Id& id, const abi::CmQueryReply& reply);
int query_route(Id& id);

// librdmacm's ucma_complete: for a synchronous id, waits for the operation's event and turns
// its status into the call's result. -1 with errno, or 0.
int complete(Id& id);
// rdma_get_cm_event's work: -1 with errno, or 0.
int get_event(Channel& channel, rdma_cm_event** event);
// rdma_migrate_id's work (channel NULL: a new synchronous channel).
int migrate(Id& id, rdma_event_channel* channel);

// Whether a queued event belongs to `id` (its own events, and connection requests to it).
bool event_of(const Id& id, const RawEvent& r);

// librdmacm's rdma_init_qp_attr, ucma_modify_qp_rtr/rts/err (-1 with errno, or 0).
int init_qp_attr(Id& id, ibv_qp_attr* attr, int* mask);
int modify_qp_rtr(Id& id, uint8_t responder_resources);
int modify_qp_rts(Id& id, uint8_t initiator_depth);
int modify_qp_err(Id& id);
// The active side after CONNECT_RESPONSE: RTR, RTS, then the RTU (-1 with errno, or 0).
int finish_connect(Id& id);

}  // namespace rnic::rdmacm
