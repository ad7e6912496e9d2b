// Ending rsockets: rshutdown tells the peer (a SHUTDOWN or DISCONNECT control message) and
// waits for everything sent to complete; rclose shuts a connected socket down, stops the
// service's watch, and destroys the endpoint and the id (whose DREQ the peer's CM answers).
#include <unistd.h>

#include <cerrno>

#include "export.hpp"
#include "rsocket.hpp"

using namespace rnic::rdmacm::rsock;

RNIC_EXPORT int rshutdown(int socket, int how) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
    rs->keepalive_due_ms.store(0);
    rs->keepalive.store(false);
    if (rs->cm_id == nullptr || rs->cm_id->qp == nullptr) return 0;
    std::unique_lock lock(rs->mu);
    int ret = 0;
    if (rs->in(st::connected)) {
        Ctrl ctrl = Ctrl::Disconnect;
        bool tell = true;
        if (how == SHUT_RDWR) {
            rs->clear_state(st::readable | st::writable);
        } else if (how == SHUT_WR) {
            rs->clear_state(st::writable);
            if (rs->in(st::readable)) ctrl = Ctrl::Shutdown;
        } else {
            rs->clear_state(st::readable);
            tell = !rs->in(st::writable);  // still sending: the peer need not know yet
        }
        if (tell) {
            if (!ctrl_avail(*rs))
                ret = wait_for(*rs, lock, false, [&] { return ctrl_avail(*rs) || !rs->in(st::connected); });
            if (ret == 0 && rs->in(st::connected) && ctrl_avail(*rs)) {
                ++rs->ctrl_seqno;
                ret = post_ctrl(*rs, make_imm(Op::Ctrl, static_cast<uint32_t>(ctrl)));
            }
            if (ret == 0 && rs->in(st::connected))
                (void)wait_for(*rs, lock, false, [&] { return all_sends_done(*rs); });
        }
    }
    if (rs->in(st::disconnected)) {
        // rdma-core's ucma_shutdown: the QP to ERR, whose flushed receives wake a sleeping rpoll.
        ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
        rs->cq_armed = true;
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        (void)ibv_modify_qp(rs->cm_id->qp, &attr, IBV_QP_STATE);
    }
    return ret;
}

RNIC_EXPORT int rclose(int socket) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (rs->in(st::connected)) rshutdown(socket, SHUT_RDWR);
    {
        // After this the service leaves the socket alone: it handles CM events under cm_mu and
        // sends keepalives under mu, each after looking at `closing`.
        std::scoped_lock lock(rs->cm_mu, rs->mu);
        rs->closing.store(true);
    }
    service::forget(*rs);
    erase(socket);
    if (rs->accept_queue[0] >= 0) {
        // Connections accepted for nobody: closed like any other.
        (void)fcntl(rs->accept_queue[0], F_SETFL, O_NONBLOCK);
        int index = -1;
        while (read(rs->accept_queue[0], &index, sizeof index) == static_cast<ssize_t>(sizeof index)) rclose(index);
    }
    release(*rs);
    return 0;
}
