// The service's side of on-demand regions (docs/host_interface.md, "On-demand regions"): the
// ODP workers' wake-up of the loop, the engine's parked QPs resumed when a worker has news, and
// one log line per QP an access left pending past the engine's time bound.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "service_impl.hpp"

namespace rnic::host::server {

void HostService::Impl::start_odp() {
    if (odp_notifier->fd() < 0) {
        spdlog::warn("ODP notifier: no eventfd; parked ODP accesses resume on the next turn or timer");
        return;
    }
    const int fd = ::dup(odp_notifier->fd());
    if (fd < 0) return;
    odp_wake.emplace(io, fd);
    arm_odp_wake();
}

// Always armed, like the kicks: a worker's news ends a nap and is taken on the next turn.
void HostService::Impl::arm_odp_wake() {
    if (!odp_wake || odp_wake_armed) return;
    odp_wake_armed = true;
    odp_wake->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec) return;  // cancelled (the service is going away): touch nothing
        odp_wake_armed = false;
        uint64_t count = 0;
        (void)!::read(odp_wake->native_handle(), &count, sizeof count);  // non-blocking: drained
        woken = true;
        arm_odp_wake();
    });
}

size_t HostService::Impl::poll_odp() {
    size_t work = 0;
    if (odp_notifier->take()) {
        engine.odp_resume();
        ++work;
    }
    engine.take_odp_timeouts(odp_timeouts);
    for (const uint32_t qpn : odp_timeouts) {
        const auto it = qps.find(qpn);
        const Session* s = it != qps.end() ? it->second->owner : nullptr;
        if (s)
            spdlog::warn("session {} (pid {}): QP {}: an on-demand access stayed pending past {} ms; QP in error",
                         s->id, s->process.pid, qpn, engine.config().tuning.odp_timeout_ns / 1'000'000);
        else
            spdlog::warn("QP {}: an on-demand access stayed pending past {} ms; QP in error", qpn,
                         engine.config().tuning.odp_timeout_ns / 1'000'000);
        ++work;
    }
    return work;
}

}  // namespace rnic::host::server
