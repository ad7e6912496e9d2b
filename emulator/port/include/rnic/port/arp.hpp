// ARP (RFC 826) for the daemon's IPv4 address: answering requests, and resolving neighbours
// through the neighbour cache it shares with IPv6 neighbour discovery (retries, timeouts, a
// bounded queue of frames waiting for an answer). Pure logic over frames and time; the poll loop
// feeds it and drains what it emits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "rnic/common/counter_macros.hpp"
#include "rnic/common/frame_sink.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/port/neighbour_cache.hpp"
#include "rnic/wire/gid.hpp"

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
bool emit_arp(common::FrameSink& sink, const wire::MacAddr& eth_src, const ArpPacket& packet);

using ArpConfig = NeighbourConfig;

// What is particular to ARP; resolution, queueing and expiry are counted by the cache.
// ignored: malformed, not IPv4 over Ethernet, or not for our subnet.
#define RNIC_ARP_COUNTERS(X) \
    X(requests_received)     \
    X(replies_sent) X(requests_sent) X(replies_received) X(gratuitous_sent) X(ignored) X(address_conflicts)

struct ArpCounters {
    RNIC_COUNTER_MEMBERS(RNIC_ARP_COUNTERS)
};

class ArpAgent final : public NeighbourResolver {
public:
    explicit ArpAgent(HostAddress self, ArpConfig config = {}) : NeighbourResolver(config), self_(std::move(self)) {}

    // Tells the segment who we are (and detects nothing: see docs/daemon.md).
    void announce(common::FrameSink& sink);

    // A received ARP frame: learn the sender, answer requests for our address, release frames
    // that were waiting for this neighbour.
    void receive(std::span<const uint8_t> frame, uint64_t now_ns, common::FrameSink& sink);

    // The resolver's lookups by IPv4 address (host order).
    std::optional<wire::MacAddr> resolve(uint32_t ip, uint64_t now_ns, common::FrameSink& sink) {
        return NeighbourResolver::resolve(key(ip), now_ns, sink);
    }
    bool unreachable(uint32_t ip) const noexcept { return NeighbourResolver::unreachable(key(ip)); }
    void enqueue(uint32_t ip, std::span<const uint8_t> frame, uint64_t now_ns, common::FrameSink& sink) {
        NeighbourResolver::enqueue(key(ip), frame, now_ns, sink);
    }

    const ArpCounters& counters() const noexcept { return counters_; }

private:
    static NeighbourCache::Key key(uint32_t ip) noexcept { return wire::Gid::from_ipv4(ip).raw; }
    void solicit(const NeighbourCache::Key& addr, const wire::MacAddr* unicast, common::FrameSink& sink) override;

    HostAddress self_;
    ArpCounters counters_;
};

}  // namespace rnic::port
