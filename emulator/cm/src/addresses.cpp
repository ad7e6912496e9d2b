// rdma_cm's addressing: port spaces and their bind lists (bind, ephemeral ports, REUSEADDR,
// AFONLY), listen, address resolution through the neighbour cache, the RoCE route, options.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "service_impl.hpp"

namespace rnic::cm {

namespace {

bool is_zero(const wire::Gid& g) noexcept {
    return g.is_zero();
}

bool in_prefix(const wire::Gid& a, const wire::Gid& b, uint8_t prefix) noexcept {
    for (int bit = 0; bit < prefix && bit < 128; ++bit) {
        const int byte = bit / 8;
        const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
        if ((a.raw[byte] & mask) != (b.raw[byte] & mask)) return false;
    }
    return true;
}

bool gid_link_local(const wire::Gid& g) noexcept {
    return g.raw[0] == 0xFE && (g.raw[1] & 0xC0) == 0x80;
}

}  // namespace

bool Endpoint::any() const noexcept {
    if (family == kAfInet) {
        const uint32_t a = addr.ipv4();
        return a == 0 || (a >> 24) == 127;
    }
    if (family == kAfInet6) {
        if (is_zero(addr)) return true;
        for (int i = 0; i < 15; ++i)
            if (addr.raw[i]) return false;
        return addr.raw[15] == 1;  // ::1
    }
    return false;
}

bool Endpoint::link_local() const noexcept {
    return family == kAfInet6 && gid_link_local(addr);
}

abi::CmAddress Endpoint::to_abi() const noexcept {
    abi::CmAddress a{};
    a.family = family;
    a.port = port;
    a.scope_id = scope_id;
    if (family) std::memcpy(a.addr, addr.raw.data(), 16);
    return a;
}

int Endpoint::from_abi(const abi::CmAddress& a, Endpoint& out) noexcept {
    out = {};
    if (a.family == 0) return 0;
    if (a.family != kAfInet && a.family != kAfInet6) return EAFNOSUPPORT;
    std::memcpy(out.addr.raw.data(), a.addr, 16);
    if (a.family == kAfInet) {
        if (is_zero(out.addr))
            out.addr = wire::Gid::from_ipv4(0);
        else if (!out.addr.is_ipv4_mapped())
            return EINVAL;
    }
    out.family = a.family;
    out.port = a.port;
    out.scope_id = a.family == kAfInet6 ? a.scope_id : 0;
    return 0;
}

bool same_address(const Endpoint& a, const Endpoint& b) noexcept {
    if (a.family != b.family || a.addr != b.addr) return false;
    return !b.link_local() || a.scope_id == b.scope_id;
}

int CmService::Impl::own_address(const wire::Gid& gid) const {
    for (size_t i = 0; i < config.addresses.size(); ++i)
        if (config.addresses[i].gid == gid) return static_cast<int>(i);
    return -1;
}

// The source address the IP stack would use towards `dst` from this port: the IPv4 address for
// IPv4; for IPv6 the link-local address towards a link-local destination, else an address whose
// prefix holds the destination, else the first global one.
int CmService::Impl::pick_source(const Endpoint& dst, Endpoint& src) const {
    int pick = -1;
    const auto& addrs = config.addresses;
    for (size_t i = 0; i < addrs.size() && pick < 0; ++i) {
        const wire::Gid& g = addrs[i].gid;
        if (dst.family == kAfInet ? g.is_ipv4_mapped()
                                  : !g.is_ipv4_mapped() && gid_link_local(g) == dst.link_local() &&
                                        (dst.link_local() || in_prefix(g, dst.addr, addrs[i].prefix_length)))
            pick = static_cast<int>(i);
    }
    if (pick < 0 && dst.family == kAfInet6 && !dst.link_local())
        for (size_t i = 0; i < addrs.size() && pick < 0; ++i)
            if (!addrs[i].gid.is_ipv4_mapped() && !gid_link_local(addrs[i].gid)) pick = static_cast<int>(i);
    if (pick < 0) return -1;
    src.family = dst.family;
    src.addr = addrs[static_cast<size_t>(pick)].gid;
    src.scope_id = dst.link_local() ? dst.scope_id : 0;
    return pick;
}

// ---- port spaces (Linux's cma_get_port and friends) ----

void CmService::Impl::bind_port(BindList& bl, Id& id) {
    id.src.port = bl.port;
    id.bind = &bl;
    bl.owners.push_back(&id);
}

void CmService::Impl::release_port(Id& id) {
    if (!id.bind) return;
    BindList* bl = id.bind;
    std::erase(bl->owners, &id);
    id.bind = nullptr;
    if (bl->owners.empty()) binds.erase({bl->port_space, bl->port});
}

bool CmService::Impl::port_is_unique(const BindList& bl, const Id& id) const {
    for (const Id* cur : bl.owners) {
        if (cur == &id) continue;
        if (id.dst.port && cur->dst.port && id.dst.port != cur->dst.port) continue;
        if (!id.src.any() && !cur->src.any() && !same_address(id.src, cur->src)) continue;
        if (id.dst.family && cur->dst.family && !id.dst.any() && !cur->dst.any() && !same_address(id.dst, cur->dst))
            continue;
        return false;
    }
    return true;
}

int CmService::Impl::check_port(const BindList& bl, const Id& id, bool reuseaddr) const {
    for (const Id* cur : bl.owners) {
        if (cur == &id) continue;
        if (cur->state != RdmaState::Listen && reuseaddr && cur->reuseaddr) continue;
        if (id.afonly && cur->afonly && id.src.family != cur->src.family) continue;
        if (id.src.any() || cur->src.any()) return EADDRNOTAVAIL;
        if (same_address(id.src, cur->src)) return EADDRINUSE;
    }
    return 0;
}

int CmService::Impl::alloc_any_port(Id& id) {
    const uint32_t low = config.ephemeral_low, high = config.ephemeral_high;
    uint32_t remaining = high - low + 1;
    uint32_t rover = low + static_cast<uint32_t>(rng() % remaining);
    for (; remaining; --remaining) {
        // Not the port handed out last, so a closed connection's port is not reused at once.
        if (rover != last_used_port) {
            const auto key = std::make_pair(id.port_space, static_cast<uint16_t>(rover));
            const auto it = binds.find(key);
            bool ok = false;
            if (it == binds.end()) {
                BindList& bl = binds[key];
                bl.port_space = id.port_space;
                bl.port = static_cast<uint16_t>(rover);
                bind_port(bl, id);
                ok = true;
            } else if (port_is_unique(it->second, id)) {
                bind_port(it->second, id);
                ok = true;
            }
            if (ok) {
                last_used_port = rover;
                return 0;
            }
        }
        if (++rover > high) rover = low;
    }
    return EADDRNOTAVAIL;
}

int CmService::Impl::use_port(Id& id) {
    if (id.src.port < 1024 && hooks && !hooks->privileged(id.owner)) return EACCES;
    const auto key = std::make_pair(id.port_space, id.src.port);
    const auto it = binds.find(key);
    if (it == binds.end()) {
        BindList& bl = binds[key];
        bl.port_space = id.port_space;
        bl.port = id.src.port;
        bind_port(bl, id);
        return 0;
    }
    if (const int err = check_port(it->second, id, id.reuseaddr)) return err;
    bind_port(it->second, id);
    return 0;
}

int CmService::Impl::get_port(Id& id) {
    return id.src.port == 0 ? alloc_any_port(id) : use_port(id);
}

int CmService::Impl::bind(Id& id, const Endpoint& addr) {
    if (id.state != RdmaState::Idle) return EINVAL;
    // A link-local IPv6 address means nothing without the interface it is on.
    if (addr.link_local() && addr.scope_id == 0) return EINVAL;
    int index = 0;
    if (!addr.any()) {
        index = own_address(addr.addr);
        if (index < 0) return EADDRNOTAVAIL;
    }
    const Endpoint old_src = id.src, old_dst = id.dst;
    id.src = addr;
    id.sgid_index = static_cast<uint8_t>(index);
    if (!id.afonly_set) id.afonly = addr.family == kAfInet;  // net.ipv6.bindv6only is 0
    id.dst.family = addr.family;
    id.state = RdmaState::AddrBound;
    if (const int err = get_port(id)) {
        id.src = old_src;
        id.dst = old_dst;
        id.state = RdmaState::Idle;
        return err;
    }
    return 0;
}

// ---- listen ----

int CmService::listen(uint32_t owner, uint32_t id, uint32_t backlog) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (p->state == RdmaState::Idle) {
        Endpoint any;
        any.family = kAfInet;
        any.addr = wire::Gid::from_ipv4(0);
        if (const int err = impl_->bind(*p, any)) return err;
    }
    if (p->state != RdmaState::AddrBound) return EINVAL;
    p->state = RdmaState::Listen;
    if (p->reuseaddr && p->bind->owners.size() > 1) {
        if (const int err = impl_->check_port(*p->bind, *p, false)) {
            p->state = RdmaState::AddrBound;
            return err;
        }
    }
    p->backlog = backlog > 0 && backlog < abi::kCmBacklogMax ? backlog : abi::kCmBacklogMax;
    p->has_ib = true;
    p->ib = IbState::Listen;
    return 0;
}

// ---- address and route resolution ----

void CmService::Impl::poll_resolution(Id& id, uint64_t now) {
    wire::MacAddr mac{};
    const Resolution r = resolver ? resolver(id.dst.addr, now, mac) : Resolution::Resolved;
    if (r == Resolution::Pending && now < id.resolve_deadline) return;
    std::erase(resolving, id.handle);
    timers.cancel(id.resolve_timer);
    if (r == Resolution::Resolved) {
        id.have_dmac = true;
        id.dmac = mac;
        id.state = RdmaState::AddrResolved;
        queue_event(id, event_for(id, EventType::AddrResolved, 0));
        return;
    }
    // As Linux's addr_handler: back to the bound source, and the error as the event's status.
    id.src = id.bound_src;
    id.state = RdmaState::AddrBound;
    queue_event(id, event_for(id, EventType::AddrError, r == Resolution::Pending ? -ETIMEDOUT : -EHOSTUNREACH));
}

int CmService::resolve_addr(uint32_t owner, const abi::CmResolveAddrRequest& req, uint64_t now_ns) {
    Impl& m = *impl_;
    Id* p = m.find(owner, req.id);
    if (!p) return ENOENT;
    Endpoint dst, src;
    if (const int err = Endpoint::from_abi(req.dst, dst)) return err;
    if (const int err = Endpoint::from_abi(req.src, src)) return err;
    if (dst.family == 0) return EINVAL;
    if (m.channel_full(*p)) return ENOBUFS;
    const Endpoint old_dst = p->dst;
    p->dst = dst;
    if (p->state == RdmaState::Idle) {
        if (src.family == 0) {
            src.family = dst.family;
            src.addr = dst.family == kAfInet ? wire::Gid::from_ipv4(0) : wire::Gid{};
            src.scope_id = dst.scope_id;
        }
        if (const int err = m.bind(*p, src)) {
            p->dst = old_dst;
            return err;
        }
        p->dst = dst;
    }
    if (p->src.family != dst.family || p->state != RdmaState::AddrBound) {
        p->dst = old_dst;
        return EINVAL;
    }
    p->state = RdmaState::AddrQuery;
    p->bound_src = p->src;
    p->have_dmac = false;
    if (dst.any()) {
        // A wildcard destination is this host (Linux's cma_resolve_loopback).
        Endpoint self;
        if (m.pick_source(dst, self) < 0) {
            p->state = RdmaState::AddrBound;
            p->dst = old_dst;
            return EADDRNOTAVAIL;
        }
        p->dst.addr = self.addr;
    }
    if (p->src.any()) {
        Endpoint chosen;
        const int index = m.pick_source(p->dst, chosen);
        if (index < 0) {
            p->state = RdmaState::AddrBound;
            m.queue_event(*p, m.event_for(*p, EventType::AddrError, -ENETUNREACH));
            return 0;
        }
        const uint16_t port = p->src.port;
        p->src = chosen;
        p->src.port = port;
        p->sgid_index = static_cast<uint8_t>(index);
    }
    p->resolve_deadline = now_ns + uint64_t{req.timeout_ms} * 1'000'000;
    m.resolving.push_back(p->handle);
    m.poll_resolution(*p, now_ns);
    if (p->state == RdmaState::AddrQuery) m.timers.arm(p->resolve_timer, p->resolve_deadline);
    return 0;
}

// cma_resolve_iboe_route: RoCE needs no path query; the record is made from the addresses.
void CmService::Impl::fill_path(Id& id) {
    Path& p = id.path;
    p.sgid = id.src.addr;
    p.dgid = id.dst.addr;
    p.sgid_index = id.sgid_index;
    p.hop_limit = config.hop_limit;
    p.traffic_class = id.tos;
    p.sl = 0;
    p.mtu = config.active_mtu;
    p.rate = 0;
    p.packet_life_time =
        id.ack_timeout_set ? static_cast<uint8_t>(std::max<uint8_t>(id.ack_timeout, 1) - 1) : kIboePacketLifeTime;
    // cma_get_roce_udp_flow_label: the ports hashed, for IPv4 and IPv6 alike (no flowinfo here).
    p.flow_label = (uint32_t{id.src.port} * 31 + id.dst.port) & 0xFFFFF;
    id.path_valid = true;
}

int CmService::resolve_route(uint32_t owner, uint32_t id, uint32_t, uint64_t) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    if (p->state != RdmaState::AddrResolved) return EINVAL;
    if (impl_->channel_full(*p)) return ENOBUFS;
    impl_->fill_path(*p);
    p->state = RdmaState::RouteResolved;
    impl_->queue_event(*p, impl_->event_for(*p, EventType::RouteResolved, 0));
    return 0;
}

// ---- options (ucma_set_option_id) ----

int CmService::set_option(uint32_t owner, const abi::CmSetOptionRequest& req) {
    Id* p = impl_->find(owner, req.id);
    if (!p) return ENOENT;
    if (req.level == verbs::kOptionId) {
        switch (req.optname) {
            case verbs::kOptionIdTos:
                if (req.value > 0xFF) return EINVAL;
                p->tos = static_cast<uint8_t>(req.value);
                p->tos_set = true;
                return 0;
            case verbs::kOptionIdReuseAddr:
                if (req.value == 0 && p->state != RdmaState::Idle) return EINVAL;
                p->reuseaddr = req.value != 0;
                return 0;
            case verbs::kOptionIdAfOnly:
                if (p->state != RdmaState::Idle && p->state != RdmaState::AddrBound) return EINVAL;
                p->afonly = req.value != 0;
                p->afonly_set = true;
                return 0;
            case verbs::kOptionIdAckTimeout:
                if (p->qp_type != verbs::kQptRc || req.value > 0xFF) return EINVAL;
                p->ack_timeout = static_cast<uint8_t>(req.value);
                p->ack_timeout_set = true;
                return 0;
            default:
                return ENOSYS;
        }
    }
    // RDMA_OPTION_IB_PATH carries path records, which a 32-bit value cannot.
    if (req.level == verbs::kOptionIb) return req.optname == verbs::kOptionIbPath ? EINVAL : ENOSYS;
    return ENOSYS;
}

}  // namespace rnic::cm
