// Ids: creation, destruction, daemon ids, routes, migration between channels; rdma_create_id,
// rdma_destroy_id, rdma_migrate_id, rdma_create_ep, rdma_destroy_ep, rdma_get_request.
#include "ids.hpp"

#include <endian.h>

#include <cstdlib>
#include <cstring>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"

namespace rnic::rdmacm {

namespace {

// The QP type the kernel gives a port space's ids (ucma_get_qp_type); EINVAL for an unknown space.
int kernel_qp_type(rdma_port_space ps, ibv_qp_type requested, ibv_qp_type* out) {
    switch (ps) {
        case RDMA_PS_TCP:
            *out = IBV_QPT_RC;
            return 0;
        case RDMA_PS_UDP:
        case RDMA_PS_IPOIB:
            *out = IBV_QPT_UD;
            return 0;
        case RDMA_PS_IB:
            *out = requested;
            return 0;
    }
    return EINVAL;
}

bool part_matches(const Id& id, const CmDevice* dev, uint32_t handle) {
    for (const IdPart& p : id.parts)
        if (p.dev == dev && p.handle == handle) return true;
    return false;
}

}  // namespace

int new_id(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type, Id** out) try {
    if (const int rc = init_devices(); rc != 0) return rc;
    ibv_qp_type kernel_type = qp_type;
    if (const int rc = kernel_qp_type(ps, qp_type, &kernel_type); rc != 0) return rc;
    auto* id = new Id();
    id->pub.context = context;
    id->pub.ps = ps;
    id->pub.qp_type = qp_type;
    if (channel == nullptr) {
        Channel* own = nullptr;
        if (const int rc = Channel::create(&own); rc != 0) {
            delete id;
            return rc;
        }
        id->pub.channel = &own->pub;
        id->sync = true;
    } else {
        id->pub.channel = channel;
    }
    *out = id;
    return 0;
} catch (...) {
    return ENOMEM;
}

void free_id(Id* id) {
    if (id->holds_pd) release_pd(*id->device);
    std::free(id->pub.route.path_rec);
    if (id->sync) Channel::destroy(Channel::of(id->pub.channel));
    delete id;
}

int attach(Id& id, CmDevice& dev, IdPart* out) try {
    if (const int rc = open_device(dev); rc != 0) return rc;
    uint32_t channel = 0;
    if (const int rc = Channel::of(id.pub.channel)->member(dev, &channel); rc != 0) return rc;
    ibv_qp_type kernel_type = id.pub.qp_type;
    (void)kernel_qp_type(id.pub.ps, id.pub.qp_type, &kernel_type);  // checked at creation
    uint32_t handle = 0;
    if (const int rc = calls::create_id(dev, channel, id.pub.ps, kernel_type, &handle); rc != 0)
        return device_error(rc);
    {
        std::lock_guard lock(dev.ids_lock);
        dev.ids[handle] = &id;
    }
    // Accepted when set; the daemon's id starts where the library's stood then.
    for (const PendingOption& o : id.options) (void)calls::set_option(dev, handle, o.level, o.optname, o.value);
    *out = IdPart{&dev, handle};
    return 0;
} catch (...) {
    return ENOMEM;
}

void detach(Id& id, const IdPart& part) {
    if (!is_dead(*part.dev)) (void)calls::destroy_id(*part.dev, part.handle);
    std::lock_guard lock(part.dev->ids_lock);
    const auto it = part.dev->ids.find(part.handle);
    if (it != part.dev->ids.end() && it->second == &id) part.dev->ids.erase(it);
}

int set_device(Id& id, CmDevice& dev) {
    if (id.device == &dev) return 0;
    ibv_pd* pd = acquire_pd(dev);
    if (pd == nullptr) return errno != 0 ? errno : ENOMEM;
    if (id.holds_pd) release_pd(*id.device);
    id.device = &dev;
    id.holds_pd = true;
    id.pub.verbs = dev.verbs;
    id.pub.pd = pd;
    return 0;
}

const IdPart* device_part(Id& id) {
    if (id.device == nullptr) return nullptr;
    for (const IdPart& p : id.parts)
        if (p.dev == id.device) return &p;
    return nullptr;
}

void apply_query(Id& id, const abi::CmQueryReply& q) {
    rdma_route& route = id.pub.route;
    if (q.src.family != 0) to_sockaddr(q.src, route.addr.src_storage);
    if (q.dst.family != 0) to_sockaddr(q.dst, route.addr.dst_storage);
    std::memcpy(route.addr.addr.ibaddr.sgid.raw, q.sgid, 16);
    std::memcpy(route.addr.addr.ibaddr.dgid.raw, q.dgid, 16);
    route.addr.addr.ibaddr.pkey = htobe16(q.pkey);
    if (q.port_num != 0) id.pub.port_num = q.port_num;
    if (q.path_count == 0) return;
    if (route.path_rec == nullptr) {
        route.path_rec = static_cast<ibv_sa_path_rec*>(std::calloc(1, sizeof(ibv_sa_path_rec)));
        if (route.path_rec == nullptr) return;
    }
    // One path, as the kernel's RoCE route: GIDs and the GRH fields, no LIDs.
    ibv_sa_path_rec& p = *route.path_rec;
    p = {};
    std::memcpy(p.dgid.raw, q.dgid, 16);
    std::memcpy(p.sgid.raw, q.sgid, 16);
    p.flow_label = htobe32(q.flow_label);
    p.hop_limit = q.hop_limit;
    p.traffic_class = q.traffic_class;
    p.reversible = 1;
    p.numb_path = 1;
    p.pkey = htobe16(q.pkey);
    p.sl = q.sl;
    p.mtu_selector = 2;  // exactly
    p.mtu = static_cast<uint8_t>(q.path_mtu);
    p.rate_selector = 2;
    p.rate = IBV_RATE_10_GBPS;  // what the port reports (1X, 10 Gb/s)
    p.packet_life_time_selector = 2;
    p.packet_life_time = q.packet_life_time;
    route.num_paths = 1;
}

int query_route(Id& id) {
    const IdPart* part = device_part(id);
    if (part == nullptr && !id.parts.empty()) part = &id.parts.front();
    if (part == nullptr) return EINVAL;
    abi::CmQueryReply q{};
    if (const int rc = calls::query(*part->dev, part->handle, &q); rc != 0) return device_error(rc);
    apply_query(id, q);
    return 0;
}

bool event_of(const Id& id, const RawEvent& r) {
    if (r.target != nullptr) return r.target == &id;
    if (r.ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) return part_matches(id, r.dev, r.ev.listen_id);
    return part_matches(id, r.dev, r.ev.id);
}

int migrate(Id& id, rdma_event_channel* channel) try {
    if (id.sync && channel == nullptr) return EINVAL;
    const bool sync = channel == nullptr;
    Channel* to = nullptr;
    if (sync) {
        if (const int rc = Channel::create(&to); rc != 0) return rc;
    } else {
        to = Channel::of(channel);
    }
    Channel* from = Channel::of(id.pub.channel);
    auto undo = [&](int rc) {
        if (sync) Channel::destroy(to);
        return rc;
    };
    std::vector<uint32_t> handles;
    for (const IdPart& p : id.parts) {
        uint32_t h = 0;
        if (const int rc = to->member(*p.dev, &h); rc != 0) return undo(rc);
        handles.push_back(h);
    }
    if (from != to) {
        // Neither channel fetches while the daemon moves the id's events, so every event of the
        // id ends up in the new channel, in order.
        std::unique_lock first(from < to ? from->lock() : to->lock());
        std::unique_lock second(from < to ? to->lock() : from->lock());
        for (size_t i = 0; i < id.parts.size(); ++i)
            if (const int rc = calls::migrate_id(*id.parts[i].dev, id.parts[i].handle, handles[i]); rc != 0)
                return undo(device_error(rc));
        to->insert_locked(from->extract_locked([&](const RawEvent& r) { return event_of(id, r); }));
        id.pub.channel = &to->pub;
    }
    if (id.sync) {
        if (id.pub.event != nullptr) {
            rdma_ack_cm_event(id.pub.event);
            id.pub.event = nullptr;
        }
        Channel::destroy(from);
    }
    id.sync = sync;
    // The events the application holds must be acknowledged before they could be confused
    // with the new channel's (librdmacm waits the same way).
    std::unique_lock lock(id.mut);
    id.cond.wait(lock, [&] { return id.events_completed >= id.events_handed; });
    return 0;
} catch (...) {
    return ENOMEM;
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
    if (id == nullptr) return fail(EINVAL);
    const ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
    Id* made = nullptr;
    if (const int rc = new_id(channel, context, ps, qp_type, &made); rc != 0) return fail(rc);
    *id = &made->pub;
    return 0;
}

RNIC_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
    if (cm_id == nullptr) return fail(EINVAL);
    Id& id = *id_of(cm_id);
    for (const IdPart& p : id.parts) detach(id, p);
    // Events fetched for it but not handed out go with it; a connection request's new id is
    // destroyed in the daemon, which rejects the peer.
    for (const RawEvent& r : Channel::of(cm_id->channel)->extract([&](const RawEvent& e) { return event_of(id, e); }))
        if (r.target == nullptr && r.ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && !is_dead(*r.dev))
            (void)calls::destroy_id(*r.dev, r.ev.id);
    id.parts.clear();
    if (cm_id->event != nullptr) {
        rdma_ack_cm_event(cm_id->event);
        cm_id->event = nullptr;
    }
    {
        std::unique_lock lock(id.mut);
        id.cond.wait(lock, [&] { return id.events_completed >= id.events_handed; });
    }
    free_id(&id);
    return 0;
}

RNIC_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
    if (id == nullptr) return fail(EINVAL);
    const int rc = migrate(*id_of(id), channel);
    return rc == 0 ? 0 : fail(rc);
}

RNIC_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
    if (id == nullptr) return;
    if (id->qp != nullptr) rdma_destroy_qp(id);
    if (id->srq != nullptr) rdma_destroy_srq(id);
    id_of(id)->qp_init_attr.reset();
    rdma_destroy_id(id);
}

RNIC_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) try {
    if (id == nullptr || res == nullptr) return fail(EINVAL);
    Id* made = nullptr;
    if (const int rc = new_id(nullptr, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
                              static_cast<ibv_qp_type>(res->ai_qp_type), &made);
        rc != 0)
        return fail(rc);
    rdma_cm_id* cm_id = &made->pub;
    int ret = 0;
    if (res->ai_flags & RAI_PASSIVE) {
        ret = rdma_bind_addr(cm_id, res->ai_src_addr);
        if (ret == 0) {
            if (pd != nullptr) cm_id->pd = pd;
            if (qp_init_attr != nullptr) {
                made->qp_init_attr = std::make_unique<ibv_qp_init_attr>(*qp_init_attr);
                made->qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
            }
        }
    } else {
        ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
        if (ret == 0) ret = rdma_resolve_route(cm_id, 2000);
        if (ret == 0 && qp_init_attr != nullptr) {
            qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
            ret = rdma_create_qp(cm_id, pd, qp_init_attr);
        }
        if (ret == 0 && res->ai_connect_len != 0) {
            const auto* data = static_cast<const uint8_t*>(res->ai_connect);
            made->connect.assign(data, data + res->ai_connect_len);
        }
    }
    if (ret != 0) {
        const int err = errno;
        rdma_destroy_ep(cm_id);
        return fail(err);
    }
    *id = cm_id;
    return 0;
} catch (...) {
    return fail(ENOMEM);
}

RNIC_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
    if (listen == nullptr || id == nullptr) return fail(EINVAL);
    Id& l = *id_of(listen);
    if (!l.sync) return fail(EINVAL);
    if (listen->event != nullptr) {
        rdma_ack_cm_event(listen->event);
        listen->event = nullptr;
    }
    rdma_cm_event* event = nullptr;
    if (get_event(*Channel::of(listen->channel), &event) != 0) return -1;
    int err = 0;
    if (event->event == RDMA_CM_EVENT_REJECTED)
        err = ECONNREFUSED;
    else if (event->status != 0)
        err = -event->status;
    else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
        err = EINVAL;
    if (err == 0 && l.qp_init_attr != nullptr) {
        ibv_qp_init_attr attr = *l.qp_init_attr;
        if (rdma_create_qp(event->id, listen->pd, &attr) != 0) err = errno;
    }
    if (err != 0) {
        listen->event = event;
        return fail(err);
    }
    *id = event->id;
    (*id)->event = event;
    return 0;
}
