// Setting up rsockets: rsocket, rbind, rlisten, raccept, rconnect; the endpoint (CQ, QP,
// buffers) and the connection data both sides exchange in the CM's private data; the connect
// and accept state machines over synchronous rdma_cm ids whose channels never block (each CM
// call starts an exchange, cm_complete takes its event once the channel is readable).
#include <endian.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "export.hpp"
#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

constexpr bool kHostIsNet = __BYTE_ORDER == __BIG_ENDIAN;

int set_nonblock(int fd, bool on) {
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

// The event the synchronous call is waiting for, checked: 0, EINPROGRESS, or the error.
int await_event(Rsocket& rs, rdma_cm_event_type expected) {
    if (cm_complete(rs.cm_id) != 0) return errno == EAGAIN ? EINPROGRESS : errno;
    return rs.cm_id->event->event == expected ? 0 : ECONNRESET;
}

// A synchronous CM call's result: it finished (its event taken), is waiting, or failed.
int started(int ret) {
    if (ret == 0) return 0;
    return errno == EAGAIN ? EINPROGRESS : errno;
}

uint16_t max_qp_size(rdma_cm_id* id) {
    ibv_device_attr attr{};
    if (id->verbs == nullptr || ibv_query_device(id->verbs, &attr) != 0) return kQpMaxSize;
    return static_cast<uint16_t>(std::min<int>(attr.max_qp_wr, kQpMaxSize));
}

int init_buffers(Rsocket& rs) {
    rs.rmsg.assign(rs.rq_size + 1u, 0);
    const size_t ctrl_room = rs.sq_inline < kMaxCtrlMsg ? kMaxCtrlMsg * kQpCtrlSize : 0;
    if (!rs.sbuf.allocate(rs.sbuf_size + ctrl_room)) return fail(ENOMEM);
    rs.smr = rdma_reg_msgs(rs.cm_id, rs.sbuf.data, rs.sbuf_size + ctrl_room);
    if (rs.smr == nullptr) return -1;
    const size_t list = sizeof(WireSge) * kTargetSgeCount + sizeof(WireIomap) * rs.target_iomap_size;
    if (!rs.target_list.allocate(list)) return fail(ENOMEM);
    rs.target_mr = rdma_reg_write(rs.cm_id, rs.target_list.data, list);
    if (rs.target_mr == nullptr) return -1;
    if (!rs.rbuf.allocate(rs.rbuf_size)) return fail(ENOMEM);
    rs.rmr = rdma_reg_write(rs.cm_id, rs.rbuf.data, rs.rbuf_size);
    if (rs.rmr == nullptr) return -1;
    rs.sbuf_bytes_avail = rs.sbuf_size;
    rs.sbuf_head = 0;
    // The first half of the ring is the peer's from the connection data on; the second is
    // offered with the first credits.
    rs.rbuf_free_offset = rs.rbuf_size >> 1;
    rs.rbuf_bytes_avail = rs.rbuf_size >> 1;
    rs.sqe_avail = rs.sq_size - static_cast<int>(rs.ctrl_max_seqno);
    rs.rseq_comp = static_cast<uint16_t>(rs.rq_size >> 1);
    return 0;
}

// Connected: the service watches the id's CM events from now on.
int connected_now(const RsocketPtr& rs) {
    rs->set_state(st::connect_rdwr);
    if (!rs->in_service) {
        rs->in_service = true;
        service::watch(rs);
    }
    return 0;
}

int reply_received(Rsocket& rs) {
    const rdma_conn_param& p = rs.cm_id->event->param.conn;
    const auto data = decode_conn_data({static_cast<const uint8_t*>(p.private_data), p.private_data_len});
    if (!data || data->version != kConnVersion) return ENOTSUP;
    if (data->target_sgl.length == 0) return EPROTO;
    save_conn_data(rs, *data);
    return 0;
}

int issue_connect(Rsocket& rs) {
    if (create_endpoint(rs) != 0) return errno;
    const auto data = encode_conn_data(format_conn_data(rs));
    rdma_conn_param param{};
    param.private_data = data.data();
    param.private_data_len = static_cast<uint8_t>(data.size());
    param.flow_control = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;  // the receive queue's flow control is RNR NAKs, retried forever
    rs.retries = 0;
    rs.set_state(st::connecting);
    const int rc = started(rdma_connect(rs.cm_id, &param));
    if (rc != 0) return rc;
    if (rs.cm_id->event->event != RDMA_CM_EVENT_ESTABLISHED) return ECONNRESET;
    return reply_received(rs);
}

int issue_route(Rsocket& rs) {
    rs.set_state(st::resolving_route);
    if (!rs.route.empty()) {
        // A path record of the application's (RDMA_ROUTE). rnicd computes RoCE routes itself
        // and refuses them, so its refusal falls back to resolving the route as usual.
        std::vector<uint8_t> route;
        route.swap(rs.route);
        const int ret = rdma_set_option(rs.cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, route.data(), route.size());
        if (ret == 0) {
            const int rc = await_event(rs, RDMA_CM_EVENT_ROUTE_RESOLVED);
            return rc == 0 ? issue_connect(rs) : rc;
        }
        if (errno == EAGAIN) return EINPROGRESS;
    }
    const int rc = started(rdma_resolve_route(rs.cm_id, 1000 << rs.retries++));
    return rc == 0 ? issue_connect(rs) : rc;
}

int issue_addr(Rsocket& rs) {
    rs.set_state(st::resolving_addr);
    sockaddr_storage dst;
    std::memcpy(&dst, &rs.cm_id->route.addr.dst_storage, sizeof dst);
    const int rc =
        started(rdma_resolve_addr(rs.cm_id, nullptr, reinterpret_cast<sockaddr*>(&dst), 1000 << rs.retries++));
    if (rc != 0) return rc;
    rs.retries = 0;
    return issue_route(rs);
}

// Sleeps until the socket's CM channel holds an event.
int wait_cm(Rsocket& rs) {
    pollfd p{rs.cm_id->channel->fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
    return 0;
}

}  // namespace

ConnData format_conn_data(const Rsocket& rs) {
    ConnData c;
    c.version = kConnVersion;
    c.flags = kConnFlagIomap | (kHostIsNet ? kConnFlagNet : 0);
    c.credits = rs.rq_size;
    c.target_iomap_size = static_cast<uint8_t>(value_to_scale(rs.target_iomap_size, 8));
    c.target_sgl = {reinterpret_cast<uintptr_t>(rs.target_list.data), rs.target_mr->rkey, kTargetSgeCount};
    c.data_buf = {reinterpret_cast<uintptr_t>(rs.rbuf.data), rs.rmr->rkey, rs.rbuf_size >> 1};
    return c;
}

void save_conn_data(Rsocket& rs, const ConnData& c) {
    rs.remote_sgl = c.target_sgl;
    rs.remote_sge = 1;  // entry 0 is data_buf, known from the connection data
    rs.swap_sgl = ((c.flags & kConnFlagNet) != 0) != kHostIsNet;
    if ((c.flags & kConnFlagIomap) != 0) {
        rs.remote_iomap.addr = c.target_sgl.addr + sizeof(WireSge) * c.target_sgl.length;
        rs.remote_iomap.length = static_cast<uint32_t>(scale_to_value(c.target_iomap_size, 8));
        rs.remote_iomap.key = c.target_sgl.key;
    }
    volatile WireSge& first = rs.target_sgl()[0];
    first.addr = c.data_buf.addr;
    first.length = c.data_buf.length;
    first.key = c.data_buf.key;
    rs.sseq_comp = c.credits;
    std::lock_guard lock(rs.map_mu);
    rs.iomap_slots.assign(rs.remote_iomap.length, IomapSlot{});
}

int create_endpoint(Rsocket& rs) {
    rdma_cm_id* id = rs.cm_id;
    const uint16_t max = max_qp_size(id);
    rs.sq_size = std::clamp<uint16_t>(rs.sq_size, kQpMinSize, std::max(max, kQpMinSize));
    rs.rq_size = std::clamp<uint16_t>(rs.rq_size, kQpMinSize, std::max(max, kQpMinSize));

    // Our completion channel never blocks: sleepers wait in poll() (wait_for, rpoll).
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (id->recv_cq_channel == nullptr) return -1;
    if (set_nonblock(id->recv_cq_channel->fd, true) != 0) return -1;
    id->recv_cq = ibv_create_cq(id->verbs, rs.sq_size + rs.rq_size, id, id->recv_cq_channel, 0);
    if (id->recv_cq == nullptr) return -1;
    id->send_cq_channel = id->recv_cq_channel;
    id->send_cq = id->recv_cq;

    ibv_qp_init_attr attr{};
    attr.qp_context = &rs;
    attr.send_cq = id->send_cq;
    attr.recv_cq = id->recv_cq;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 1;
    attr.cap.max_send_wr = rs.sq_size;
    attr.cap.max_recv_wr = rs.rq_size;
    attr.cap.max_send_sge = 2;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = rs.sq_inline;
    if (rdma_create_qp(id, nullptr, &attr) != 0) return -1;
    rs.sq_inline = static_cast<uint16_t>(std::min<uint32_t>(attr.cap.max_inline_data, kQpMaxSize));

    if (init_buffers(rs) != 0) return -1;
    for (uint32_t i = 0; i < rs.rq_size; ++i)
        if (post_recv(rs) != 0) return -1;
    return 0;
}

void release(Rsocket& rs) {
    {
        std::lock_guard lock(rs.map_mu);
        for (IomapSlot& s : rs.iomap_slots)
            if (s.mr != nullptr) ibv_dereg_mr(s.mr);
        rs.iomap_slots.clear();
        rs.iomap_queue.clear();
        for (ibv_mr* mr : rs.local_maps) ibv_dereg_mr(mr);
        rs.local_maps.clear();
    }
    if (rs.smr != nullptr) rdma_dereg_mr(rs.smr);
    if (rs.rmr != nullptr) rdma_dereg_mr(rs.rmr);
    if (rs.target_mr != nullptr) rdma_dereg_mr(rs.target_mr);
    rs.smr = rs.rmr = rs.target_mr = nullptr;
    if (rs.cm_id != nullptr) {
        if (rs.cm_id->recv_cq != nullptr && rs.unack_cqe != 0) ibv_ack_cq_events(rs.cm_id->recv_cq, rs.unack_cqe);
        rs.unack_cqe = 0;
        rdma_destroy_qp(rs.cm_id);  // and the CQ and its channel, as librdmacm does
        if (rs.cm_id->event != nullptr) {
            rdma_ack_cm_event(rs.cm_id->event);
            rs.cm_id->event = nullptr;
        }
        rdma_destroy_id(rs.cm_id);
        rs.cm_id = nullptr;
    }
    rs.verbs_released = true;
}

int connect_step(const RsocketPtr& self) {
    Rsocket& rs = *self;
    int rc = 0;
    switch (rs.state_now()) {
        case st::init:
        case st::bound:
            rc = issue_addr(rs);
            break;
        case st::resolving_addr:
            rc = await_event(rs, RDMA_CM_EVENT_ADDR_RESOLVED);
            if (rc == ETIMEDOUT && rs.retries <= kConnRetries) {
                rc = issue_addr(rs);
            } else if (rc == 0) {
                rs.retries = 0;
                rc = issue_route(rs);
            }
            break;
        case st::resolving_route:
            rc = await_event(rs, RDMA_CM_EVENT_ROUTE_RESOLVED);
            if (rc == ETIMEDOUT && rs.retries <= kConnRetries)
                rc = issue_route(rs);
            else if (rc == 0)
                rc = issue_connect(rs);
            break;
        case st::connecting:
            rc = await_event(rs, RDMA_CM_EVENT_ESTABLISHED);
            if (rc == 0) rc = reply_received(rs);
            break;
        case st::accepting:
            rc = await_event(rs, RDMA_CM_EVENT_ESTABLISHED);
            break;
        case st::connect_error:
        case st::disconnected:
        case st::error:
            return fail(ENOTCONN);
        default:
            return rs.in(st::connected) ? 0 : fail(EINVAL);
    }
    if (rc == 0) return connected_now(self);
    if (rc == EINPROGRESS) return fail(EINPROGRESS);
    rs.set_state(st::connect_error);
    rs.err.store(rc);
    return fail(rc);
}

int finish_opening(const RsocketPtr& rs, bool nonblock) {
    std::unique_lock lock(rs->cm_mu);
    for (;;) {
        const int rc = connect_step(rs);
        if (rc == 0 || errno != EINPROGRESS) return rc;
        if (nonblock) return fail(EAGAIN);
        lock.unlock();
        if (wait_cm(*rs) != 0) return -1;
        lock.lock();
    }
}

int accept_one(const RsocketPtr& l) {
    rdma_cm_id* id = nullptr;
    if (rdma_get_request(l->cm_id, &id) != 0) return errno == EAGAIN ? 0 : -1;
    auto rs = make_rsocket(SOCK_STREAM, l.get());
    rs->cm_id = id;
    const rdma_conn_param request = id->event->param.conn;
    const auto data = decode_conn_data({static_cast<const uint8_t*>(request.private_data), request.private_data_len});
    int ret = 0;
    if (set_nonblock(id->channel->fd, true) != 0 || insert(rs, id->channel->fd) < 0) {
        ret = -1;
    } else if (!data || data->version != kConnVersion || data->target_sgl.length == 0) {
        ret = fail(EPROTO);  // not an rsocket, or another version: rejected
    } else if (create_endpoint(*rs) == 0) {
        save_conn_data(*rs, *data);
        const auto reply = encode_conn_data(format_conn_data(*rs));
        rdma_conn_param param = request;
        param.private_data = reply.data();
        param.private_data_len = static_cast<uint8_t>(reply.size());
        std::lock_guard lock(rs->cm_mu);
        rs->set_state(st::accepting);
        ret = rdma_accept(id, &param);
        if (ret == 0)
            connected_now(rs);
        else if (errno == EAGAIN)
            ret = 0;  // the RTU's ESTABLISHED is taken when the socket is first used
    } else {
        ret = -1;
    }
    if (ret == 0) {
        const int index = rs->index;
        if (write(l->accept_queue[1], &index, sizeof index) == static_cast<ssize_t>(sizeof index)) return 1;
    }
    // A socket nobody will take: the peer is rejected (destroying the id sends REJ before RTU).
    rdma_reject(id, nullptr, 0);
    if (rs->index >= 0) erase(rs->index);
    service::forget(*rs);
    release(*rs);
    return 1;
}

}  // namespace rnic::rdmacm::rsock

using namespace rnic::rdmacm::rsock;

RNIC_EXPORT int rsocket(int domain, int type_and_flags, int protocol) {
    // socket(2)'s flags in the type are taken (rdma-core refuses them, so programs that ask for
    // SOCK_CLOEXEC, Python's among them, got kernel sockets from librspreload): SOCK_NONBLOCK is
    // O_NONBLOCK; the socket's descriptor is close-on-exec in any case.
    const int type = type_and_flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) || (type != SOCK_STREAM && type != SOCK_DGRAM) ||
        (type == SOCK_STREAM && protocol != 0 && protocol != IPPROTO_TCP) ||
        (type == SOCK_DGRAM && protocol != 0 && protocol != IPPROTO_UDP))
        return fail(ENOTSUP);
    // Datagram rsockets exchange addresses over a UDP socket on the RDMA device's IP address,
    // which rnicd's addresses are not (they belong to no kernel interface): not offered.
    if (type == SOCK_DGRAM) return fail(ENOTSUP);
    auto rs = make_rsocket(type, nullptr);
    if (rs->wake_fd < 0) return -1;
    if (rdma_create_id(nullptr, &rs->cm_id, rs.get(), RDMA_PS_TCP) != 0) return -1;
    rs->cm_id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
    const int fd = rs->cm_id->channel->fd;
    if ((type_and_flags & SOCK_NONBLOCK) != 0) rs->fd_flags.store(O_NONBLOCK);
    if (set_nonblock(fd, true) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || insert(rs, fd) < 0) {
        const int err = errno;
        release(*rs);
        return fail(err);
    }
    return fd;
}

RNIC_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (addr == nullptr) return fail(EFAULT);
    if (addrlen < sizeof(sa_family_t)) return fail(EINVAL);
    std::lock_guard lock(rs->cm_mu);
    if (rs->state_now() != st::init) return fail(EINVAL);
    if (rdma_bind_addr(rs->cm_id, const_cast<sockaddr*>(addr)) != 0) return -1;
    rs->set_state(st::bound);
    return 0;
}

RNIC_EXPORT int rlisten(int socket, int backlog) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    std::unique_lock lock(rs->cm_mu);
    if (rs->state_now() == st::listening) return 0;
    if (rs->state_now() != st::init && rs->state_now() != st::bound) return fail(EINVAL);
    if (rdma_listen(rs->cm_id, backlog) != 0) return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rs->accept_queue) != 0) return -1;
    // The service never waits on a listener's queue: a listener whose application takes no
    // connection rejects the ones past the socket's room.
    if (set_nonblock(rs->accept_queue[1], true) != 0) return -1;
    if ((rs->fd_flags.load() & O_NONBLOCK) != 0 && set_nonblock(rs->accept_queue[0], true) != 0) return -1;
    rs->set_state(st::listening);
    rs->in_service = true;
    lock.unlock();
    service::watch(rs);
    return 0;
}

RNIC_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (rs->state_now() != st::listening) return fail(EBADF);  // rdma-core's answer
    int index = -1;
    const ssize_t n = read(rs->accept_queue[0], &index, sizeof index);
    if (n != static_cast<ssize_t>(sizeof index)) return n < 0 ? -1 : fail(ECONNABORTED);
    if (addr != nullptr && addrlen != nullptr) rgetpeername(index, addr, addrlen);
    return index;
}

RNIC_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    std::unique_lock lock(rs->cm_mu);
    const uint32_t s = rs->state_now();
    if (s == st::init || s == st::bound) {
        if (addr == nullptr) return fail(EFAULT);
        const socklen_t need = addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        if ((addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || addrlen < need)
            return fail(addr->sa_family == AF_INET || addr->sa_family == AF_INET6 ? EINVAL : EAFNOSUPPORT);
        std::memcpy(&rs->cm_id->route.addr.dst_storage, addr, need);
    }
    const bool nonblock = rs->nonblocking(0);
    for (;;) {
        const int rc = connect_step(rs);
        if (rc == 0 || errno != EINPROGRESS || nonblock) return rc;
        lock.unlock();
        if (wait_cm(*rs) != 0) return -1;
        lock.lock();
    }
}
