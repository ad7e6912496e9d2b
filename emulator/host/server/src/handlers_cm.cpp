// The CM ops (abi/cm.hpp): rdma_ucm's commands, answered by the device's connection manager for
// the ids and channels of the session that made them. The CM checks states and fields and
// returns Linux's errno; here only what the socket carries is handled: a channel's socket pair,
// the bodies' private data lengths.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "control_request.hpp"
#include "notify_socket.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

namespace {

// Each CM channel holds a socket pair in the daemon; a session may have this many (Linux: one
// open file of /dev/infiniband/rdma_cm each, under the process's descriptor limit).
constexpr size_t kCmChannelsPerSession = 256;

}  // namespace

void HostService::Impl::on_cm_create_channel(Request& rq) {
    Session& s = rq.s;
    if (s.cm_channels.size() >= kCmChannelsPerSession) return rq.fail(EMFILE);
    NotifyPair pair;
    if (int rc = make_notify_pair(pair); rc) return rq.fail(rc);
    uint32_t handle = 0;
    if (int rc = cm->create_channel(s.id, handle); rc) {
        close(pair.daemon);
        close(pair.client);
        return rq.fail(rc);
    }
    s.cm_channels.insert(handle);
    cm_channel_fds[handle] = pair.daemon;
    const int out_fds[2] = {pair.client, pair.daemon};
    rq.ok(HandleReply{handle, 0}, out_fds);
    close(pair.client);
}

void HostService::Impl::on_cm_destroy_channel(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (int rc = cm->destroy_channel(s.id, req.handle); rc) return rq.fail(rc);
    s.cm_channels.erase(req.handle);
    if (const auto it = cm_channel_fds.find(req.handle); it != cm_channel_fds.end()) {
        close(it->second);
        cm_channel_fds.erase(it);
    }
    rq.fail(0);
}

void HostService::Impl::on_cm_create_id(Request& rq, const CmCreateIdRequest& req) {
    uint32_t id = 0;
    if (int rc = cm->create_id(rq.s.id, req, id); rc) return rq.fail(rc);
    rq.ok(HandleReply{id, 0});
}

void HostService::Impl::on_cm_destroy_id(Request& rq, const HandleRequest& req) {
    CmDestroyIdReply out{};
    if (int rc = cm->destroy_id(rq.s.id, req.handle, now_ns, out.events_reported); rc) return rq.fail(rc);
    rq.ok(out);
}

void HostService::Impl::on_cm_migrate_id(Request& rq, const CmMigrateIdRequest& req) {
    CmDestroyIdReply out{};
    if (int rc = cm->migrate_id(rq.s.id, req.id, req.channel, out.events_reported); rc) return rq.fail(rc);
    rq.ok(out);
}

void HostService::Impl::on_cm_bind_addr(Request& rq, const CmAddrRequest& req) {
    if (int rc = cm->bind_addr(rq.s.id, req.id, req.addr); rc) return rq.fail(rc);
    CmQueryReply out{};
    cm->query(rq.s.id, req.id, out);
    rq.ok(out);
}

void HostService::Impl::on_cm_resolve_addr(Request& rq, const CmResolveAddrRequest& req) {
    rq.fail(cm->resolve_addr(rq.s.id, req, now_ns));
}

void HostService::Impl::on_cm_resolve_route(Request& rq, const CmTimeoutRequest& req) {
    rq.fail(cm->resolve_route(rq.s.id, req.id, req.timeout_ms, now_ns));
}

void HostService::Impl::on_cm_query(Request& rq, const HandleRequest& req) {
    CmQueryReply out{};
    if (int rc = cm->query(rq.s.id, req.handle, out); rc) return rq.fail(rc);
    rq.ok(out);
}

void HostService::Impl::on_cm_listen(Request& rq, const CmListenRequest& req) {
    rq.fail(cm->listen(rq.s.id, req.id, req.backlog));
}

void HostService::Impl::on_cm_connect(Request& rq, const CmConnectRequest& req) {
    if (req.param.private_data_len > kCmPrivateDataMax) return rq.fail(EINVAL);
    rq.fail(cm->connect(rq.s.id, req.id, req.param, now_ns));
}

void HostService::Impl::on_cm_accept(Request& rq, const CmConnectRequest& req) {
    if (req.param.private_data_len > kCmPrivateDataMax) return rq.fail(EINVAL);
    rq.fail(cm->accept(rq.s.id, req.id, req.param, now_ns));
}

void HostService::Impl::on_cm_reject(Request& rq, const CmRejectRequest& req) {
    if (req.private_data_len > kCmPrivateDataMax) return rq.fail(EINVAL);
    rq.fail(cm->reject(rq.s.id, req.id, req.reason, {req.private_data, req.private_data_len}, now_ns));
}

void HostService::Impl::on_cm_disconnect(Request& rq, const HandleRequest& req) {
    rq.fail(cm->disconnect(rq.s.id, req.handle, now_ns));
}

void HostService::Impl::on_cm_init_qp_attr(Request& rq, const CmInitQpAttrRequest& req) {
    CmInitQpAttrReply out{};
    if (int rc = cm->init_qp_attr(rq.s.id, req.id, req.qp_state, out); rc) return rq.fail(rc);
    rq.ok(out);
}

void HostService::Impl::on_cm_notify(Request& rq, const CmNotifyRequest& req) {
    rq.fail(cm->notify(rq.s.id, req.id, req.event, now_ns));
}

void HostService::Impl::on_cm_set_option(Request& rq, const CmSetOptionRequest& req) {
    rq.fail(cm->set_option(rq.s.id, req));
}

void HostService::Impl::on_cm_get_event(Request& rq, const HandleRequest& req) {
    CmEvent out{};
    if (int rc = cm->get_event(rq.s.id, req.handle, out); rc) return rq.fail(rc);
    rq.ok(out);
}

// Multicast over RoCEv2 (IGMP, the group's MAC, UD QPs attached to it) is not built: Linux's
// answer for a device that can do neither IB nor RoCE multicast.
void HostService::Impl::on_cm_join_multicast(Request& rq, const CmJoinRequest& req) {
    CmQueryReply q{};
    rq.fail(cm->query(rq.s.id, req.id, q) ? ENOENT : ENOSYS);
}

// Nothing can have been joined: ucma's answer for a group it does not know.
void HostService::Impl::on_cm_leave_multicast(Request& rq, const CmLeaveRequest&) {
    rq.fail(ENOENT);
}

void HostService::Impl::on_cm_establish(Request& rq, const HandleRequest& req) {
    rq.fail(cm->establish(rq.s.id, req.handle, now_ns));
}

}  // namespace rnic::host::server
