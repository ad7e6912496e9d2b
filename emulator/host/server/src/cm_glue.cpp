// The connection manager's place in the host service: built from the device's addresses, each
// of its channels a socket woken once per queued event (as a completion channel), its ids counted
// against their owner's per-user cap (connection requests' too), and everything a session made
// destroyed when the session ends, as rdma_ucm's close of a process's file does.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

#include "notify_socket.hpp"
#include "service_impl.hpp"

namespace rnic::host::server {

void CmGlue::event_queued(uint32_t channel) {
    if (const auto it = impl.cm_channel_fds.find(channel); it != impl.cm_channel_fds.end()) notify(it->second);
}

int CmGlue::admit_id(uint32_t owner) {
    const auto it = impl.sessions.find(owner);
    if (it == impl.sessions.end() || it->second->closed) return ENODEV;
    return impl.charge(*it->second, Resource::CmIds);
}

void CmGlue::id_released(uint32_t owner) {
    if (const auto it = impl.sessions.find(owner); it != impl.sessions.end())
        impl.uncharge(*it->second, Resource::CmIds);
}

// Binding below port 1024 takes CAP_NET_BIND_SERVICE on Linux; here, root.
bool CmGlue::privileged(uint32_t owner) {
    const auto it = impl.sessions.find(owner);
    return it != impl.sessions.end() && it->second->uid == 0;
}

cm::CmConfig HostService::Impl::cm_config() const {
    cm::CmConfig c;
    // The node GUID Hello reports (device_attr): EUI-64 from the MAC, as RoCE drivers make it.
    const wire::MacAddr& m = config.mac;
    const uint8_t g[8] = {uint8_t(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
    for (uint8_t b : g) c.node_guid = (c.node_guid << 8) | b;
    c.local_ca_ack_delay = 15;
    c.keepalive_idle_ms = config.cm_keepalive_idle_ms;
    c.keepalive_probe_ms = config.cm_keepalive_probe_ms;
    c.keepalive_probes = config.cm_keepalive_probes;
    c.active_mtu = static_cast<uint32_t>(engine.query_port().active_mtu);
    // The GID table: the IPv4 GID first, then the IPv6 addresses in config.ipv6's order.
    const auto& gids = engine.gids();
    for (size_t i = 0; i < gids.size(); ++i) {
        uint8_t prefix = i == 0 ? config.prefix_length : 64;
        if (i > 0 && i - 1 < config.ipv6.size()) {
            const std::string_view text = config.ipv6[i - 1];
            if (const auto slash = text.rfind('/'); slash != std::string_view::npos)
                std::from_chars(text.data() + slash + 1, text.data() + text.size(), prefix);
        }
        c.addresses.push_back({gids[i], prefix});
    }
    return c;
}

void HostService::Impl::start_cm() {
    cm_glue = std::make_unique<CmGlue>(*this);
    auto lookup = [this](const wire::Gid& dgid, uint64_t now, wire::MacAddr& mac) {
        if (!resolver) return cm::Resolution::Unreachable;
        switch (resolver(dgid, now, mac)) {
            case Resolution::Resolved:
                return cm::Resolution::Resolved;
            case Resolution::Pending:
                return cm::Resolution::Pending;
            case Resolution::Unreachable:
                break;
        }
        return cm::Resolution::Unreachable;
    };
    cm = std::make_unique<cm::CmService>(cm_config(), lookup, cm_glue.get());
}

void HostService::Impl::close_cm(Session& s) {
    if (!cm) return;
    cm->destroy_owner(s.id, now_ns);
    for (uint32_t ch : s.cm_channels) {
        if (const auto it = cm_channel_fds.find(ch); it != cm_channel_fds.end()) {
            close(it->second);
            cm_channel_fds.erase(it);
        }
    }
    s.cm_channels.clear();
}

}  // namespace rnic::host::server
