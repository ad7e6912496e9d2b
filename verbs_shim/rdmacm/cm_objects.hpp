// The objects behind librdmacm's public structs. Applications hold pointers to rdma-core's own
// structs (rdma_cm_id, rdma_event_channel, rdma_cm_event) and dereference them in inline code
// (rdma_verbs.h reads id->qp, id->pd, id->send_cq...), so each wrapper starts with that struct
// and its layout is rdma-core's.
//
// The split with rnicd is the kernel's (docs/rdma_cm.md): the daemon holds the communication
// identifiers and speaks the CM on the wire; this library holds the application's ids, the
// events handed out and the QPs, which it creates and moves through INIT/RTR/RTS with our
// libibverbs. One CM session (client::Connection) per device and process carries the CmOps.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "address.hpp"
#include "rnic/host/abi/cm.hpp"
#include "rnic/host/client/connection.hpp"

namespace rnic::rdmacm {

namespace client = host::client;

struct Id;
class Channel;

// One rnicd as librdmacm sees a device: the verbs context handed to applications (id->verbs),
// its default PD, and the CM session. Never freed: ids and contexts may outlive a dead daemon,
// whose restarted successor becomes a new CmDevice.
struct CmDevice {
    ibv_device* ibdev = nullptr;
    std::string name;
    std::string run_dir;

    // Set once by open_device() under the registry lock, read-only afterwards.
    bool opened = false;
    ibv_context* verbs = nullptr;
    std::unique_ptr<client::Connection> conn;
    std::vector<DeviceAddress> addresses;
    uint8_t port_count = 1;
    uint32_t max_qpsize = 0;
    uint8_t max_initiator_depth = 0;
    uint8_t max_responder_resources = 0;

    std::atomic<bool> dead{false};

    // Under the registry lock: the PD ids get until they create their own (librdmacm's
    // cma_dev->pd), and the references of rdma_get_devices lists.
    ibv_pd* pd = nullptr;
    int pd_users = 0;

    // The daemon's ids on this device that belong to library ids, by handle.
    std::mutex ids_lock;
    std::unordered_map<uint32_t, Id*> ids;

    Id* find_id(uint32_t handle);
    // The id behind `handle`, with one more event counted as handed to it (under the lock that
    // rdma_destroy_id takes to let go of the handle, so a destroyed id is never returned and a
    // destroy waits for the event's acknowledgement). nullptr when the handle is no id's.
    Id* claim_event(uint32_t handle);
};

// One daemon id of a library id. A library id has none before it is bound or resolved, one on
// the device its address belongs to, or one per device when bound to a wildcard address.
struct IdPart {
    CmDevice* dev = nullptr;
    uint32_t handle = 0;
};

// An option set before the id had a daemon id, replayed when it gets one (Linux keeps them on
// the id from rdma_create_id on).
struct PendingOption {
    uint32_t level = 0;
    uint32_t optname = 0;
    uint32_t value = 0;
};

struct Multicast {
    abi::CmAddress group{};
    sockaddr_storage addr{};
    void* context = nullptr;
    uint32_t handle = 0;
    uint16_t join_flags = 0;
    ibv_gid mgid{};
    uint16_t mlid = 0;
};

struct Id {
    rdma_cm_id pub{};   // the application holds &pub
    bool sync = false;  // created without a channel: the library made one and waits on it

    std::vector<IdPart> parts;
    CmDevice* device = nullptr;  // the one device the id is on, once bound to it or resolved
    bool holds_pd = false;       // counted in device->pd_users

    std::mutex mut;
    std::condition_variable cond;
    uint64_t events_handed = 0;     // given to the application by rdma_get_cm_event
    uint64_t events_completed = 0;  // acknowledged (or absorbed by the library)

    uint8_t initiator_depth = 0;
    uint8_t responder_resources = 0;
    bool connect_error = false;    // CONNECT_RESPONSE failed here: later REJECTED/DISCONNECTED are ours
    std::vector<uint8_t> connect;  // rdma_create_ep's ai_connect, sent before the private data
    std::unique_ptr<ibv_qp_init_attr> qp_init_attr;  // rdma_create_ep passive: QPs for requests
    ibv_ece local_ece{};
    ibv_ece remote_ece{};
    std::vector<PendingOption> options;
    std::vector<Multicast> multicasts;  // under `mut`
};

// An event counted for `id` that the application will never see (librdmacm's
// ucma_complete_event for the events it absorbs).
void complete_event(Id& id);

inline Id* id_of(rdma_cm_id* id) {
    return reinterpret_cast<Id*>(id);
}

// What rdma_get_cm_event hands out (librdmacm's cma_event): the event, room for its private
// data, and whose event count the acknowledgement completes.
struct EventRecord {
    rdma_cm_event pub{};
    uint8_t private_data[abi::kCmPrivateDataMax] = {};
    Id* owner = nullptr;
};

// An event as it waits in a channel: a daemon's (with the device it came from) or one the
// library made (DEVICE_REMOVAL), which names its id directly.
struct RawEvent {
    CmDevice* dev = nullptr;
    abi::CmEvent ev{};
    Id* target = nullptr;
};

// librdmacm's ERR(): -1 with errno.
int fail(int error);
// A daemon call's error as the application sees it: a vanished daemon is a removed device.
int device_error(int error);

}  // namespace rnic::rdmacm
