// ibv_get_async_event / ibv_ack_async_event: events from the session's async ring (QP, CQ and
// SRQ errors, SRQ limit, communication established, SQ drained, and IBV_EVENT_DEVICE_FATAL when
// rnicd stops or vanishes). context->async_fd is pollable, as with rdma-core.
#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

using namespace rnic::shim;

namespace {

enum class Subject { Qp, Cq, Srq, Port };

Subject subject_of(uint32_t type) {
    switch (type) {
        case IBV_EVENT_CQ_ERR:
            return Subject::Cq;
        case IBV_EVENT_SRQ_ERR:
        case IBV_EVENT_SRQ_LIMIT_REACHED:
            return Subject::Srq;
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            return Subject::Qp;
        default:
            return Subject::Port;  // port and device events (DEVICE_FATAL, PORT_ACTIVE ...)
    }
}

template <class T>
void count_ack(T* object) {
    pthread_mutex_lock(&object->mutex);
    ++object->events_completed;
    pthread_cond_signal(&object->cond);
    pthread_mutex_unlock(&object->mutex);
}

}  // namespace

RNIC_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    if (context == nullptr || event == nullptr) return fail_minus_one(EINVAL);
    client::Connection& conn = conn_of(context);
    // An event for an object destroyed before it was read has nobody to go to (the kernel
    // never reports one either); it is skipped.
    for (;;) {
        client::AsyncEvent ev{};
        if (const int rc = conn.get_async_event(&ev); rc != 0) return fail_minus_one(rc);
        event->event_type = static_cast<ibv_event_type>(ev.event_type);
        switch (subject_of(ev.event_type)) {
            case Subject::Qp:
                if (ev.qp == nullptr || ev.qp->user == nullptr) continue;
                event->element.qp = ibv_of(static_cast<Qp*>(ev.qp->user));
                return 0;
            case Subject::Cq:
                if (ev.cq == nullptr || ev.cq->user == nullptr) continue;
                event->element.cq = ibv_of(static_cast<Cq*>(ev.cq->user));
                return 0;
            case Subject::Srq:
                if (ev.srq == nullptr || ev.srq->user == nullptr) continue;
                event->element.srq = &static_cast<Srq*>(ev.srq->user)->srq;
                return 0;
            case Subject::Port:
                event->element.port_num = static_cast<int>(ev.object);
                return 0;
        }
    }
}

RNIC_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
    if (event == nullptr) return;
    switch (subject_of(event->event_type)) {
        case Subject::Qp:
            count_ack(event->element.qp);
            break;
        case Subject::Cq: {
            ibv_cq* cq = event->element.cq;
            pthread_mutex_lock(&cq->mutex);
            ++cq->async_events_completed;
            pthread_cond_signal(&cq->cond);
            pthread_mutex_unlock(&cq->mutex);
            break;
        }
        case Subject::Srq:
            count_ack(event->element.srq);
            break;
        case Subject::Port:
            break;
    }
}
