#include "rnic/port/neighbour_cache.hpp"

#include <algorithm>
#include <cstring>

namespace rnic::port {

namespace {
constexpr uint64_t kNever = UINT64_MAX;

bool emit_copy(common::FrameSink& sink, std::span<const uint8_t> frame) {
    auto out = sink.allocate(frame.size());
    if (out.size() < frame.size()) return false;
    std::memcpy(out.data(), frame.data(), frame.size());
    sink.commit(frame.size());
    return true;
}

void patch_mac(std::vector<uint8_t>& frame, const wire::MacAddr& mac) {
    std::copy(mac.begin(), mac.end(), frame.begin());
}
}  // namespace

size_t NeighbourCache::KeyHash::operator()(const Key& k) const noexcept {
    uint64_t hi = 0, lo = 0;
    std::memcpy(&hi, k.data(), 8);
    std::memcpy(&lo, k.data() + 8, 8);
    return static_cast<size_t>((hi * 0x9E3779B97F4A7C15ull) ^ lo ^ (lo >> 29));
}

void NeighbourCache::drop_queue(Entry& e) {
    counters_.queued_dropped += e.queue.size();
    e.queue.clear();
}

void NeighbourCache::schedule(uint64_t deadline) {
    earliest_ = std::min(earliest_, deadline);
}

void NeighbourCache::learn(const Key& addr, const wire::MacAddr& mac, uint64_t now_ns, common::FrameSink& sink,
                           bool create, bool confirmed) {
    auto it = cache_.find(addr);
    if (it == cache_.end()) {
        if (!create || cache_.size() >= config_.max_entries) return;
        it = cache_.emplace(addr, Entry{}).first;
    }
    Entry& e = it->second;
    const bool had_mac = e.state == State::Reachable || e.state == State::Probe;
    // An unconfirmed hint that repeats what we know changes nothing (RFC 4861 7.2.3): it must
    // not cut short a probe in flight nor turn a reachable entry stale.
    if (!confirmed && had_mac && e.mac == mac) return;
    if (!had_mac) ++counters_.resolved;
    e.state = State::Reachable;
    e.mac = mac;
    e.requests = 0;
    e.deadline = confirmed ? now_ns + config_.reachable_ns : now_ns;
    while (!e.queue.empty()) {
        auto& f = e.queue.front();
        patch_mac(f, mac);
        if (!emit_copy(sink, f)) ++counters_.queued_dropped;
        e.queue.pop_front();
    }
}

std::optional<wire::MacAddr> NeighbourCache::resolve(const Key& addr, uint64_t now_ns, common::FrameSink& sink) {
    auto it = cache_.find(addr);
    if (it == cache_.end()) {
        if (cache_.size() >= config_.max_entries) return std::nullopt;
        Entry& e = cache_.emplace(addr, Entry{}).first->second;
        e.requests = 1;
        e.deadline = now_ns + config_.retry_ns;
        schedule(e.deadline);
        solicitor_.solicit(addr, nullptr, sink);
        return std::nullopt;
    }
    Entry& e = it->second;
    switch (e.state) {
        case State::Reachable:
            if (now_ns >= e.deadline) {
                // Stale: keep using the MAC while a unicast probe confirms it, as Linux does.
                e.state = State::Probe;
                e.requests = 1;
                e.deadline = now_ns + config_.retry_ns;
                schedule(e.deadline);
                solicitor_.solicit(addr, &e.mac, sink);
            }
            return e.mac;
        case State::Probe:
            return e.mac;
        case State::Incomplete:
        case State::Failed:
            return std::nullopt;
    }
    return std::nullopt;
}

std::optional<wire::MacAddr> NeighbourCache::lookup(const Key& addr) const noexcept {
    const auto it = cache_.find(addr);
    if (it == cache_.end() || (it->second.state != State::Reachable && it->second.state != State::Probe))
        return std::nullopt;
    return it->second.mac;
}

bool NeighbourCache::unreachable(const Key& addr) const noexcept {
    const auto it = cache_.find(addr);
    return it != cache_.end() && it->second.state == State::Failed;
}

void NeighbourCache::enqueue(const Key& addr, std::span<const uint8_t> frame, uint64_t now_ns,
                             common::FrameSink& sink) {
    if (frame.size() < 6) {
        ++counters_.queued_dropped;
        return;
    }
    if (const auto mac = resolve(addr, now_ns, sink)) {
        std::vector<uint8_t> f(frame.begin(), frame.end());
        patch_mac(f, *mac);
        if (!emit_copy(sink, f)) ++counters_.queued_dropped;
        return;
    }
    auto it = cache_.find(addr);
    if (it == cache_.end() || it->second.state == State::Failed ||
        it->second.queue.size() >= config_.max_queued_per_neighbour) {
        ++counters_.queued_dropped;
        return;
    }
    it->second.queue.emplace_back(frame.begin(), frame.end());
    ++counters_.queued_frames;
}

void NeighbourCache::advance(uint64_t now_ns, common::FrameSink& sink) {
    if (now_ns < earliest_) return;  // the common case costs one compare
    earliest_ = kNever;
    for (auto it = cache_.begin(); it != cache_.end();) {
        Entry& e = it->second;
        if (e.state == State::Reachable) {
            ++it;
            continue;
        }
        if (now_ns >= e.deadline) {
            if (e.state == State::Failed) {
                it = cache_.erase(it);
                continue;
            }
            if (e.requests < config_.max_requests) {
                ++e.requests;
                e.deadline = now_ns + config_.retry_ns;
                solicitor_.solicit(it->first, e.state == State::Probe ? &e.mac : nullptr, sink);
            } else {
                e.state = State::Failed;
                e.deadline = now_ns + config_.failed_hold_ns;
                ++counters_.resolution_failures;
                drop_queue(e);
            }
        }
        earliest_ = std::min(earliest_, e.deadline);
        ++it;
    }
}

std::optional<uint64_t> NeighbourCache::next_deadline() const {
    if (earliest_ == kNever) return std::nullopt;
    return earliest_;
}

}  // namespace rnic::port
