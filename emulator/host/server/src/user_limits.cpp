// Per-uid object caps (the rdma cgroup's rdma.max, per user): counted when an object is made,
// given back when it is destroyed or its session reclaimed.
#include <poll.h>
#include <spdlog/spdlog.h>

#include <cerrno>

#include "service_impl.hpp"

namespace rnic::host::server {

const UserLimits& HostService::Impl::limits_of(uint32_t uid) const {
    const auto it = config.user_limits.find(uid);
    return it == config.user_limits.end() ? config.user_limits_default : it->second;
}

uint32_t HostService::Impl::held_by(uint32_t uid, Resource r) const {
    const auto it = users.find(uid);
    return it == users.end() ? 0 : it->second.held[static_cast<size_t>(r)];
}

int HostService::Impl::charge(const Session& s, Resource r) {
    const uint32_t held = held_by(s.uid, r);
    const uint32_t cap = limits_of(s.uid)[r];
    if (cap != kUnlimited && held >= cap) {
        ++counters.user_limit_refusals;
        spdlog::info("session {} (pid {}): uid {} holds {} {} on this device, its cap: EAGAIN", s.id, s.pid, s.uid,
                     held, kResourceNames[static_cast<size_t>(r)]);
        return EAGAIN;
    }
    ++users[s.uid].held[static_cast<size_t>(r)];
    return 0;
}

void HostService::Impl::uncharge(const Session& s, Resource r, size_t n) {
    const auto it = users.find(s.uid);
    if (it == users.end() || n == 0) return;
    uint32_t& held = it->second.held[static_cast<size_t>(r)];
    held -= static_cast<uint32_t>(std::min<size_t>(held, n));
    for (uint32_t v : it->second.held)
        if (v) return;
    users.erase(it);
}

void HostService::Impl::reap_hung_up(uint32_t uid, const Session& except) {
    std::vector<std::shared_ptr<Session>> gone;
    for (const auto& [id, s] : sessions) {
        if (s.get() == &except || s->uid != uid || s->closed) continue;
        pollfd p{s->socket.native_handle(), POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) gone.push_back(s);
    }
    for (const auto& s : gone) close_session(*s, "disconnected");
}

}  // namespace rnic::host::server
