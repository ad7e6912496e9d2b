// ARP (RFC 826) for the daemon's IPv4 address: answering requests, and resolving neighbours
// with a cache, retries, timeouts and a bounded queue of frames waiting for an answer.
// Pure logic over frames and time; the poll loop feeds it and drains what it emits.
#pragma once

#include <cstdint>
#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "rnic/port/host_address.hpp"
#include "rnic/transport/engine.hpp"

namespace rnic::port {

inline constexpr size_t kArpFrameSize = 42;  // Ethernet + ARP for IPv4, before padding

struct ArpPacket {
    uint16_t op = 0;  // 1 request, 2 reply
    wire::MacAddr sender_mac{};
    uint32_t sender_ip = 0;
    wire::MacAddr target_mac{};
    uint32_t target_ip = 0;
    wire::MacAddr eth_dst{};
};

std::optional<ArpPacket> parse_arp(std::span<const uint8_t> frame) noexcept;
// Padded to the 60-byte Ethernet minimum. Returns false if the sink has no room.
bool emit_arp(transport::FrameSink& sink, const wire::MacAddr& eth_src, const ArpPacket& packet);

struct ArpConfig {
    uint64_t reachable_ns = 30'000'000'000;   // entries are trusted this long, then refreshed
    uint64_t retry_ns = 1'000'000'000;        // between requests for an unresolved address
    uint32_t max_requests = 3;                // then the address is unreachable
    uint64_t failed_hold_ns = 3'000'000'000;  // unreachable answers are cached this long
    size_t max_queued_per_neighbour = 16;     // frames waiting for resolution
    size_t max_entries = 4096;
};

struct ArpCounters {
    uint64_t requests_received = 0;
    uint64_t replies_sent = 0;
    uint64_t requests_sent = 0;
    uint64_t replies_received = 0;
    uint64_t gratuitous_sent = 0;
    uint64_t resolved = 0;
    uint64_t resolution_failures = 0;
    uint64_t queued_frames = 0;
    uint64_t queued_dropped = 0;  // queue full, address unreachable, or cache full
    uint64_t ignored = 0;         // malformed, not IPv4 over Ethernet, or not for our subnet
    uint64_t address_conflicts = 0;
};

class ArpAgent {
public:
    ArpAgent(HostAddress self, ArpConfig config = {}) : self_(self), config_(config) {}

    // Tells the segment who we are (and detects nothing: see docs/daemon.md).
    void announce(transport::FrameSink& sink);

    // A received ARP frame: learn the sender, answer requests for our address, release frames
    // that were waiting for this neighbour.
    void receive(std::span<const uint8_t> frame, uint64_t now_ns, transport::FrameSink& sink);

    // The MAC for an on-link address, or nullopt while it is being resolved (a request goes
    // out at once if none is in flight) or known to be unreachable.
    std::optional<wire::MacAddr> resolve(uint32_t ip, uint64_t now_ns, transport::FrameSink& sink);

    // True while `ip` is held as unreachable after its requests went unanswered, so a caller
    // waiting on resolve() can give up instead of waiting for the entry to be forgotten.
    bool unreachable(uint32_t ip) const noexcept {
        const auto it = cache_.find(ip);
        return it != cache_.end() && it->second.state == State::Failed;
    }

    // A frame for `ip` whose destination MAC is unknown: sent (MAC patched in) when `ip`
    // resolves, dropped and counted if it does not or the queue is full.
    void enqueue(uint32_t ip, std::span<const uint8_t> frame, uint64_t now_ns, transport::FrameSink& sink);

    // Retries and expiries due by now.
    void advance(uint64_t now_ns, transport::FrameSink& sink);
    std::optional<uint64_t> next_deadline() const;

    const ArpCounters& counters() const noexcept { return counters_; }
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

    void send_request(uint32_t ip, const wire::MacAddr& dst, transport::FrameSink& sink);
    void learn(uint32_t ip, const wire::MacAddr& mac, uint64_t now_ns, transport::FrameSink& sink, bool create);
    void drop_queue(Entry& e);
    void schedule(uint64_t deadline);

    HostAddress self_;
    ArpConfig config_;
    std::unordered_map<uint32_t, Entry> cache_;
    ArpCounters counters_;
    uint64_t earliest_ = UINT64_MAX;  // no timer before this: advance() is one compare
};

}  // namespace rnic::port
