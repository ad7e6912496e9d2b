// Socket options as rdma-core's rsockets take them (SOL_SOCKET, IPPROTO_TCP, IPPROTO_IPV6 and
// SOL_RDMA for the queue, inline and iomap sizes and the route), rfcntl's O_NONBLOCK, and the
// socket's addresses.
#include <endian.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>

#include "export.hpp"
#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

// SO_RCVBUF/SO_SNDBUF double the value as Linux does; beyond 1 GiB a ring could not be
// registered anyway.
constexpr uint64_t kMaxBuffer = uint64_t{1} << 30;

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

uint32_t default_keepalive_time() {
    uint32_t t = 7200;
    if (FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r")) {
        if (std::fscanf(f, "%u", &t) != 1) t = 7200;
        std::fclose(f);
    }
    return t;
}

void set_keepalive(Rsocket& rs, bool on) {
    if (on && rs.keepalive_time.load() == 0) rs.keepalive_time.store(default_keepalive_time());
    rs.keepalive.store(on);
    rs.keepalive_due_ms.store(on ? now_ms() + int64_t{1000} * rs.keepalive_time.load() : 0);
    service::keepalive_changed();
}

uint32_t doubled(uint32_t v) {
    return static_cast<uint32_t>(std::min<uint64_t>(uint64_t{v} << 1, kMaxBuffer));
}

// rdma-core's conversion of a route's path record to the ibv_path_data RDMA_ROUTE gives.
ibv_path_data path_data(const ibv_sa_path_rec& p) {
    ibv_path_data d{};
    d.path.dgid = p.dgid;
    d.path.sgid = p.sgid;
    d.path.dlid = p.dlid;
    d.path.slid = p.slid;
    d.path.flowlabel_hoplimit = htobe32((be32toh(p.flow_label) << 8) | p.hop_limit);
    d.path.tclass = p.traffic_class;
    d.path.reversible_numpath = static_cast<uint8_t>(p.reversible << 7 | 1);
    d.path.pkey = p.pkey;
    d.path.qosclass_sl = htobe16(p.sl);
    d.path.mtu = static_cast<uint8_t>(p.mtu | 2 << 6);  // "exactly"
    d.path.rate = static_cast<uint8_t>(p.rate | 2 << 6);
    d.path.packetlifetime = static_cast<uint8_t>(p.packet_life_time | 2 << 6);
    d.flags = static_cast<uint32_t>(p.preference);
    return d;
}

int put_int(void* optval, socklen_t* optlen, int value) {
    if (*optlen < static_cast<socklen_t>(sizeof(int))) return EINVAL;
    std::memcpy(optval, &value, sizeof value);
    *optlen = sizeof(int);
    return 0;
}

int get_route(Rsocket& rs, void* optval, socklen_t* optlen) {
    if (!rs.route.empty()) {
        if (*optlen < rs.route.size()) return EINVAL;
        std::memcpy(optval, rs.route.data(), rs.route.size());
        *optlen = static_cast<socklen_t>(rs.route.size());
        return 0;
    }
    if (*optlen < sizeof(ibv_path_data)) return EINVAL;
    socklen_t len = 0;
    const rdma_route& route = rs.cm_id->route;
    for (int i = 0; i < route.num_paths && len + sizeof(ibv_path_data) <= *optlen; ++i) {
        const ibv_path_data d = path_data(route.path_rec[i]);
        std::memcpy(static_cast<uint8_t*>(optval) + len, &d, sizeof d);
        len += sizeof d;
    }
    *optlen = len;
    return 0;
}

// The address's length is always told; a NULL address with length 0 only asks for it
// (librspreload's transpose_socket learns a socket's family so).
int copy_address(const sockaddr* src, sockaddr* dst, socklen_t* len) {
    if (len == nullptr || (dst == nullptr && *len != 0)) return fail(EFAULT);
    const socklen_t size = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (dst != nullptr) std::memcpy(dst, src, std::min(*len, size));
    *len = size;
    return 0;
}

}  // namespace

}  // namespace rnic::rdmacm::rsock

using namespace rnic::rdmacm::rsock;

RNIC_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (optval == nullptr) return fail(EFAULT);
    const bool is_linger = level == SOL_SOCKET && optname == SO_LINGER;
    const bool is_route = level == SOL_RDMA && optname == RDMA_ROUTE;
    if (!is_route && optlen < (is_linger ? sizeof(linger) : sizeof(int))) return fail(EINVAL);
    int value = 0;
    if (!is_linger && !is_route) std::memcpy(&value, optval, sizeof value);
    std::lock_guard lock(rs->cm_mu);
    uint64_t* opts = nullptr;
    bool on = false;
    int ret = fail(ENOTSUP);
    switch (level) {
        case SOL_SOCKET:
            opts = &rs->so_opts;
            switch (optname) {
                case SO_REUSEADDR:
                    ret = rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &value, sizeof value);
                    // Once bound the id cannot change; rdma-core lets that pass on IB transports.
                    if (ret != 0 && (errno == ENOSYS || rs->state_now() != st::init)) ret = 0;
                    on = value != 0;
                    break;
                case SO_RCVBUF:
                    if (rs->rbuf.data == nullptr)
                        rs->rbuf_size = std::max(doubled(static_cast<uint32_t>(value)), kSndLowat);
                    ret = 0;
                    break;
                case SO_SNDBUF:
                    if (rs->sbuf.data == nullptr) rs->sbuf_size = doubled(static_cast<uint32_t>(value));
                    if (rs->sbuf_size < kSndLowat) rs->sbuf_size = kSndLowat << 1;
                    ret = 0;
                    break;
                case SO_LINGER: {
                    linger l{};
                    std::memcpy(&l, optval, sizeof l);
                    on = l.l_onoff == 0;  // stored inverted: the default (0) is "on"
                    ret = 0;
                    break;
                }
                case SO_KEEPALIVE:
                    set_keepalive(*rs, value != 0);
                    on = value != 0;
                    ret = 0;
                    break;
                case SO_OOBINLINE:
                    on = value != 0;
                    ret = 0;
                    break;
                default:
                    break;
            }
            break;
        case IPPROTO_TCP:
            opts = &rs->tcp_opts;
            switch (optname) {
                case TCP_KEEPCNT:
                case TCP_KEEPINTVL:
                    ret = 0;  // a reliable connection has no probes to count
                    break;
                case TCP_KEEPIDLE:
                    if (value <= 0) {
                        ret = fail(EINVAL);
                        break;
                    }
                    rs->keepalive_time.store(static_cast<uint32_t>(value));
                    if (rs->keepalive.load()) set_keepalive(*rs, true);
                    ret = 0;
                    break;
                case TCP_NODELAY:
                    on = value != 0;
                    ret = 0;
                    break;
                case TCP_MAXSEG:
                    ret = 0;
                    break;
                default:
                    break;
            }
            break;
        case IPPROTO_IPV6:
            opts = &rs->ipv6_opts;
            if (optname == IPV6_V6ONLY) {
                ret = rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &value, sizeof value);
                on = value != 0;
            }
            break;
        case SOL_RDMA:
            if (rs->state_now() >= st::opening) {
                ret = fail(EINVAL);
                break;
            }
            switch (optname) {
                case RDMA_SQSIZE:
                    rs->sq_size = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(value), kQpMaxSize));
                    ret = 0;
                    break;
                case RDMA_RQSIZE:
                    rs->rq_size = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(value), kQpMaxSize));
                    ret = 0;
                    break;
                case RDMA_INLINE:
                    rs->sq_inline = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(value), kQpMaxSize));
                    ret = 0;
                    break;
                case RDMA_IOMAPSIZE:
                    rs->target_iomap_size =
                        static_cast<uint16_t>(scale_to_value(static_cast<uint8_t>(value_to_scale(value, 8)), 8));
                    ret = 0;
                    break;
                case RDMA_ROUTE: {
                    const auto* p = static_cast<const uint8_t*>(optval);
                    rs->route.assign(p, p + optlen);
                    ret = 0;
                    break;
                }
                default:
                    break;
            }
            break;
        default:
            break;
    }
    if (ret == 0 && opts != nullptr && optname < 64) {
        if (on)
            *opts |= uint64_t{1} << optname;
        else
            *opts &= ~(uint64_t{1} << optname);
    }
    return ret;
}

RNIC_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (optval == nullptr || optlen == nullptr) return fail(EFAULT);
    std::lock_guard lock(rs->cm_mu);
    const auto bit = [](uint64_t opts, int name) { return name < 64 && (opts >> name) & 1 ? 1 : 0; };
    int ret = ENOTSUP;
    switch (level) {
        case SOL_SOCKET:
            switch (optname) {
                case SO_REUSEADDR:
                case SO_KEEPALIVE:
                case SO_OOBINLINE:
                    ret = put_int(optval, optlen, bit(rs->so_opts, optname));
                    break;
                case SO_RCVBUF:
                    ret = put_int(optval, optlen, static_cast<int>(rs->rbuf_size));
                    break;
                case SO_SNDBUF:
                    ret = put_int(optval, optlen, static_cast<int>(rs->sbuf_size));
                    break;
                case SO_LINGER:
                    if (*optlen < static_cast<socklen_t>(sizeof(linger))) {
                        ret = EINVAL;
                    } else {
                        const linger l{bit(rs->so_opts, SO_LINGER) ? 0 : 1, 0};
                        std::memcpy(optval, &l, sizeof l);
                        *optlen = sizeof l;
                        ret = 0;
                    }
                    break;
                case SO_ERROR:
                    ret = put_int(optval, optlen, rs->err.load());
                    if (ret == 0) rs->err.store(0);
                    break;
                default:
                    break;
            }
            break;
        case IPPROTO_TCP:
            switch (optname) {
                case TCP_KEEPCNT:
                case TCP_KEEPINTVL:
                    ret = put_int(optval, optlen, 1);
                    break;
                case TCP_KEEPIDLE:
                    ret = put_int(optval, optlen, static_cast<int>(rs->keepalive_time.load()));
                    break;
                case TCP_NODELAY:
                    ret = put_int(optval, optlen, bit(rs->tcp_opts, optname));
                    break;
                case TCP_MAXSEG: {
                    // The path MTU once the route is known (1 << (7 + IB MTU enum)), else 2048.
                    const rdma_route& r = rs->cm_id->route;
                    ret = put_int(optval, optlen,
                                  r.num_paths != 0 && r.path_rec != nullptr ? 1 << (7 + r.path_rec->mtu) : 2048);
                    break;
                }
                default:
                    break;
            }
            break;
        case IPPROTO_IPV6:
            if (optname == IPV6_V6ONLY) ret = put_int(optval, optlen, bit(rs->ipv6_opts, optname));
            break;
        case SOL_RDMA:
            switch (optname) {
                case RDMA_SQSIZE:
                    ret = put_int(optval, optlen, rs->sq_size);
                    break;
                case RDMA_RQSIZE:
                    ret = put_int(optval, optlen, rs->rq_size);
                    break;
                case RDMA_INLINE:
                    ret = put_int(optval, optlen, rs->sq_inline);
                    break;
                case RDMA_IOMAPSIZE:
                    ret = put_int(optval, optlen, rs->target_iomap_size);
                    break;
                case RDMA_ROUTE:
                    ret = get_route(*rs, optval, optlen);
                    break;
                default:
                    break;
            }
            break;
        default:
            break;
    }
    return ret == 0 ? 0 : fail(ret);
}

RNIC_EXPORT int rfcntl(int socket, int cmd, ...) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    if (cmd == F_GETFL) return rs->fd_flags.load();
    if (cmd != F_SETFL) return fail(ENOTSUP);
    va_list args;
    va_start(args, cmd);
    const int flags = va_arg(args, int);
    va_end(args);
    std::lock_guard lock(rs->cm_mu);
    // Only a listener's queue blocks in the kernel; every other wait is ours and looks at
    // fd_flags (the CM and completion channels never block).
    if (rs->accept_queue[0] >= 0) {
        const int q = fcntl(rs->accept_queue[0], F_GETFL);
        if (q < 0 || fcntl(rs->accept_queue[0], F_SETFL, (flags & O_NONBLOCK) ? q | O_NONBLOCK : q & ~O_NONBLOCK) != 0)
            return -1;
    }
    rs->fd_flags.store(flags);
    return 0;
}

RNIC_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    return copy_address(rdma_get_peer_addr(rs->cm_id), addr, addrlen);
}

RNIC_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
    const RsocketPtr rs = find(socket);
    if (rs == nullptr) return fail(EBADF);
    return copy_address(rdma_get_local_addr(rs->cm_id), addr, addrlen);
}
