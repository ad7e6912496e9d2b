// Latency tracing on the host side (docs/benchmarks.md, "Where the time goes"): the clients'
// doorbell and kick stamps, and the "latency" part of the Stats document, which also carries the
// poll loop's hops. Every stamp is the client's word: one that cannot be true (in the future, or
// older than any wait the daemon could cause) is counted and dropped, never recorded.
#include <nlohmann/json.hpp>

#include <chrono>

#include "service_impl.hpp"

namespace rnic::host::server {
namespace {

constexpr uint64_t kOldestBelievableNs = 10'000'000'000;  // 10 s

uint64_t monotonic_now_ns() {
    // steady_clock is CLOCK_MONOTONIC here, the clock the clients stamp with.
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

nlohmann::json summary(const common::LatencyHistogram& h) {
    return {{"count", h.count()},          {"min_ns", h.min()},
            {"mean_ns", h.mean()},         {"p50_ns", h.percentile(500)},
            {"p90_ns", h.percentile(900)}, {"p99_ns", h.percentile(990)},
            {"p999_ns", h.percentile(999)}, {"max_ns", h.max()}};
}

}  // namespace

void HostService::Impl::note_doorbell_stamp(Session& s) {
    const uint64_t stamp = s.doorbells->doorbell_ns.exchange(0, std::memory_order_relaxed);
    if (stamp == 0) return;
    const uint64_t now = monotonic_now_ns();
    if (stamp > now || now - stamp > kOldestBelievableNs) {
        ++latency_bogus_stamps;
        return;
    }
    doorbell_to_seen.record(now - stamp);
}

std::optional<HostService::KickStamp> HostService::Impl::take_kick_stamp(uint64_t since_ns) {
    std::optional<KickStamp> earliest;
    const uint64_t now = monotonic_now_ns();
    for (auto& [id, s] : sessions) {
        if (!s->doorbells) continue;
        const uint64_t stamp = s->doorbells->kick_ns.exchange(0, std::memory_order_acquire);
        if (stamp == 0) continue;
        if (stamp < since_ns || stamp > now) {
            if (stamp > now) ++latency_bogus_stamps;
            continue;
        }
        if (!earliest || stamp < earliest->ns)
            earliest = KickStamp{stamp, s->doorbells->kick_cpu.load(std::memory_order_relaxed)};
    }
    return earliest;
}

void HostService::Impl::latency_part(nlohmann::json& doc) const {
    nlohmann::json hops = nlohmann::json::object();
    hops["doorbell_to_seen"] = summary(doorbell_to_seen);
    if (histogram_source)
        for (const auto& [name, h] : histogram_source())
            if (h) hops[name] = summary(*h);
    doc["latency"] = {{"trace", latency_trace}, {"bogus_stamps", latency_bogus_stamps}, {"hops", hops}};
}

void HostService::set_latency_trace(bool on) {
    impl_->latency_trace = on;
    if (impl_->status) impl_->status->latency_trace.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool HostService::latency_trace() const noexcept {
    return impl_->latency_trace;
}
void HostService::set_histogram_source(HistogramSource histograms) {
    impl_->histogram_source = std::move(histograms);
}
HostService::Activity HostService::activity() const noexcept {
    return {impl_->counters.wqes_posted, impl_->counters.cqes_delivered};
}
std::optional<HostService::KickStamp> HostService::take_kick_stamp(uint64_t since_ns) {
    return impl_->latency_trace ? impl_->take_kick_stamp(since_ns) : std::nullopt;
}

}  // namespace rnic::host::server
