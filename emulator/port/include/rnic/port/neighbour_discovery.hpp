// IPv6 neighbour discovery (RFC 4861) for the daemon's IPv6 addresses: answering neighbour
// solicitations (unicast, or to our solicited-node groups), learning from solicitations and
// advertisements, resolving neighbours through the neighbour cache it shares with ARP, and the
// unsolicited advertisement at start (the IPv6 gratuitous ARP). Duplicate address detection is
// not run for our own addresses (docs/daemon.md says why); a DAD probe for one of them is
// answered, which defends it. Pure logic over frames and time, like ArpAgent.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "rnic/common/counter_macros.hpp"
#include "rnic/common/frame_sink.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/port/icmp6.hpp"
#include "rnic/port/neighbour_cache.hpp"

namespace rnic::port {

inline constexpr uint8_t kNdHopLimit = 255;  // RFC 4861 7.1: anything else came through a router

// What is particular to ND; resolution, queueing and expiry are counted by the cache.
//   solicitations_received: for one of our addresses; advertisements_sent: solicited answers and
//   DAD defences; solicitations_sent: resolution and probes; unsolicited_sent: at start, one per
//   address; bad_hop_limit: not 255, dropped; invalid: RFC 4861 7.1's validity checks failed
//   (code, length, options, multicast fields); ignored: valid but not about us (another target,
//   an unknown neighbour, VLAN-tagged); address_conflicts: someone else claims or probes for one
//   of our addresses.
#define RNIC_ND_COUNTERS(X)                                                                                      \
    X(solicitations_received)                                                                                    \
    X(advertisements_sent) X(solicitations_sent) X(advertisements_received) X(unsolicited_sent) X(bad_hop_limit) \
        X(invalid) X(ignored) X(address_conflicts)

struct NdCounters {
    RNIC_COUNTER_MEMBERS(RNIC_ND_COUNTERS)
};

// Lookups (resolve, unreachable, enqueue) take the IPv6 address itself: the cache's key.
class NdAgent final : public NeighbourResolver {
public:
    explicit NdAgent(HostAddress self, NeighbourConfig config = {})
        : NeighbourResolver(config), self_(std::move(self)) {}

    // One unsolicited advertisement per address to all-nodes, override flag set, so neighbours
    // that knew an address under another MAC update it.
    void announce(common::FrameSink& sink);

    // A neighbour solicitation or advertisement parse_icmp6() accepted (checksum checked there).
    void receive(const Icmp6Message& message, uint64_t now_ns, common::FrameSink& sink);

    const NdCounters& counters() const noexcept { return counters_; }

private:
    void solicit(const NeighbourCache::Key& addr, const wire::MacAddr* unicast, common::FrameSink& sink) override;
    void receive_solicitation(const Icmp6Message& m, const Ipv6Addr& target, const wire::MacAddr* source_mac,
                              uint64_t now_ns, common::FrameSink& sink);
    void receive_advertisement(const Icmp6Message& m, const Ipv6Addr& target, const wire::MacAddr* target_mac,
                               uint64_t now_ns, common::FrameSink& sink);
    bool advertise(const Ipv6Addr& target, const Ipv6Addr& dst, const wire::MacAddr& dst_mac, uint8_t flags,
                   common::FrameSink& sink);

    HostAddress self_;
    NdCounters counters_;
};

}  // namespace rnic::port
