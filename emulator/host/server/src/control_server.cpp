// The control socket: accepting, reading one message at a time with its descriptors, checking
// it strictly, and the ops, each a call into the engine with the session's ownership checked.
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "notify_socket.hpp"
#include "peer_process.hpp"
#include "service_impl.hpp"

namespace rnic::host::server {
namespace {

using namespace rnic::host::abi;
namespace tp = rnic::transport;

template <class T>
bool body_as(std::span<const uint8_t> body, T& out) {
    if (body.size() != sizeof(T)) return false;
    std::memcpy(&out, body.data(), sizeof(T));
    return true;
}

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
    return {reinterpret_cast<const uint8_t*>(&v), sizeof(T)};
}

// Expected body size of each op (RegMr has a variable tail, checked by its handler).
std::optional<size_t> body_size(Op op) {
    switch (op) {
        case Op::Hello:
            return sizeof(HelloRequest);
        case Op::AllocPd:
            return 0;
        case Op::DeallocPd:
        case Op::ReleaseSegment:
        case Op::DeregMr:
        case Op::DestroyCompChannel:
        case Op::DestroyCq:
        case Op::QuerySrq:
        case Op::DestroySrq:
        case Op::DestroyAh:
            return sizeof(HandleRequest);
        case Op::ShareSegment:
            return sizeof(ShareSegmentRequest);
        case Op::RegMr:
            return std::nullopt;
        case Op::CreateCompChannel:
            return 0;
        case Op::CreateCq:
            return sizeof(CreateCqRequest);
        case Op::CreateSrq:
            return sizeof(CreateSrqRequest);
        case Op::ModifySrq:
            return sizeof(ModifySrqRequest);
        case Op::CreateQp:
            return sizeof(CreateQpRequest);
        case Op::ModifyQp:
            return sizeof(ModifyQpRequest);
        case Op::QueryQp:
            return sizeof(QueryQpRequest);
        case Op::DestroyQp:
            return sizeof(HandleRequest);
        case Op::CreateAh:
            return sizeof(CreateAhRequest);
        case Op::QueryPort:
            return 0;
        case Op::Stats:
            return sizeof(StatsRequest);
        case Op::SetLogLevel:
            return sizeof(SetLogLevelRequest);
    }
    return std::nullopt;
}

bool known_op(uint16_t op) {
    return op >= uint16_t(Op::Hello) && op <= uint16_t(Op::SetLogLevel);
}

uint32_t fds_wanted(Op op) {
    return op == Op::ShareSegment ? 1 : 0;
}

// Linux resolves a RoCE path like an IP route and replaces the application's hop limit with the
// route's (ib_resolve_unicast_gid_dmac, for modify_qp and create_ah alike): ibv_rc_pingpong asks
// for 1, rxe sends TTL 64. Our destinations are on-link neighbours with the default TTL, so every
// path gets 64, and a frame of ours survives a router the way rxe's does.
constexpr uint8_t kRouteHopLimit = 64;

tp::AddressVector to_engine(const abi::AddressVector& a) {
    tp::AddressVector v;
    std::memcpy(v.dgid.raw.data(), a.dgid, 16);
    v.sgid_index = a.sgid_index;
    v.flow_label = a.flow_label;
    v.hop_limit = kRouteHopLimit;
    v.traffic_class = a.traffic_class;
    v.sl = a.sl;
    return v;
}

abi::AddressVector to_abi(const tp::AddressVector& v) {
    abi::AddressVector a{};
    std::memcpy(a.dgid, v.dgid.raw.data(), 16);
    a.sgid_index = v.sgid_index;
    a.flow_label = v.flow_label;
    a.hop_limit = v.hop_limit;
    a.traffic_class = v.traffic_class;
    a.sl = v.sl;
    a.is_global = 1;
    a.port_num = 1;
    std::memcpy(a.dmac, v.dmac.data(), 6);
    return a;
}

tp::QpAttributes to_engine(const QpAttr& a) {
    tp::QpAttributes q;
    q.qp_state = static_cast<tp::QpState>(a.qp_state);
    q.cur_qp_state = static_cast<tp::QpState>(a.cur_qp_state);
    q.path_mtu = static_cast<tp::Mtu>(a.path_mtu);
    q.qkey = a.qkey;
    q.rq_psn = a.rq_psn;
    q.sq_psn = a.sq_psn;
    q.dest_qp_num = a.dest_qp_num;
    q.qp_access_flags = a.qp_access_flags;
    q.cap = {a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge, a.cap.max_inline_data};
    q.ah_attr = to_engine(a.ah_attr);
    q.pkey_index = a.pkey_index;
    q.en_sqd_async_notify = a.en_sqd_async_notify;
    q.sq_draining = a.sq_draining;
    q.max_rd_atomic = a.max_rd_atomic;
    q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    q.min_rnr_timer = a.min_rnr_timer;
    q.port_num = a.port_num;
    q.timeout = a.timeout;
    q.retry_cnt = a.retry_cnt;
    q.rnr_retry = a.rnr_retry;
    return q;
}

QpCaps to_abi(const tp::QpCap& c) {
    return {c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}

QpAttr to_abi(const tp::QpAttributes& q) {
    QpAttr a{};
    a.qp_state = static_cast<uint32_t>(q.qp_state);
    a.cur_qp_state = static_cast<uint32_t>(q.cur_qp_state);
    a.path_mtu = static_cast<uint32_t>(q.path_mtu);
    a.qkey = q.qkey;
    a.rq_psn = q.rq_psn;
    a.sq_psn = q.sq_psn;
    a.dest_qp_num = q.dest_qp_num;
    a.qp_access_flags = q.qp_access_flags;
    a.cap = to_abi(q.cap);
    a.ah_attr = to_abi(q.ah_attr);
    a.pkey_index = q.pkey_index;
    a.en_sqd_async_notify = q.en_sqd_async_notify;
    a.sq_draining = q.sq_draining;
    a.max_rd_atomic = q.max_rd_atomic;
    a.max_dest_rd_atomic = q.max_dest_rd_atomic;
    a.min_rnr_timer = q.min_rnr_timer;
    a.port_num = q.port_num;
    a.timeout = q.timeout;
    a.retry_cnt = q.retry_cnt;
    a.rnr_retry = q.rnr_retry;
    return a;
}

// IB width and speed for an Ethernet link of `mbps`, the table Linux 6.1's ib_get_eth_speed()
// gives every RoCE device (rxe included), so ibv_devinfo and perftest's rate report what the
// link is, not what an InfiniBand HCA would be. Unknown speed counts as 1 Gb/s there too.
struct IbRate {
    uint8_t width;  // IB_WIDTH_1X 1, 4X 2
    uint8_t speed;  // IB_SPEED_SDR 1, DDR 2, FDR10 8, EDR 32
};
IbRate ib_rate_of_ethernet(uint32_t mbps) {
    if (mbps == 0 || mbps <= 1000) return {1, 1};
    if (mbps <= 10000) return {1, 8};
    if (mbps <= 20000) return {2, 2};
    if (mbps <= 25000) return {1, 32};
    if (mbps <= 40000) return {2, 8};
    return {2, 32};
}

PortAttr port_attr(const tp::Engine& e, uint32_t ethernet_mtu, uint32_t link_speed_mbps) {
    const tp::PortAttributes p = e.query_port();
    PortAttr a{};
    a.state = p.active ? 4 : 1;  // IBV_PORT_ACTIVE : IBV_PORT_DOWN
    a.max_mtu = static_cast<uint32_t>(p.max_mtu);
    a.active_mtu = static_cast<uint32_t>(p.active_mtu);
    a.gid_tbl_len = p.gid_tbl_len;
    a.port_cap_flags = 1u << 26;  // IBV_PORT_IP_BASED_GIDS, as RoCE ports report
    a.max_msg_sz = p.max_msg_sz;
    a.pkey_tbl_len = p.pkey_tbl_len;
    const IbRate rate = ib_rate_of_ethernet(link_speed_mbps);
    a.active_width = rate.width;
    a.active_speed = rate.speed;
    a.phys_state = 5;  // LinkUp
    a.link_layer = 2;  // IBV_LINK_LAYER_ETHERNET
    a.ethernet_mtu = ethernet_mtu;
    return a;
}

DeviceAttr device_attr(const tp::Engine& e, const wire::MacAddr& mac) {
    const tp::DeviceAttributes d = e.query_device();
    const tp::DeviceLimits& l = d.limits;
    DeviceAttr a{};
    // EUI-64 from the MAC, as RoCE drivers derive the node GUID.
    const uint8_t g[8] = {uint8_t(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    for (uint8_t b : g) a.node_guid = (a.node_guid << 8) | b;
    a.sys_image_guid = a.node_guid;
    // What the engine really does: RNR NAKs for RC (IBV_DEVICE_RC_RNR_NAK_GEN) and a system
    // image GUID (IBV_DEVICE_SYS_IMAGE_GUID). No APM, memory windows, XRC or SRQ resize.
    constexpr uint32_t kSysImageGuid = 1u << 11, kRcRnrNakGen = 1u << 12;
    a.device_cap_flags = kSysImageGuid | kRcRnrNakGen;
    a.max_mr_size = l.max_mr_size;
    a.page_size_cap = d.page_size_cap;
    a.vendor_id = d.vendor_id;
    a.vendor_part_id = d.vendor_part_id;
    a.max_qp = l.max_qp;
    a.max_qp_wr = l.max_qp_wr;
    a.max_sge = l.max_sge;
    a.max_sge_rd = l.max_sge;
    a.max_cq = l.max_cq;
    a.max_cqe = l.max_cqe;
    a.max_mr = l.max_mr;
    a.max_pd = l.max_pd;
    a.max_qp_rd_atom = l.max_qp_rd_atom;
    a.max_qp_init_rd_atom = l.max_qp_init_rd_atom;
    a.max_res_rd_atom = l.max_qp_rd_atom * l.max_qp;
    a.atomic_cap = static_cast<uint32_t>(d.atomic_cap);
    a.max_srq = l.max_srq;
    a.max_srq_wr = l.max_srq_wr;
    a.max_srq_sge = l.max_srq_sge;
    a.max_ah = l.max_ah;
    a.max_inline_data = l.max_inline_data;
    a.max_msg_size = l.max_msg_size;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = d.phys_port_cnt;
    std::snprintf(a.fw_ver, sizeof a.fw_ver, "rnic %u", unsigned{kAbiVersion});
    return a;
}

void close_fds(std::vector<int>& fds) {
    for (int& fd : fds)
        if (fd >= 0) close(fd);
    fds.clear();
}

int take_fd(std::vector<int>& fds) {
    const int fd = fds.front();
    fds.front() = -1;
    return fd;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The socket

void HostService::Impl::listen() {
    std::error_code ec;
    if (std::filesystem::create_directories(config.run_dir, ec)) {
        // Whatever the umask: the users the socket's mode admits must be able to reach it.
        if (chmod(config.run_dir.c_str(), 0755) != 0)
            throw std::runtime_error("cannot chmod run directory " + config.run_dir + ": " + std::strerror(errno));
    } else if (!ec) {
        struct stat dir {};
        // A directory someone else made keeps its mode; say so if it hides the socket.
        if (stat(config.run_dir.c_str(), &dir) == 0 && (config.socket_mode & 0007) && !(dir.st_mode & S_IXOTH))
            spdlog::warn(
                "run directory {} (mode {:o}) is not searchable by other users: only its owner and group "
                "can reach the socket",
                config.run_dir, dir.st_mode & 07777);
    }
    if (ec) throw std::runtime_error("cannot create run directory " + config.run_dir + ": " + ec.message());
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) throw std::runtime_error("socket path too long: " + path);

    // A socket file may be a live daemon's (refuse) or a crashed one's (remove it).
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
        const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::memcpy(sa.sun_path, path.c_str(), path.size());
        const int rc = connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
        const int err = errno;
        close(probe);
        if (rc == 0) throw std::runtime_error("another rnicd is serving " + path);
        if (err != ECONNREFUSED && err != ENOTSOCK && err != EPROTOTYPE)
            throw std::runtime_error("cannot probe " + path + ": " + std::strerror(err));
        spdlog::info("removing stale socket {}", path);
        unlink(path.c_str());
    }
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const int err = errno;
        if (fd >= 0) close(fd);
        throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(err));
    }
    // connect() needs write permission on the socket file; bind left the umask's mode. Set
    // before listen(), so nobody the mode excludes ever gets in.
    const gid_t gid = config.socket_gid ? static_cast<gid_t>(*config.socket_gid) : static_cast<gid_t>(-1);
    if ((config.socket_gid && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) ||
        chmod(path.c_str(), config.socket_mode) != 0 || ::listen(fd, 64) != 0) {
        const int err = errno;
        close(fd);
        unlink(path.c_str());
        throw std::runtime_error("cannot set up " + path + ": " + std::strerror(err));
    }
    acceptor.emplace(io, fd);
    listening = true;
    accept_next();
}

void HostService::Impl::accept_next() {
    acceptor->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec || !listening) return;
        woken = true;
        for (;;) {
            const int fd = accept4(acceptor->native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;
            ucred cred{};
            socklen_t len = sizeof cred;
            const int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
            const int err = rc == 0 ? 0 : errno;
            auto s = std::make_shared<Session>(next_session++, Session::Socket(io, fd));
            sessions.emplace(s->id, s);
            ++counters.sessions_opened;
            if (rc == 0 && len == sizeof cred) {
                s->pid = static_cast<uint32_t>(cred.pid);
                s->uid = cred.uid;
                s->peer_known = true;
                // Who registers memory, and its limit should it be gone by the time it does:
                // both read from /proc now, while the connecting process surely exists.
                s->process = {s->pid, process_start_time(s->pid).value_or(0)};
                s->accepted_lock_limit = process_lock_limit(s->process).value_or(LockLimit{});
                spdlog::debug("session {}: connected (pid {}, uid {})", s->id, s->pid, s->uid);
            } else {
                // Per-user limits, Stats' view and the memory-lock limit all hang on the peer's
                // identity: a peer we cannot identify must not pass as uid 0. Its Hello gets
                // EACCES, which the client can report, where closing now would look like a
                // crashed daemon.
                spdlog::warn("session {}: cannot read the peer's credentials (SO_PEERCRED: {}); refusing it", s->id,
                             err ? std::strerror(err) : "short answer");
            }
            read_next(s);
        }
        accept_next();
    });
}

void HostService::Impl::read_next(const std::shared_ptr<Session>& s) {
    if (s->closed || s->reading || s->deferred) return;
    s->reading = true;
    s->socket.async_wait(Session::Socket::wait_read, [this, s](const boost::system::error_code& ec) {
        s->reading = false;
        woken = true;
        if (s->closed) return;
        if (ec) {
            close_session(*s, "socket error");
            return;
        }
        on_readable(s);
    });
}

void HostService::Impl::on_readable(const std::shared_ptr<Session>& s) {
    iovec iov{rx_buffer.data(), rx_buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(s->socket.native_handle(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        read_next(s);
        return;
    }
    std::vector<int> fds;
    if (n >= 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                fds.push_back(fd);
            }
        }
    }
    if (n <= 0) {  // EOF (SEQPACKET reads 0 only at end of stream) or an error
        close_fds(fds);
        close_session(*s, n == 0 ? "disconnected" : "receive error");
        return;
    }
    ++counters.control_messages;
    MessageHeader h{};
    if (static_cast<size_t>(n) < sizeof h || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (static_cast<size_t>(n) >= sizeof h) std::memcpy(&h, rx_buffer.data(), sizeof h);
        close_fds(fds);
        reject(*s, h, EPROTO, "truncated message");
        return;
    }
    std::memcpy(&h, rx_buffer.data(), sizeof h);
    if (h.magic != kMagic || h.version != kAbiVersion || h.length != static_cast<uint32_t>(n)) {
        close_fds(fds);
        reject(*s, h, EPROTO, h.magic != kMagic ? "bad magic" : h.version != kAbiVersion ? "ABI version" : "length");
        return;
    }
    if (!known_op(h.op)) {
        close_fds(fds);
        reject(*s, h, EINVAL, "unknown op");
        return;
    }
    const Op op = static_cast<Op>(h.op);
    const std::span<const uint8_t> body(rx_buffer.data() + sizeof h, static_cast<size_t>(n) - sizeof h);
    if (const auto want = body_size(op);
        (want && body.size() != *want) || (!want && body.size() < sizeof(RegMrRequest))) {
        close_fds(fds);
        reject(*s, h, EINVAL, "body length");
        return;
    }
    if (!s->hello_done && op != Op::Hello) {
        close_fds(fds);
        reject(*s, h, EPROTO, "first message is not Hello");
        return;
    }
    if (s->hello_done && op == Op::Hello) {
        close_fds(fds);
        reject(*s, h, EPROTO, "second Hello");
        return;
    }
    if (fds.size() != fds_wanted(op)) {
        close_fds(fds);
        reject(*s, h, EINVAL, "wrong number of descriptors");
        return;
    }
    dispatch(*s, h, body, fds);
    close_fds(fds);
    if (!s->closed) {
        read_next(s);
        arm_kick(s);  // from Hello on
    }
}

bool HostService::Impl::reply(Session& s, const MessageHeader& request, int result, std::span<const uint8_t> body,
                              std::span<const int> fds) {
    if (s.closed) return false;
    if (result != 0) {
        body = {};
        fds = {};
    }
    std::vector<uint8_t> out(sizeof(MessageHeader) + body.size());
    MessageHeader h{};
    h.magic = kMagic;
    h.version = kAbiVersion;
    h.op = request.op;
    h.seq = request.seq;
    h.length = static_cast<uint32_t>(out.size());
    h.status = result;
    std::memcpy(out.data(), &h, sizeof h);
    if (!body.empty()) std::memcpy(out.data() + sizeof h, body.data(), body.size());
    iovec iov{out.data(), out.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)]{};
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    // The client waits for each reply, so a full socket buffer means it stopped reading.
    if (sendmsg(s.socket.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(out.size())) {
        close_session(s, "reply not accepted");
        return false;
    }
    return true;
}

void HostService::Impl::reject(Session& s, const MessageHeader& request, int result, const char* why) {
    ++counters.control_errors;
    spdlog::warn("session {} (pid {}): malformed message (op {}): {}; closing", s.id, s.pid, request.op, why);
    reply(s, request, result);
    close_session(s, "malformed message");
}

// ---------------------------------------------------------------------------------------------
// The ops

namespace {

struct OpContext {
    HostService::Impl& impl;
    Session& s;
    const MessageHeader& h;
};

// The GID an address vector's MAC is resolved for, or an errno. The source GID picks the IP
// version (as rxe's network type follows the sgid), so the destination must be of the same kind:
// an IPv4-mapped dgid with an IPv6 source (or the reverse) could never be put on the wire.
int av_target(const tp::Engine& engine, const abi::AddressVector& av, wire::Gid& dgid) {
    const tp::AddressVector v = to_engine(av);
    const auto& gids = engine.gids();
    if (v.sgid_index >= gids.size()) return EINVAL;
    if (gids[v.sgid_index].is_ipv4_mapped() != v.dgid.is_ipv4_mapped()) {
        spdlog::info("address vector for {}: source GID {} ({}) is of the other IP version", v.dgid.to_string(),
                     unsigned{v.sgid_index}, gids[v.sgid_index].to_string());
        return EINVAL;
    }
    dgid = v.dgid;
    return 0;
}

}  // namespace

void HostService::Impl::finish_deferred(Session& s, Resolution r, const wire::MacAddr& mac) {
    Deferred d = std::move(*s.deferred);
    s.deferred.reset();
    --deferred_sessions;
    const Op op = static_cast<Op>(d.header.op);
    if (r == Resolution::Unreachable) {
        spdlog::info("session {}: {} unreachable (off-link, or no ARP/ND answer)", s.id, d.dgid.to_ip_string());
        reply(s, d.header, EHOSTUNREACH);
        return;
    }
    if (op == Op::ModifyQp) {
        ModifyQpRequest req{};
        std::memcpy(&req, d.body.data(), sizeof req);
        tp::QpAttributes a = to_engine(req.attr);
        a.ah_attr.dmac = mac;
        const int rc = engine.modify_qp(req.qpn, a, req.attr_mask);
        if (rc == 0) after_modify(*qps.at(req.qpn));
        reply(s, d.header, rc);
    } else {
        CreateAhRequest req{};
        std::memcpy(&req, d.body.data(), sizeof req);
        tp::AddressVector v = to_engine(req.av);
        v.dmac = mac;
        if (int rc = charge(s, Resource::Ahs); rc) {
            reply(s, d.header, rc);
            return;
        }
        const auto ah = engine.create_ah(req.pd, v);
        if (!ah) {
            uncharge(s, Resource::Ahs);
            reply(s, d.header, ah.error());
            return;
        }
        s.ahs.emplace(*ah, req.pd);
        const HandleReply out{*ah, 0};
        reply(s, d.header, 0, bytes_of(out));
    }
}

// A queue's memory (the ring the client maps and the engine's copy of its WQEs, or a CQ's
// completions) counts against the owner's RLIMIT_MEMLOCK as mlx5's queue buffers do (user memory
// pinned by ib_umem_get; rxe keeps them in kernel memory instead): without a bound, one user could
// make the daemon every application shares allocate until it is killed (a QP of 16,384 WRs of 32
// SGEs and 256 bytes inline takes 22 MB). CAP_IPC_LOCK lifts it, as for registered memory.
int HostService::Impl::charge_queue_memory(Session& s, size_t bytes, uint64_t& pages) {
    const uint64_t n = (bytes + kPageSize - 1) / kPageSize;
    const LockLimit limit = process_lock_limit(s.process).value_or(s.accepted_lock_limit);
    if (int rc = pinned->charge(s.process, n, limit); rc) {
        ++counters.memlock_refusals;
        spdlog::info("session {} (pid {}): a queue of {} pages over RLIMIT_MEMLOCK ({} bytes, {} pages held): {}", s.id,
                     s.pid, n, limit.bytes, pinned->pinned(s.process), rc == EPERM ? "EPERM" : "ENOMEM");
        return rc;
    }
    pages = n;
    return 0;
}

void HostService::Impl::dispatch(Session& s, const MessageHeader& h, std::span<const uint8_t> body,
                                 std::vector<int>& fds) {
    auto ok = [&](const auto& out, std::span<const int> out_fds = {}) { reply(s, h, 0, bytes_of(out), out_fds); };
    // A ring's memfd goes to the client and is closed here: the daemon keeps the mapping only,
    // so its descriptors do not grow with the number of QPs, CQs and SRQs.
    auto ok_closing = [&](const auto& out, int fd) {
        reply(s, h, 0, bytes_of(out), std::span<const int>(&fd, 1));
        close(fd);
    };
    auto fail = [&](int rc) { reply(s, h, rc); };
    auto owns_pd = [&](uint32_t pd) { return s.pds.count(pd) != 0; };

    switch (static_cast<Op>(h.op)) {
        case Op::Hello: {
            HelloRequest req{};
            body_as(body, req);
            if (!s.peer_known) {
                ++counters.sessions_refused;
                spdlog::warn("session {}: Hello refused: the peer's credentials are unknown", s.id);
                reply(s, h, EACCES);
                close_session(s, "refused");
                return;
            }
            // A verbs context is the cgroup's hca_handle: over the uid's cap, EAGAIN, as
            // ibv_open_device gets it. Sessions whose peer already closed do not count.
            if (held_by(s.uid, Resource::Sessions) >= limits_of(s.uid)[Resource::Sessions]) reap_hung_up(s.uid, s);
            if (int rc = charge(s, Resource::Sessions); rc) {
                ++counters.sessions_refused;
                reply(s, h, rc);
                close_session(s, "refused");
                return;
            }
            const uint32_t entries = round_up_power_of_two(std::max<uint32_t>(config.async_ring_entries, 1));
            const size_t doorbell_offset = page_round(ring_bytes(entries, sizeof(AsyncEventEntry)));
            if (int rc = s.async_memory.create("rnic-async", doorbell_offset + sizeof(DoorbellBits)); rc) {
                uncharge(s, Resource::Sessions);
                return fail(rc);
            }
            // The daemon makes the session's notification descriptors itself (notify_socket.hpp):
            // none can make its writes or reads wait, whatever the client does to them.
            int kick_fd = -1;
            if (int rc = make_kick(kick_fd); rc) {
                uncharge(s, Resource::Sessions);
                return fail(rc);
            }
            NotifyPair async_pair;
            if (int rc = make_notify_pair(async_pair); rc) {
                close(kick_fd);
                uncharge(s, Resource::Sessions);
                return fail(rc);
            }
            s.async_ring = init_ring(s.async_memory.data(), entries, sizeof(AsyncEventEntry));
            s.doorbells = new (s.async_memory.data() + doorbell_offset) DoorbellBits{};
            s.async_fd = async_pair.daemon;
            s.kick.emplace(io, kick_fd);
            s.hello_done = true;
            auto out = std::make_unique<HelloReply>();
            std::memset(out.get(), 0, sizeof *out);
            std::snprintf(out->device_name, sizeof out->device_name, "%s", config.name.c_str());
            out->device = device_attr(engine, config.mac);
            out->port = port_attr(engine, config.ethernet_mtu, config.link_speed_mbps);
            std::memcpy(out->mac, config.mac.data(), 6);
            const auto& gids = engine.gids();
            out->gid_count = static_cast<uint16_t>(std::min<size_t>(gids.size(), kMaxGids));
            for (size_t i = 0; i < out->gid_count; ++i) {
                std::memcpy(out->gids[i], gids[i].raw.data(), 16);
                out->gid_types[i] = kGidTypeRoceV2;
            }
            out->async_ring_size = entries;
            out->status_page_size = static_cast<uint32_t>(status_memory.size());
            out->session_id = s.id;
            out->doorbell_offset = static_cast<uint32_t>(doorbell_offset);
            // Neither the async memfd nor the client's notification end stays open here once sent.
            const int async_memfd = s.async_memory.take_fd();
            const int out_fds[5] = {status_memory.fd(), kick_fd, async_memfd, async_pair.client, async_pair.daemon};
            spdlog::info("session {}: hello from pid {} uid {} (client pid {})", s.id, s.pid, s.uid, req.pid);
            ok(*out, out_fds);
            close(async_pair.client);
            close(async_memfd);
            return;
        }
        case Op::AllocPd: {
            if (int rc = charge(s, Resource::Pds); rc) return fail(rc);
            const auto pd = engine.alloc_pd();
            if (!pd) {
                uncharge(s, Resource::Pds);
                return fail(pd.error());
            }
            s.pds.insert(*pd);
            return ok(HandleReply{*pd, 0});
        }
        case Op::DeallocPd: {
            HandleRequest req{};
            body_as(body, req);
            if (!owns_pd(req.handle)) return fail(EINVAL);
            // EBUSY while QPs, SRQs, AHs or MRs of the PD exist: the engine counts them.
            const int rc = engine.dealloc_pd(req.handle);
            if (rc == 0) {
                s.pds.erase(req.handle);
                uncharge(s, Resource::Pds);
            }
            return fail(rc);
        }
        case Op::ShareSegment: {
            ShareSegmentRequest req{};
            body_as(body, req);
            const int fd = take_fd(fds);
            if (s.segments.count(req.segment_id) || req.length == 0 || req.length % kPageSize) {
                close(fd);
                return fail(EINVAL);
            }
            auto seg = std::make_shared<Segment>();
            if (int rc = seg->memory.map_client(fd, req.length); rc) return fail(rc);
            if (!seg->memory.sealed())
                spdlog::debug("session {}: segment {} cannot be sealed against shrinking; accesses to it are guarded",
                              s.id, req.segment_id);
            s.segments.emplace(req.segment_id, std::move(seg));
            return fail(0);
        }
        case Op::ReleaseSegment: {
            HandleRequest req{};
            body_as(body, req);
            return fail(s.segments.erase(req.handle) ? 0 : EINVAL);
        }
        case Op::RegMr: {
            RegMrRequest req{};
            std::memcpy(&req, body.data(), sizeof req);
            if (req.run_count > (kMaxMessage / sizeof(SegmentRun)) ||
                body.size() != sizeof req + size_t{req.run_count} * sizeof(SegmentRun)) {
                reject(s, h, EINVAL, "RegMr run count");
                return;
            }
            if (!owns_pd(req.pd) || req.length == 0 || req.page_offset >= kPageSize || req.run_count == 0)
                return fail(EINVAL);
            // The engine could name the buffer by any iova, but Linux's uverbs refuses one whose
            // offset in its page differs from the buffer's, on every device: a program doing it
            // must fail here as it would on a real RNIC.
            if ((req.iova & (kPageSize - 1)) != req.page_offset) return fail(EINVAL);
            const uint64_t pages_needed = (uint64_t{req.page_offset} + req.length + kPageSize - 1) / kPageSize;
            std::vector<uintptr_t> pages;
            HostMr mr;
            for (uint32_t i = 0; i < req.run_count; ++i) {
                SegmentRun run{};
                std::memcpy(&run, body.data() + sizeof req + i * sizeof run, sizeof run);
                const auto it = s.segments.find(run.segment_id);
                if (it == s.segments.end() || run.offset % kPageSize || run.length % kPageSize || run.length == 0 ||
                    run.offset > it->second->memory.size() || run.length > it->second->memory.size() - run.offset ||
                    pages.size() + run.length / kPageSize > pages_needed)
                    return fail(EINVAL);
                for (uint64_t off = 0; off < run.length; off += kPageSize)
                    pages.push_back(reinterpret_cast<uintptr_t>(it->second->memory.data() + run.offset + off));
                mr.segments.push_back(it->second);
            }
            if (pages.size() != pages_needed) return fail(EINVAL);
            // The object first (uverbs charges the cgroup before the driver pins), then
            // ib_umem_get: every page the buffer spans counts against the process's
            // RLIMIT_MEMLOCK (overlapping MRs each count), read now as the kernel reads the
            // caller's; CAP_IPC_LOCK lifts it.
            if (int rc = charge(s, Resource::Mrs); rc) return fail(rc);
            const LockLimit limit = process_lock_limit(s.process).value_or(s.accepted_lock_limit);
            if (int rc = pinned->charge(s.process, pages_needed, limit); rc) {
                uncharge(s, Resource::Mrs);
                ++counters.memlock_refusals;
                spdlog::info("session {} (pid {}): RegMr of {} pages over RLIMIT_MEMLOCK ({} bytes, {} pages held): {}",
                             s.id, s.pid, pages_needed, limit.bytes, pinned->pinned(s.process),
                             rc == EPERM ? "EPERM" : "ENOMEM");
                return fail(rc);
            }
            const auto r = engine.reg_mr_pages(req.pd, pages, req.page_offset, req.length, req.iova, req.access);
            if (!r) {
                pinned->release(s.process, pages_needed);
                uncharge(s, Resource::Mrs);
                return fail(r.error());
            }
            mr.pinned_pages = pages_needed;
            mr.lkey = r->lkey;
            mr.rkey = r->rkey;
            mr.pd = req.pd;
            mr.length = req.length;
            s.mrs.emplace(r->lkey, std::move(mr));
            return ok(RegMrReply{r->lkey, r->rkey});
        }
        case Op::DeregMr: {
            HandleRequest req{};
            body_as(body, req);
            const auto it = s.mrs.find(req.handle);
            if (it == s.mrs.end()) return fail(EINVAL);
            const int rc = engine.dereg_mr(req.handle);
            if (rc == 0) {
                pinned->release(s.process, it->second.pinned_pages);
                uncharge(s, Resource::Mrs);
                s.mrs.erase(it);  // the segments it held may unmap now
            }
            return fail(rc);
        }
        case Op::CreateCompChannel: {
            NotifyPair pair;
            if (int rc = make_notify_pair(pair); rc) return fail(rc);
            const uint32_t handle = s.next_channel++;
            s.channels.emplace(handle, std::make_shared<Channel>(pair.daemon));
            const int out_fds[2] = {pair.client, pair.daemon};
            ok(HandleReply{handle, 0}, out_fds);
            close(pair.client);
            return;
        }
        case Op::DestroyCompChannel: {
            HandleRequest req{};
            body_as(body, req);
            const auto it = s.channels.find(req.handle);
            if (it == s.channels.end()) return fail(EINVAL);
            // Every CQ on the channel holds a reference: only the session's own is left when none does.
            if (it->second.use_count() > 1) return fail(EBUSY);
            s.channels.erase(it);
            return fail(0);
        }
        case Op::CreateCq: {
            CreateCqRequest req{};
            body_as(body, req);
            std::shared_ptr<Channel> channel;
            if (req.channel != 0) {
                const auto it = s.channels.find(req.channel);
                if (it == s.channels.end()) return fail(EINVAL);
                channel = it->second;
            }
            if (int rc = charge(s, Resource::Cqs); rc) return fail(rc);
            const auto handle = engine.create_cq(req.cqe);
            if (!handle) {
                uncharge(s, Resource::Cqs);
                return fail(handle.error());
            }
            auto cq = std::make_unique<HostCq>();
            const uint32_t size = round_up_power_of_two(req.cqe);
            if (int rc = cq->memory.create("rnic-cq", ring_bytes(size, sizeof(Cqe))); rc) {
                engine.destroy_cq(*handle);
                uncharge(s, Resource::Cqs);
                return fail(rc);
            }
            if (int rc = charge_queue_memory(s, cq->memory.size() + engine.cq_storage_bytes(*handle), cq->pinned_pages);
                rc) {
                engine.destroy_cq(*handle);
                uncharge(s, Resource::Cqs);
                return fail(rc);
            }
            cq->ring = init_ring(cq->memory.data(), size, sizeof(Cqe));
            cq->handle = *handle;
            cq->owner = &s;
            cq->cqe = req.cqe;
            cq->channel = req.channel;
            cq->channel_ref = std::move(channel);
            const CreateCqReply out{*handle, req.cqe, size, static_cast<uint32_t>(cq->memory.size())};
            const int out_fd = cq->memory.take_fd();
            s.cqs.insert(*handle);
            cqs.emplace(*handle, std::move(cq));
            return ok_closing(out, out_fd);
        }
        case Op::DestroyCq: {
            HandleRequest req{};
            body_as(body, req);
            if (!s.cqs.count(req.handle)) return fail(EINVAL);
            const int rc = engine.destroy_cq(req.handle);
            if (rc == 0) {
                pinned->release(s.process, cqs.at(req.handle)->pinned_pages);
                s.cqs.erase(req.handle);
                cqs.erase(req.handle);
                uncharge(s, Resource::Cqs);
            }
            return fail(rc);
        }
        case Op::CreateSrq: {
            CreateSrqRequest req{};
            body_as(body, req);
            if (!owns_pd(req.pd)) return fail(EINVAL);
            const tp::SrqAttributes attr{req.max_wr, std::max<uint32_t>(req.max_sge, 1), req.srq_limit};
            if (int rc = charge(s, Resource::Srqs); rc) return fail(rc);
            const auto handle = engine.create_srq(req.pd, attr);
            if (!handle) {
                uncharge(s, Resource::Srqs);
                return fail(handle.error());
            }
            auto srq = std::make_unique<HostSrq>();
            const uint32_t size = round_up_power_of_two(req.max_wr);
            const uint32_t stride = recv_stride(attr.max_sge);
            if (int rc = srq->memory.create("rnic-srq", ring_bytes(size, stride)); rc) {
                engine.destroy_srq(*handle);
                uncharge(s, Resource::Srqs);
                return fail(rc);
            }
            srq->wq.ring = init_ring(srq->memory.data(), size, stride);
            srq->wq.max_sge = attr.max_sge;
            srq->handle = *handle;
            srq->pd = req.pd;
            srq->owner = &s;
            srq->max_wr = req.max_wr;
            srq->srq_limit = req.srq_limit;
            if (int rc =
                    charge_queue_memory(s, srq->memory.size() + engine.srq_storage_bytes(*handle), srq->pinned_pages);
                rc) {
                engine.destroy_srq(*handle);
                uncharge(s, Resource::Srqs);
                return fail(rc);
            }
            srq->doorbell = s.take_doorbell({*handle, true});
            if (srq->doorbell == UINT32_MAX) {
                pinned->release(s.process, srq->pinned_pages);
                engine.destroy_srq(*handle);
                uncharge(s, Resource::Srqs);
                return fail(ENOMEM);
            }
            const CreateSrqReply out{*handle,       req.max_wr, attr.max_sge,
                                     size,          stride,     static_cast<uint32_t>(srq->memory.size()),
                                     srq->doorbell, 0};
            const int out_fd = srq->memory.take_fd();
            s.srqs.insert(*handle);
            srqs.emplace(*handle, std::move(srq));
            return ok_closing(out, out_fd);
        }
        case Op::ModifySrq: {
            ModifySrqRequest req{};
            body_as(body, req);
            if (!s.srqs.count(req.handle)) return fail(EINVAL);
            constexpr uint32_t kSrqMaxWr = 1, kSrqLimit = 2;  // enum ibv_srq_attr_mask
            if (req.attr_mask & ~(kSrqMaxWr | kSrqLimit)) return fail(EINVAL);
            if (req.attr_mask & kSrqMaxWr) return fail(EINVAL);  // resizing is not offered (no IBV_SRQ_RESIZE cap)
            if (req.attr_mask & kSrqLimit) {
                const int rc = engine.modify_srq(req.handle, req.srq_limit);
                if (rc) return fail(rc);
                srqs.at(req.handle)->srq_limit = req.srq_limit;
            }
            return fail(0);
        }
        case Op::QuerySrq: {
            HandleRequest req{};
            body_as(body, req);
            if (!s.srqs.count(req.handle)) return fail(EINVAL);
            const HostSrq& srq = *srqs.at(req.handle);
            return ok(QuerySrqReply{srq.max_wr, srq.wq.max_sge, srq.srq_limit, 0});
        }
        case Op::DestroySrq: {
            HandleRequest req{};
            body_as(body, req);
            if (!s.srqs.count(req.handle)) return fail(EINVAL);
            const int rc = engine.destroy_srq(req.handle);
            if (rc == 0) {
                s.release_doorbell(srqs.at(req.handle)->doorbell);
                pinned->release(s.process, srqs.at(req.handle)->pinned_pages);
                s.srqs.erase(req.handle);
                srqs.erase(req.handle);
                uncharge(s, Resource::Srqs);
            }
            return fail(rc);
        }
        case Op::CreateQp: {
            CreateQpRequest req{};
            body_as(body, req);
            if (!owns_pd(req.pd) || !s.cqs.count(req.send_cq) || !s.cqs.count(req.recv_cq) ||
                (req.srq && !s.srqs.count(req.srq)))
                return fail(EINVAL);
            tp::QpInitAttr init;
            init.qp_type = static_cast<tp::QpType>(req.qp_type);
            init.pd = req.pd;
            init.send_cq = req.send_cq;
            init.recv_cq = req.recv_cq;
            if (req.srq) init.srq = req.srq;
            init.cap = {req.cap.max_send_wr, req.cap.max_recv_wr, req.cap.max_send_sge, req.cap.max_recv_sge,
                        req.cap.max_inline_data};
            init.sq_sig_all = req.sq_sig_all != 0;
            if (int rc = charge(s, Resource::Qps); rc) return fail(rc);
            const auto info = engine.create_qp(init);
            if (!info) {
                uncharge(s, Resource::Qps);
                return fail(info.error());
            }
            const tp::QpCap& cap = info->cap;
            auto qp = std::make_unique<HostQp>();
            const uint32_t sq_size = round_up_power_of_two(std::max<uint32_t>(cap.max_send_wr, 1));
            const uint32_t sq_stride = send_stride(cap.max_send_sge, cap.max_inline_data);
            const uint32_t rq_size = req.srq ? 0 : round_up_power_of_two(std::max<uint32_t>(cap.max_recv_wr, 1));
            const uint32_t rq_stride = req.srq ? 0 : recv_stride(cap.max_recv_sge);
            const size_t rq_offset = page_round(ring_bytes(sq_size, sq_stride));
            const size_t total = rq_offset + (req.srq ? 0 : page_round(ring_bytes(rq_size, rq_stride)));
            if (int rc = qp->memory.create("rnic-qp", total); rc) {
                engine.destroy_qp(info->qpn);
                uncharge(s, Resource::Qps);
                return fail(rc);
            }
            qp->sq.ring = init_ring(qp->memory.data(), sq_size, sq_stride);
            qp->sq.max_sge = cap.max_send_sge;
            qp->sq.max_inline = cap.max_inline_data;
            qp->sq.wr_ids.assign(sq_size, 0);
            if (!req.srq) {
                qp->rq.ring = init_ring(qp->memory.data() + rq_offset, rq_size, rq_stride);
                qp->rq.max_sge = cap.max_recv_sge;
                qp->rq.wr_ids.assign(rq_size, 0);
            }
            qp->qpn = info->qpn;
            if (int rc =
                    charge_queue_memory(s, qp->memory.size() + engine.qp_storage_bytes(info->qpn), qp->pinned_pages);
                rc) {
                engine.destroy_qp(info->qpn);
                uncharge(s, Resource::Qps);
                return fail(rc);
            }
            qp->doorbell = s.take_doorbell({info->qpn, false});
            if (qp->doorbell == UINT32_MAX) {
                pinned->release(s.process, qp->pinned_pages);
                engine.destroy_qp(info->qpn);
                uncharge(s, Resource::Qps);
                return fail(ENOMEM);
            }
            qp->owner = &s;
            qp->type = init.qp_type;
            qp->pd = req.pd;
            qp->send_cq = req.send_cq;
            qp->recv_cq = req.recv_cq;
            qp->srq = req.srq;
            qp->sq_sig_all = init.sq_sig_all;
            qp->init_cap = to_abi(cap);
            CreateQpReply out{};
            out.qpn = info->qpn;
            out.cap = to_abi(cap);
            out.sq_size = sq_size;
            out.sq_stride = sq_stride;
            out.rq_size = rq_size;
            out.rq_stride = rq_stride;
            out.rq_offset = req.srq ? 0 : static_cast<uint32_t>(rq_offset);
            out.ring_bytes = static_cast<uint32_t>(qp->memory.size());
            out.doorbell = qp->doorbell;
            const int out_fd = qp->memory.take_fd();
            s.qps.insert(info->qpn);
            qps.emplace(info->qpn, std::move(qp));
            return ok_closing(out, out_fd);
        }
        case Op::ModifyQp: {
            ModifyQpRequest req{};
            body_as(body, req);
            if (!s.qps.count(req.qpn)) return fail(EINVAL);  // QPNs are global, but owner-only
            if ((req.attr_mask & tp::QpAttr::State) && req.attr.qp_state > uint32_t(tp::QpState::Err))
                return fail(EINVAL);
            wire::MacAddr mac{};
            if (req.attr_mask & tp::QpAttr::Av) {
                wire::Gid dgid;
                if (int rc = av_target(engine, req.attr.ah_attr, dgid); rc) return fail(rc);
                const Resolution r = resolver ? resolver(dgid, now_ns, mac) : Resolution::Unreachable;
                if (r != Resolution::Resolved) {
                    // Replied to from the poll loop once ARP or ND answers (or gives up).
                    s.deferred = Deferred{h, std::vector<uint8_t>(body.begin(), body.end()), dgid, now_ns};
                    ++deferred_sessions;
                    if (r == Resolution::Unreachable) return finish_deferred(s, r, mac);
                    ++counters.deferred_replies;
                    return;
                }
            }
            tp::QpAttributes a = to_engine(req.attr);
            a.ah_attr.dmac = mac;
            const int rc = engine.modify_qp(req.qpn, a, req.attr_mask);
            if (rc == 0) after_modify(*qps.at(req.qpn));
            return fail(rc);
        }
        case Op::QueryQp: {
            QueryQpRequest req{};
            body_as(body, req);
            if (!s.qps.count(req.qpn)) return fail(EINVAL);
            tp::QpAttributes a{};
            if (int rc = engine.query_qp(req.qpn, a); rc) return fail(rc);
            const HostQp& qp = *qps.at(req.qpn);
            QueryQpReply out{};
            out.attr = to_abi(a);
            out.init_cap = qp.init_cap;
            out.qp_type = static_cast<uint32_t>(qp.type);
            out.sq_sig_all = qp.sq_sig_all;
            out.send_cq = qp.send_cq;
            out.recv_cq = qp.recv_cq;
            out.srq = qp.srq;
            return ok(out);
        }
        case Op::DestroyQp: {
            HandleRequest req{};
            body_as(body, req);
            if (!s.qps.count(req.handle)) return fail(EINVAL);
            const int rc = engine.destroy_qp(req.handle);
            if (rc == 0) {
                s.release_doorbell(qps.at(req.handle)->doorbell);
                pinned->release(s.process, qps.at(req.handle)->pinned_pages);
                s.qps.erase(req.handle);
                qps.erase(req.handle);
                uncharge(s, Resource::Qps);
            }
            return fail(rc);
        }
        case Op::CreateAh: {
            CreateAhRequest req{};
            body_as(body, req);
            if (!owns_pd(req.pd)) return fail(EINVAL);
            wire::Gid dgid;
            if (int rc = av_target(engine, req.av, dgid); rc) return fail(rc);
            // Counted when made (after the neighbour answers); refused at once if already full.
            if (held_by(s.uid, Resource::Ahs) >= limits_of(s.uid)[Resource::Ahs]) {
                ++counters.user_limit_refusals;
                return fail(EAGAIN);
            }
            wire::MacAddr mac{};
            const Resolution r = resolver ? resolver(dgid, now_ns, mac) : Resolution::Unreachable;
            s.deferred = Deferred{h, std::vector<uint8_t>(body.begin(), body.end()), dgid, now_ns};
            ++deferred_sessions;
            if (r == Resolution::Pending) {
                ++counters.deferred_replies;
                return;
            }
            finish_deferred(s, r, mac);
            return;
        }
        case Op::DestroyAh: {
            HandleRequest req{};
            body_as(body, req);
            if (!s.ahs.count(req.handle)) return fail(EINVAL);
            const int rc = engine.destroy_ah(req.handle);
            if (rc == 0) {
                s.ahs.erase(req.handle);
                uncharge(s, Resource::Ahs);
            }
            return fail(rc);
        }
        case Op::QueryPort:
            return ok(port_attr(engine, config.ethernet_mtu, config.link_speed_mbps));
        case Op::Stats: {
            StatsRequest req{};
            body_as(body, req);
            if (req.what & ~kStatsAll) return fail(EINVAL);
            std::string json = stats_json(s.uid, req.what ? req.what : kStatsAll, req.first_qpn);
            if (json.size() > kMaxMessage - sizeof(MessageHeader)) json = R"({"error":"statistics too large"})";
            reply(s, h, 0, {reinterpret_cast<const uint8_t*>(json.data()), json.size()});
            return;
        }
        case Op::SetLogLevel: {
            // The daemon's logging is the host's, not a user's: like writing a sysctl.
            if (!administers(s)) {
                spdlog::info("session {} (pid {}): uid {} may not set the log level: EPERM", s.id, s.pid, s.uid);
                return fail(EPERM);
            }
            SetLogLevelRequest req{};
            body_as(body, req);
            const std::string name(req.level, strnlen(req.level, sizeof req.level));
            static constexpr const char* kLevels[] = {"trace", "debug", "info",     "warn", "warning",
                                                      "error", "err",   "critical", "off"};
            if (std::find_if(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return name == l; }) ==
                std::end(kLevels))
                return fail(EINVAL);
            spdlog::set_level(spdlog::level::from_str(name));
            spdlog::info("log level set to {} by session {} (pid {})", name, s.id, s.pid);
            return fail(0);
        }
    }
}

}  // namespace rnic::host::server
