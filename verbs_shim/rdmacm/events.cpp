// Events: rdma_get_cm_event, rdma_ack_cm_event, rdma_event_str, and what librdmacm does with
// each event before the application sees it (rdma_get_cm_event in rdma-core's cma.c): new ids
// for connection requests, routes after resolution, the active side's RTR/RTS and RTU on
// CONNECT_RESPONSE (ESTABLISHED, or CONNECT_ERROR when that fails), QPs to ERR on REJECTED.
#include <algorithm>
#include <cstring>
#include <memory>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"
#include "ids.hpp"
#include "shim_conversions.hpp"

namespace rnic::rdmacm {

namespace {

void copy_private_data(const abi::CmConnParam& src, EventRecord& rec, const void** data, uint8_t* length) {
    const uint32_t n = std::min<uint32_t>({src.private_data_len, abi::kCmPrivateDataMax, 255});
    *length = static_cast<uint8_t>(n);
    if (n == 0) return;
    std::memcpy(rec.private_data, src.private_data, n);
    *data = rec.private_data;
}

void copy_conn(const abi::CmEvent& ev, EventRecord& rec) {
    rdma_conn_param& dst = rec.pub.param.conn;
    copy_private_data(ev.param, rec, &dst.private_data, &dst.private_data_len);
    dst.responder_resources = ev.param.responder_resources;
    dst.initiator_depth = ev.param.initiator_depth;
    dst.flow_control = ev.param.flow_control;
    dst.retry_count = ev.param.retry_count;
    dst.rnr_retry_count = ev.param.rnr_retry_count;
    dst.srq = ev.param.srq;
    dst.qp_num = ev.param.qp_num;
}

void copy_ud(const abi::CmEvent& ev, EventRecord& rec) {
    rdma_ud_param& dst = rec.pub.param.ud;
    copy_private_data(ev.param, rec, &dst.private_data, &dst.private_data_len);
    shim::to_ibv(ev.ah_attr, dst.ah_attr);
    dst.qp_num = ev.param.qp_num;
    dst.qkey = ev.param.qkey;
}

void copy_param(const Id& id, const abi::CmEvent& ev, EventRecord& rec) {
    (id.pub.qp_type == IBV_QPT_UD ? copy_ud : copy_conn)(ev, rec);
}

// A connection request: the new id the event names, on the listener's channel with its
// context, port space and QP type (a synchronous listener's get their own channels).
bool connect_request(const RawEvent& raw, Id& listen, EventRecord& rec) {
    const abi::CmEvent& ev = raw.ev;
    Id* child = nullptr;
    if (new_id(listen.pub.channel, listen.pub.context, listen.pub.ps, listen.pub.qp_type, &child) != 0) {
        (void)calls::destroy_id(*raw.dev, ev.id);
        return false;
    }
    {
        std::lock_guard lock(raw.dev->ids_lock);
        raw.dev->ids[ev.id] = child;
    }
    child->parts = {IdPart{raw.dev, ev.id}};
    child->initiator_depth = ev.param.initiator_depth;
    child->responder_resources = ev.param.responder_resources;
    rec.pub.listen_id = &listen.pub;
    rec.pub.id = &child->pub;
    copy_param(listen, ev, rec);
    to_sockaddr(ev.src, child->pub.route.addr.src_storage);
    to_sockaddr(ev.dst, child->pub.route.addr.dst_storage);
    if (set_device(*child, *raw.dev) != 0 || (listen.sync && migrate(*child, nullptr) != 0) ||
        query_route(*child) != 0) {
        rdma_destroy_id(&child->pub);
        return false;
    }
    return true;
}

void multicast_event(Id& id, const abi::CmEvent& ev, EventRecord& rec) {
    copy_ud(ev, rec);
    std::lock_guard lock(id.mut);
    for (Multicast& mc : id.multicasts) {
        if (!same_address(mc.group, ev.dst)) continue;
        rec.pub.param.ud.private_data = mc.context;
        if (ev.event != RDMA_CM_EVENT_MULTICAST_JOIN) return;
        mc.mgid = rec.pub.param.ud.ah_attr.grh.dgid;
        mc.mlid = rec.pub.param.ud.ah_attr.dlid;
        if (id.pub.qp == nullptr || mc.join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return;
        if (const int rc = ibv_attach_mcast(id.pub.qp, &mc.mgid, mc.mlid); rc != 0) {
            rec.pub.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            rec.pub.status = -rc;
        }
        return;
    }
}

// Turns a queued event into the application's; false when it is not the application's (its id
// is gone, or the library absorbs it).
bool process(const RawEvent& raw, EventRecord& rec) {
    const abi::CmEvent& ev = raw.ev;
    rec.pub.event = static_cast<rdma_cm_event_type>(ev.event);
    rec.pub.status = ev.status;
    if (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && raw.target == nullptr) {
        Id* listen = raw.dev->claim_event(ev.listen_id);
        if (listen == nullptr) {
            (void)calls::destroy_id(*raw.dev, ev.id);  // nobody listens any more: the peer is rejected
            return false;
        }
        rec.owner = listen;
        if (connect_request(raw, *listen, rec)) return true;
        complete_event(*listen);
        return false;
    }
    Id* id = raw.dev->claim_event(ev.id);
    if (id == nullptr || (raw.target != nullptr && raw.target != id)) {
        if (id != nullptr) complete_event(*id);
        return false;
    }
    rec.owner = id;
    rec.pub.id = &id->pub;
    switch (ev.event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (const int rc = query_route(*id); rc != 0) {
                rec.pub.event = RDMA_CM_EVENT_ADDR_ERROR;
                rec.pub.status = -rc;
            }
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            if (const int rc = query_route(*id); rc != 0) {
                rec.pub.event = RDMA_CM_EVENT_ROUTE_ERROR;
                rec.pub.status = -rc;
            }
            break;
        case RDMA_CM_EVENT_CONNECT_RESPONSE:
            copy_conn(ev, rec);
            if (id->pub.qp == nullptr) {
                id->remote_ece = {};  // the CM carries no ECE here
            } else if (finish_connect(*id) == 0) {
                rec.pub.event = RDMA_CM_EVENT_ESTABLISHED;
            } else {
                rec.pub.event = RDMA_CM_EVENT_CONNECT_ERROR;
                rec.pub.status = -errno;
                id->connect_error = true;
            }
            break;
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_DISCONNECTED:
            // The connection failed here: the peer's view of it is not the application's news.
            if (id->connect_error) {
                complete_event(*id);
                return false;
            }
            copy_conn(ev, rec);
            if (ev.event == RDMA_CM_EVENT_REJECTED) modify_qp_err(*id);
            break;
        case RDMA_CM_EVENT_MULTICAST_JOIN:
        case RDMA_CM_EVENT_MULTICAST_ERROR:
            multicast_event(*id, ev, rec);
            break;
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            break;
        default:
            copy_param(*id, ev, rec);
            break;
    }
    return true;
}

}  // namespace

int get_event(Channel& channel, rdma_cm_event** event) try {
    if (!channel.enter()) return fail(EINVAL);
    struct Leave {
        Channel& c;
        ~Leave() { c.leave(); }
    } leave{channel};
    for (;;) {
        RawEvent raw;
        int rc = channel.take(raw);
        if (rc == 0) {
            auto rec = std::make_unique<EventRecord>();
            if (!process(raw, *rec)) continue;
            *event = &rec.release()->pub;
            return 0;
        }
        if (rc != EAGAIN) return fail(rc);
        if (channel.nonblocking()) return fail(EAGAIN);
        if ((rc = channel.wait_readable()) != 0) return fail(rc);
    }
} catch (...) {
    return fail(ENOMEM);
}

int complete(Id& id) {
    if (!id.sync) return 0;
    if (id.pub.event != nullptr) {
        rdma_ack_cm_event(id.pub.event);
        id.pub.event = nullptr;
    }
    if (get_event(*Channel::of(id.pub.channel), &id.pub.event) != 0) return -1;
    const rdma_cm_event& e = *id.pub.event;
    if (e.status == 0) return 0;
    if (e.event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e.status < 0 ? -e.status : e.status);
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (channel == nullptr || event == nullptr) return fail(EINVAL);
    return get_event(*Channel::of(channel), event);
}

RNIC_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
    if (event == nullptr) return fail(EINVAL);
    auto* rec = reinterpret_cast<EventRecord*>(event);
    complete_event(*rec->owner);
    delete rec;
    return 0;
}

RNIC_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
    switch (event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            return "RDMA_CM_EVENT_ADDR_RESOLVED";
        case RDMA_CM_EVENT_ADDR_ERROR:
            return "RDMA_CM_EVENT_ADDR_ERROR";
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            return "RDMA_CM_EVENT_ROUTE_RESOLVED";
        case RDMA_CM_EVENT_ROUTE_ERROR:
            return "RDMA_CM_EVENT_ROUTE_ERROR";
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            return "RDMA_CM_EVENT_CONNECT_REQUEST";
        case RDMA_CM_EVENT_CONNECT_RESPONSE:
            return "RDMA_CM_EVENT_CONNECT_RESPONSE";
        case RDMA_CM_EVENT_CONNECT_ERROR:
            return "RDMA_CM_EVENT_CONNECT_ERROR";
        case RDMA_CM_EVENT_UNREACHABLE:
            return "RDMA_CM_EVENT_UNREACHABLE";
        case RDMA_CM_EVENT_REJECTED:
            return "RDMA_CM_EVENT_REJECTED";
        case RDMA_CM_EVENT_ESTABLISHED:
            return "RDMA_CM_EVENT_ESTABLISHED";
        case RDMA_CM_EVENT_DISCONNECTED:
            return "RDMA_CM_EVENT_DISCONNECTED";
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            return "RDMA_CM_EVENT_DEVICE_REMOVAL";
        case RDMA_CM_EVENT_MULTICAST_JOIN:
            return "RDMA_CM_EVENT_MULTICAST_JOIN";
        case RDMA_CM_EVENT_MULTICAST_ERROR:
            return "RDMA_CM_EVENT_MULTICAST_ERROR";
        case RDMA_CM_EVENT_ADDR_CHANGE:
            return "RDMA_CM_EVENT_ADDR_CHANGE";
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
            return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    }
    return "UNKNOWN EVENT";
}
