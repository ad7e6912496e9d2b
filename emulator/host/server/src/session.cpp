// A session's end: everything it owned goes, in dependency order, so the engine never holds a
// reference into memory that is about to be unmapped (QPs and SRQs hold WQEs naming MRs; MRs
// point into segments).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>

#include "notify_socket.hpp"
#include "service_impl.hpp"

namespace rnic::host::server {

Channel::~Channel() {
    if (fd >= 0) close(fd);
}

uint32_t Session::take_doorbell(QueueRef ref) {
    uint32_t slot;
    if (!free_doorbells.empty()) {
        slot = free_doorbells.back();
        free_doorbells.pop_back();
    } else if (doorbell_targets.size() < abi::kDoorbellSlots) {
        slot = static_cast<uint32_t>(doorbell_targets.size());
        free_doorbells.reserve(size_t{slot} + 1);  // release_doorbell must not allocate
        doorbell_targets.emplace_back();
    } else {
        return UINT32_MAX;
    }
    doorbell_targets[slot] = ref;
    return slot;
}

void Session::release_doorbell(uint32_t slot) noexcept {
    if (slot >= doorbell_targets.size() || doorbell_targets[slot].handle == 0) return;
    doorbell_targets[slot] = {};
    // The vector keeps room for every slot it has handed out, so this never allocates.
    free_doorbells.push_back(slot);
}

void Channel::notify() const noexcept {
    server::notify(fd);
}

void HostService::Impl::push_async(Session& s, uint32_t type, uint32_t object) {
    if (s.closed || !s.async_ring.valid()) return;
    if (s.async_ring.free_slots(s.async_produced) == 0) {
        ++s.async_dropped;
        ++counters.async_events_dropped;
        return;
    }
    const abi::AsyncEventEntry e{type, object};
    std::memcpy(s.async_ring.entry(s.async_produced), &e, sizeof e);
    s.async_ring.publish(++s.async_produced);
    ++counters.async_events;
    if (s.async_fd >= 0) notify(s.async_fd);
}

void HostService::Impl::close_session(Session& s, const char* why) {
    if (s.closed) return;
    s.closed = true;
    boost::system::error_code ec;
    s.socket.close(ec);
    if (s.deferred) --deferred_sessions;
    s.kick.reset();  // cancels its wait
    s.deferred.reset();
    s.kick.reset();  // closes it; an armed wait completes as aborted
    close_cm(s);

    const size_t n_qps = s.qps.size(), n_srqs = s.srqs.size(), n_cqs = s.cqs.size(), n_ahs = s.ahs.size(),
                 n_mrs = s.mrs.size(), n_segments = s.segments.size(), n_pds = s.pds.size(),
                 n_channels = s.channels.size();
    transport::QpAttributes err;
    err.qp_state = transport::QpState::Err;
    for (uint32_t qpn : s.qps) {
        engine.modify_qp(qpn, err, transport::QpAttr::State);
        engine.destroy_qp(qpn);
        if (auto it = qps.find(qpn); it != qps.end()) pinned->release(s.process, it->second->pinned_pages);
        qps.erase(qpn);
    }
    for (uint32_t h : s.srqs) {
        engine.destroy_srq(h);
        if (auto it = srqs.find(h); it != srqs.end()) pinned->release(s.process, it->second->pinned_pages);
        srqs.erase(h);
    }
    for (uint32_t h : s.cqs) {
        engine.destroy_cq(h);
        if (auto it = cqs.find(h); it != cqs.end()) pinned->release(s.process, it->second->pinned_pages);
        cqs.erase(h);
    }
    for (const auto& [h, pd] : s.ahs) engine.destroy_ah(h);
    // Windows before regions: a region with windows bound to it cannot be deregistered.
    const size_t n_mws = s.mws.size();
    for (uint32_t h : s.mws) engine.dealloc_mw(h);
    s.mws.clear();
    for (const auto& [lkey, mr] : s.mrs) {
        engine.dereg_mr(lkey);
        pinned->release(s.process, mr.pinned_pages);
    }
    s.mrs.clear();
    s.segments.clear();  // the last references: munmap
    for (uint32_t pd : s.pds) engine.dealloc_pd(pd);
    s.channels.clear();
    s.qps.clear();
    s.srqs.clear();
    s.cqs.clear();
    s.ahs.clear();
    s.pds.clear();
    if (s.async_fd >= 0) close(s.async_fd);
    s.async_fd = -1;
    s.async_ring = {};
    s.doorbells = nullptr;
    s.doorbell_targets.clear();
    s.free_doorbells.clear();
    s.async_memory.reset();
    const std::pair<Resource, size_t> held[] = {{Resource::Sessions, s.hello_done ? 1 : 0},
                                                {Resource::Pds, n_pds},
                                                {Resource::Mrs, n_mrs + n_mws},
                                                {Resource::Cqs, n_cqs},
                                                {Resource::Qps, n_qps},
                                                {Resource::Srqs, n_srqs},
                                                {Resource::Ahs, n_ahs}};
    for (const auto& [r, n] : held) uncharge(s, r, n);

    ++counters.sessions_closed;
    if (s.hello_done || n_qps + n_cqs + n_pds)
        spdlog::info(
            "session {} (pid {}) {}: reclaimed {} QPs, {} SRQs, {} CQs, {} AHs, {} MRs, {} segments, {} PDs, "
            "{} channels",
            s.id, s.pid, why, n_qps, n_srqs, n_cqs, n_ahs, n_mrs, n_segments, n_pds, n_channels);
    else
        spdlog::debug("session {} (pid {}) {}", s.id, s.pid, why);
    sessions.erase(s.id);  // callers hold a shared_ptr while they still touch `s`
}

}  // namespace rnic::host::server
