// Addresses and routes: rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen,
// rdma_get_src_port, rdma_get_dst_port. The library picks the device (rnicd) an id goes to, the
// way the kernel's rdma_cm follows the routing table to a netdev and its RDMA device: the
// device owning a bound or given source address, else the one reaching the destination
// (devices.hpp); a wildcard (or loopback) address gets a daemon id on every device.
#include <cstring>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"
#include "ids.hpp"

namespace rnic::rdmacm {

namespace {

// A port taken on the first device can be in use on another: a wildcard bind to port 0 tries
// a few ports before giving up.
constexpr int kWildcardPortTries = 8;

int bind_wildcard(Id& id, const abi::CmAddress& addr) {
    const std::vector<CmDevice*> devices = open_devices();
    if (devices.empty()) return ENODEV;
    int rc = 0;
    for (int attempt = 0; attempt < kWildcardPortTries; ++attempt) {
        abi::CmAddress want = addr;
        abi::CmQueryReply first{};
        std::vector<IdPart> parts;
        rc = 0;
        for (CmDevice* dev : devices) {
            IdPart part;
            if ((rc = attach(id, *dev, &part)) != 0) break;
            abi::CmQueryReply reply{};
            if ((rc = device_error(calls::bind_addr(*dev, part.handle, want, &reply))) != 0) {
                detach(id, part);
                break;
            }
            if (parts.empty()) {
                first = reply;
                want.port = reply.src.port;
            }
            parts.push_back(part);
        }
        if (rc == 0) {
            id.parts = std::move(parts);
            apply_query(id, first);
            return 0;
        }
        for (const IdPart& p : parts) detach(id, p);
        if (!(rc == EADDRINUSE && addr.port == 0 && !parts.empty())) break;
    }
    return rc;
}

int bind_to_device(Id& id, const abi::CmAddress& addr) {
    CmDevice* dev = nullptr;
    if (const int rc = device_owning(addr, &dev); rc != 0) return rc;
    IdPart part;
    if (const int rc = attach(id, *dev, &part); rc != 0) return rc;
    abi::CmQueryReply reply{};
    if (const int rc = calls::bind_addr(*dev, part.handle, addr, &reply); rc != 0) {
        detach(id, part);
        return device_error(rc);
    }
    id.parts = {part};
    if (const int rc = set_device(id, *dev); rc != 0) return rc;
    apply_query(id, reply);
    return 0;
}

int bind(Id& id, const sockaddr* addr) {
    const auto a = to_cm(addr);
    if (!a) return EINVAL;
    if (!id.parts.empty()) return EINVAL;  // bound already (the kernel's id left IDLE)
    // A loopback address binds like the wildcard of its family and port. Linux's rdma_cm binds it
    // to a device of its choice (cma_bind_loopback); libfabric's verbs provider relies on that,
    // binding "localhost" to find a device for a passive endpoint given no address. rnicd has no
    // loopback device, so the id goes to every device, as a wildcard bind does.
    if (is_loopback(*a)) {
        abi::CmAddress any = *a;
        std::memset(any.addr, 0, sizeof any.addr);
        return bind_wildcard(id, any);
    }
    return is_any(*a) ? bind_wildcard(id, *a) : bind_to_device(id, *a);
}

// The family the id is bound to, 0 if it is not.
int bound_family(const Id& id) {
    return id.parts.empty() ? 0 : id.pub.route.addr.src_addr.sa_family;
}

int resolve_addr(Id& id, const sockaddr* src, const sockaddr* dst, int timeout_ms) {
    const socklen_t dst_len = address_length(dst);
    if (dst_len == 0 || (src != nullptr && address_length(src) == 0)) return EINVAL;
    const abi::CmAddress to = *to_cm(dst);
    abi::CmAddress from{};
    CmDevice* dev = nullptr;
    if (id.parts.empty()) {
        // Linux binds the idle id first: to the source given, else to the wildcard of dst's
        // family, which the daemon turns into its own address.
        if (src != nullptr && src->sa_family != 0) {
            from = *to_cm(src);
            if (from.family != to.family) return EINVAL;
        }
        const int rc =
            (from.family != 0 && !is_any(from)) ? device_owning(from, &dev) : device_routing(to, open_devices(), &dev);
        if (rc != 0) return rc;
        IdPart part;
        if (const int a = attach(id, *dev, &part); a != 0) return a;
        id.parts = {part};
    } else {
        if (bound_family(id) != to.family) return EINVAL;
        if (id.device != nullptr) {
            dev = id.device;
        } else {
            // Bound to a wildcard: the destination decides the device, the others let go.
            std::vector<CmDevice*> among;
            for (const IdPart& p : id.parts)
                if (!is_dead(*p.dev)) among.push_back(p.dev);
            if (const int rc = device_routing(to, among, &dev); rc != 0) return rc;
            std::vector<IdPart> keep;
            for (const IdPart& p : id.parts) (p.dev == dev ? keep.push_back(p) : detach(id, p));
            id.parts = std::move(keep);
        }
    }
    if (const int rc = set_device(id, *dev); rc != 0) return rc;
    const IdPart* part = device_part(id);
    if (part == nullptr) return EINVAL;
    if (const int rc = calls::resolve_addr(*dev, part->handle, from, to, static_cast<uint32_t>(timeout_ms)); rc != 0)
        return device_error(rc);
    std::memset(&id.pub.route.addr.dst_storage, 0, sizeof id.pub.route.addr.dst_storage);
    std::memcpy(&id.pub.route.addr.dst_storage, dst, dst_len);
    return 0;
}

int listen(Id& id, int backlog) {
    if (id.parts.empty()) {
        // Linux listens on the IPv4 wildcard, with a port of its choice, for an idle id.
        sockaddr_in any{};
        any.sin_family = AF_INET;
        if (const int rc = bind(id, reinterpret_cast<const sockaddr*>(&any)); rc != 0) return rc;
    }
    for (const IdPart& p : id.parts) {
        if (is_dead(*p.dev) && id.device == nullptr) continue;  // a wildcard's lost device
        if (const int rc = calls::listen(*p.dev, p.handle, backlog > 0 ? static_cast<uint32_t>(backlog) : 0); rc != 0)
            return device_error(rc);
    }
    return query_route(id);
}

in_port_t port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) {
        sockaddr_in in;
        std::memcpy(&in, &a, sizeof in);
        return in.sin_port;
    }
    if (a.ss_family == AF_INET6) {
        sockaddr_in6 in6;
        std::memcpy(&in6, &a, sizeof in6);
        return in6.sin6_port;
    }
    return 0;
}

}  // namespace

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
    if (id == nullptr || address_length(addr) == 0) return fail(EINVAL);
    const int rc = bind(*id_of(id), addr);
    return rc == 0 ? 0 : fail(rc);
}

RNIC_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
    if (id == nullptr) return fail(EINVAL);
    if (const int rc = resolve_addr(*id_of(id), src_addr, dst_addr, timeout_ms); rc != 0) return fail(rc);
    return complete(*id_of(id));
}

RNIC_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
    if (id == nullptr) return fail(EINVAL);
    const IdPart* part = device_part(*id_of(id));
    if (part == nullptr) return fail(EINVAL);
    if (const int rc = calls::resolve_route(*part->dev, part->handle, static_cast<uint32_t>(timeout_ms)); rc != 0)
        return fail(device_error(rc));
    return complete(*id_of(id));
}

RNIC_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
    if (id == nullptr) return fail(EINVAL);
    const int rc = listen(*id_of(id), backlog);
    return rc == 0 ? 0 : fail(rc);
}

RNIC_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
    return id == nullptr ? 0 : port_of(id->route.addr.src_storage);
}

RNIC_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
    return id == nullptr ? 0 : port_of(id->route.addr.dst_storage);
}
