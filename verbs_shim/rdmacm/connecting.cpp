// Connections: rdma_connect, rdma_accept, rdma_reject(_ece), rdma_disconnect, rdma_establish,
// rdma_notify, with librdmacm's parameter rules (depths bounded by the device, retry counts of
// 7 without parameters, rdma_create_ep's connect data ahead of the private data).
#include <algorithm>
#include <cstring>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"
#include "ids.hpp"

namespace rnic::rdmacm {

namespace {

// librdmacm's ucma_valid_param: RDMA_PS_TCP ids need parameters when they have no QP, and
// depths within the device's.
int valid_param(Id& id, const rdma_conn_param* param) {
    if (id.pub.ps != RDMA_PS_TCP) return 0;
    if (id.pub.qp == nullptr && param == nullptr) return EINVAL;
    if (param == nullptr) return 0;
    if (param->responder_resources != RDMA_MAX_RESP_RES &&
        param->responder_resources > id.device->max_responder_resources)
        return EINVAL;
    if (param->initiator_depth != RDMA_MAX_INIT_DEPTH && param->initiator_depth > id.device->max_initiator_depth)
        return EINVAL;
    return 0;
}

int to_cm_param(Id& id, const rdma_conn_param* src, uint32_t qp_num, uint8_t srq, abi::CmConnParam& dst) {
    dst = {};
    dst.qp_num = qp_num;
    dst.srq = srq;
    dst.responder_resources = id.responder_resources;
    dst.initiator_depth = id.initiator_depth;
    if (id.pub.qp_type == IBV_QPT_UD && id.pub.ps == RDMA_PS_UDP) dst.qkey = RDMA_UDP_QKEY;
    const size_t user = src != nullptr && src->private_data != nullptr ? src->private_data_len : 0;
    if (id.connect.size() + user > sizeof dst.private_data) return EINVAL;
    std::memcpy(dst.private_data, id.connect.data(), id.connect.size());
    if (user != 0) std::memcpy(dst.private_data + id.connect.size(), src->private_data, user);
    dst.private_data_len = static_cast<uint32_t>(id.connect.size() + user);
    if (src != nullptr) {
        dst.flow_control = src->flow_control;
        dst.retry_count = src->retry_count;
        dst.rnr_retry_count = src->rnr_retry_count;
    } else {
        dst.retry_count = 7;
        dst.rnr_retry_count = 7;
    }
    return 0;
}

}  // namespace

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* conn_param) {
    if (cm_id == nullptr) return fail(EINVAL);
    Id& id = *id_of(cm_id);
    const IdPart* part = device_part(id);
    if (part == nullptr) return fail(EINVAL);  // no route resolved yet
    if (const int rc = valid_param(id, conn_param); rc != 0) return fail(rc);
    id.initiator_depth = conn_param != nullptr && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
                             ? conn_param->initiator_depth
                             : id.device->max_initiator_depth;
    id.responder_resources = conn_param != nullptr && conn_param->responder_resources != RDMA_MAX_RESP_RES
                                 ? conn_param->responder_resources
                                 : id.device->max_responder_resources;
    uint32_t qp_num = conn_param != nullptr ? conn_param->qp_num : 0;
    uint8_t srq = conn_param != nullptr ? conn_param->srq : 0;
    if (cm_id->qp != nullptr) {
        qp_num = cm_id->qp->qp_num;
        srq = cm_id->qp->srq != nullptr;
    }
    abi::CmConnParam param;
    if (const int rc = to_cm_param(id, conn_param, qp_num, srq, param); rc != 0) return fail(rc);
    if (const int rc = calls::connect(*part->dev, part->handle, param); rc != 0) return fail(device_error(rc));
    id.connect.clear();
    return complete(id);
}

RNIC_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* conn_param) {
    if (cm_id == nullptr) return fail(EINVAL);
    Id& id = *id_of(cm_id);
    const IdPart* part = device_part(id);
    if (part == nullptr || (cm_id->qp == nullptr && conn_param == nullptr)) return fail(EINVAL);
    const uint32_t qp_num = cm_id->qp != nullptr ? cm_id->qp->qp_num : conn_param->qp_num;
    const uint8_t srq = cm_id->qp != nullptr ? cm_id->qp->srq != nullptr : conn_param->srq;
    if (const int rc = valid_param(id, conn_param); rc != 0) return fail(rc);
    if (conn_param == nullptr || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
        id.initiator_depth = std::min(id.initiator_depth, id.device->max_initiator_depth);
    else
        id.initiator_depth = conn_param->initiator_depth;
    if (conn_param == nullptr || conn_param->responder_resources == RDMA_MAX_RESP_RES)
        id.responder_resources = std::min(id.responder_resources, id.device->max_responder_resources);
    else
        id.responder_resources = conn_param->responder_resources;
    if (cm_id->qp_type != IBV_QPT_UD) {
        if (modify_qp_rtr(id, id.responder_resources) != 0) return -1;
        if (modify_qp_rts(id, id.initiator_depth) != 0) return -1;
    }
    abi::CmConnParam param;
    if (const int rc = to_cm_param(id, conn_param, qp_num, srq, param); rc != 0) return fail(rc);
    if (const int rc = calls::accept(*part->dev, part->handle, param); rc != 0) {
        modify_qp_err(id);
        return fail(device_error(rc));
    }
    if (cm_id->qp_type == IBV_QPT_UD) return 0;
    return complete(id);
}

namespace {

int reject_with_reason(rdma_cm_id* cm_id, const void* private_data, uint8_t private_data_len, uint32_t reason) {
    if (cm_id == nullptr) return fail(EINVAL);
    const IdPart* part = device_part(*id_of(cm_id));
    if (part == nullptr) return fail(EINVAL);
    const uint32_t length = private_data != nullptr ? private_data_len : 0;
    const int rc = calls::reject(*part->dev, part->handle, reason, private_data, length);
    return rc == 0 ? 0 : fail(device_error(rc));
}

}  // namespace

RNIC_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject_with_reason(id, private_data, private_data_len, 0);
}

// IBTA's reject reason 35, "vendor option not supported", as rdma-core sends it.
RNIC_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject_with_reason(id, private_data, private_data_len, 35);
}

RNIC_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
    if (cm_id == nullptr || cm_id->verbs == nullptr || cm_id->verbs->device == nullptr) return fail(EINVAL);
    Id& id = *id_of(cm_id);
    // An IB transport flushes the QP first (librdmacm's ucma_shutdown).
    if (modify_qp_err(id) != 0) return -1;
    const IdPart* part = device_part(id);
    if (part == nullptr) return fail(EINVAL);
    if (const int rc = calls::disconnect(*part->dev, part->handle); rc != 0) return fail(device_error(rc));
    return complete(id);
}

// The active side that took CONNECT_RESPONSE itself (no QP on the id) moved its own QP to RTS;
// this sends the RTU.
RNIC_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
    if (cm_id == nullptr || cm_id->qp != nullptr) return fail(EINVAL);
    const IdPart* part = device_part(*id_of(cm_id));
    if (part == nullptr) return fail(EINVAL);
    const int rc = calls::establish(*part->dev, part->handle);
    return rc == 0 ? 0 : fail(device_error(rc));
}

RNIC_EXPORT int rdma_notify(rdma_cm_id* cm_id, ibv_event_type event) {
    if (cm_id == nullptr) return fail(EINVAL);
    const IdPart* part = device_part(*id_of(cm_id));
    if (part == nullptr) return fail(EINVAL);
    const int rc = calls::notify(*part->dev, part->handle, event);
    return rc == 0 ? 0 : fail(device_error(rc));
}
