// The neighbour cache behind both ARP (IPv4) and IPv6 neighbour discovery: what a MAC is known
// for, resolution with retries and failure, expiry into a stale state that is still used while a
// unicast probe refreshes it (Linux's STALE/PROBE), and a bounded queue of frames waiting for an
// answer. The protocols differ only in how a request looks on the wire, which they supply as a
// Solicitor; addresses are 16 bytes, IPv4 neighbours in the IPv4-mapped form ::ffff:a.b.c.d.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rnic/common/counter_macros.hpp"
#include "rnic/common/frame_sink.hpp"
#include "rnic/port/host_address.hpp"

namespace rnic::port {

struct NeighbourConfig {
    uint64_t reachable_ns = 30'000'000'000;   // entries are trusted this long, then refreshed
    uint64_t retry_ns = 1'000'000'000;        // between requests for an unresolved address
    uint32_t max_requests = 3;                // then the address is unreachable
    uint64_t failed_hold_ns = 3'000'000'000;  // unreachable answers are cached this long
    size_t max_queued_per_neighbour = 16;     // frames waiting for resolution
    size_t max_entries = 4096;
};

// queued_dropped: queue full, address unreachable, cache full or sink full.
#define RNIC_NEIGHBOUR_COUNTERS(X) X(resolved) X(resolution_failures) X(queued_frames) X(queued_dropped)

struct NeighbourCounters {
    RNIC_COUNTER_MEMBERS(RNIC_NEIGHBOUR_COUNTERS)
};

class NeighbourCache {
public:
    using Key = Ipv6Addr;

    // The protocol's half: puts one request for `addr` on the wire, to everyone on the segment
    // when `unicast` is null, else to that MAC only (the probe of a stale entry).
    class Solicitor {
    public:
        virtual void solicit(const Key& addr, const wire::MacAddr* unicast, common::FrameSink& sink) = 0;

    protected:
        ~Solicitor() = default;
    };

    NeighbourCache(Solicitor& solicitor, NeighbourConfig config) : solicitor_(solicitor), config_(config) {}
    NeighbourCache(const NeighbourCache&) = delete;
    NeighbourCache& operator=(const NeighbourCache&) = delete;

    // A neighbour told us its MAC. `create`: add it when unknown (it talked to us); otherwise
    // only what we already track is refreshed, so a busy segment cannot fill the cache.
    // `confirmed`: trusted for reachable_ns; else stale at once, so its first use probes it
    // (what an unsolicited message teaches, RFC 4861's STALE). Frames waiting for it leave.
    void learn(const Key& addr, const wire::MacAddr& mac, uint64_t now_ns, common::FrameSink& sink, bool create,
               bool confirmed = true);

    // The MAC, or nullopt while it is being resolved (a request goes out at once if none is in
    // flight) or known to be unreachable.
    std::optional<wire::MacAddr> resolve(const Key& addr, uint64_t now_ns, common::FrameSink& sink);

    // The MAC if known (reachable or stale), without side effects.
    std::optional<wire::MacAddr> lookup(const Key& addr) const noexcept;
    bool known(const Key& addr) const noexcept { return cache_.count(addr) != 0; }

    // True while `addr` is held as unreachable after its requests went unanswered, so a caller
    // waiting on resolve() can give up instead of waiting for the entry to be forgotten.
    bool unreachable(const Key& addr) const noexcept;

    // A frame for `addr` whose destination MAC is unknown: sent (MAC patched in) when `addr`
    // resolves, dropped and counted if it does not or the queue is full.
    void enqueue(const Key& addr, std::span<const uint8_t> frame, uint64_t now_ns, common::FrameSink& sink);

    // Retries and expiries due by now.
    void advance(uint64_t now_ns, common::FrameSink& sink);
    std::optional<uint64_t> next_deadline() const;

    const NeighbourCounters& counters() const noexcept { return counters_; }
    size_t entries() const noexcept { return cache_.size(); }

private:
    enum class State : uint8_t { Incomplete, Reachable, Probe, Failed };
    struct Entry {
        State state = State::Incomplete;
        wire::MacAddr mac{};
        uint64_t deadline = 0;  // Incomplete/Probe: next request; Reachable: stale; Failed: forget
        uint32_t requests = 0;
        std::deque<std::vector<uint8_t>> queue;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const noexcept;
    };

    void drop_queue(Entry& e);
    void schedule(uint64_t deadline);

    Solicitor& solicitor_;
    NeighbourConfig config_;
    std::unordered_map<Key, Entry, KeyHash> cache_;
    NeighbourCounters counters_;
    uint64_t earliest_ = UINT64_MAX;  // no timer before this: advance() is one compare
};

// What ARP and neighbour discovery share around their cache: lookups by 16-byte address, timers
// and introspection. Each protocol derives from it and supplies the solicitation.
class NeighbourResolver : private NeighbourCache::Solicitor {
public:
    // The MAC, or nullopt while a request is out (one goes out at once if none is in flight) or
    // the address failed; see NeighbourCache.
    std::optional<wire::MacAddr> resolve(const NeighbourCache::Key& addr, uint64_t now_ns, common::FrameSink& sink) {
        return cache_.resolve(addr, now_ns, sink);
    }
    bool unreachable(const NeighbourCache::Key& addr) const noexcept { return cache_.unreachable(addr); }
    void enqueue(const NeighbourCache::Key& addr, std::span<const uint8_t> frame, uint64_t now_ns,
                 common::FrameSink& sink) {
        cache_.enqueue(addr, frame, now_ns, sink);
    }
    void advance(uint64_t now_ns, common::FrameSink& sink) { cache_.advance(now_ns, sink); }
    std::optional<uint64_t> next_deadline() const { return cache_.next_deadline(); }
    const NeighbourCache& cache() const noexcept { return cache_; }
    size_t entries() const noexcept { return cache_.entries(); }

protected:
    explicit NeighbourResolver(NeighbourConfig config) : cache_(*this, config) {}
    ~NeighbourResolver() = default;
    NeighbourResolver(const NeighbourResolver&) = delete;
    NeighbourResolver& operator=(const NeighbourResolver&) = delete;

    NeighbourCache cache_;
};

}  // namespace rnic::port
