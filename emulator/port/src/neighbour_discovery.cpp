#include "rnic/port/neighbour_discovery.hpp"

#include <algorithm>
#include <array>

#include "rnic/wire/headers.hpp"

namespace rnic::port {

namespace {
// RFC 4861 4.4: R(outer), S(olicited), O(verride) in the first byte of an advertisement.
constexpr uint8_t kFlagSolicited = 0x40;
constexpr uint8_t kFlagOverride = 0x20;
// RFC 4861 4.6.1: link-layer address options, 8 bytes for Ethernet (length in 8-byte units).
constexpr uint8_t kOptSourceLinkAddr = 1;
constexpr uint8_t kOptTargetLinkAddr = 2;
constexpr size_t kTargetEnd = 20;                // reserved/flags (4) + target address (16)
constexpr size_t kMessageSize = kTargetEnd + 8;  // with one link-layer address option

// The link-layer address option of `type` among `options`: absent is fine (nullopt inside),
// a zero-length or overrunning option makes the whole message invalid (outer nullopt).
std::optional<std::optional<wire::MacAddr>> find_link_addr(std::span<const uint8_t> options, uint8_t type) {
    std::optional<wire::MacAddr> found;
    size_t off = 0;
    while (off + 2 <= options.size()) {  // at most options.size() / 8 iterations: length >= 1
        const size_t len = size_t{options[off + 1]} * 8;
        if (len == 0 || off + len > options.size()) return std::nullopt;
        if (options[off] == type && len >= 8) {
            wire::MacAddr mac;
            std::copy_n(options.begin() + static_cast<std::ptrdiff_t>(off) + 2, 6, mac.begin());
            found = mac;
        }
        off += len;
    }
    if (off != options.size()) return std::nullopt;
    return found;
}

// Reserved/flags word, target and one link-layer address option: a solicitation or an
// advertisement as the daemon sends them.
std::array<uint8_t, kMessageSize> message(uint8_t flags, const Ipv6Addr& target, uint8_t option,
                                          const wire::MacAddr& mac) {
    std::array<uint8_t, kMessageSize> b{};
    b[0] = flags;
    std::copy(target.begin(), target.end(), b.begin() + 4);
    b[kTargetEnd] = option;
    b[kTargetEnd + 1] = 1;
    std::copy(mac.begin(), mac.end(), b.begin() + kTargetEnd + 2);
    return b;
}
}  // namespace

bool NdAgent::advertise(const Ipv6Addr& target, const Ipv6Addr& dst, const wire::MacAddr& dst_mac, uint8_t flags,
                        common::FrameSink& sink) {
    const auto body = message(flags, target, kOptTargetLinkAddr, self_.mac);
    return emit_icmp6(sink, dst_mac, self_.mac, target, dst, kNdHopLimit, kIcmp6NeighborAdvertisement, 0, body);
}

void NdAgent::announce(common::FrameSink& sink) {
    for (const Ipv6Prefix& p : self_.ipv6)
        if (advertise(p.addr, kAllNodes, multicast_mac(kAllNodes), kFlagOverride, sink)) ++counters_.unsolicited_sent;
}

void NdAgent::solicit(const NeighbourCache::Key& addr, const wire::MacAddr* unicast, common::FrameSink& sink) {
    if (self_.ipv6.empty()) return;
    // First asks go to the target's solicited-node group; probes of a stale entry go straight
    // to the MAC we have (RFC 4861 7.2.2, 7.3.3).
    const Ipv6Addr dst = unicast ? addr : solicited_node(addr);
    const wire::MacAddr dst_mac = unicast ? *unicast : multicast_mac(dst);
    const auto body = message(0, addr, kOptSourceLinkAddr, self_.mac);
    if (emit_icmp6(sink, dst_mac, self_.mac, self_.source_for(addr), dst, kNdHopLimit, kIcmp6NeighborSolicitation, 0,
                   body))
        ++counters_.solicitations_sent;
}

void NdAgent::receive(const Icmp6Message& m, uint64_t now_ns, common::FrameSink& sink) {
    if (m.l3 != wire::EthernetHeader::kSize) {  // VLAN-tagged: not served, as for ARP
        ++counters_.ignored;
        return;
    }
    if (m.hop_limit != kNdHopLimit) {  // RFC 4861 7.1.1, 7.1.2
        ++counters_.bad_hop_limit;
        return;
    }
    const bool solicitation = m.type == kIcmp6NeighborSolicitation;
    Ipv6Addr target{};
    if (m.body.size() >= kTargetEnd) std::copy_n(m.body.begin() + 4, 16, target.begin());
    const auto lla =
        m.body.size() >= kTargetEnd
            ? find_link_addr(m.body.subspan(kTargetEnd), solicitation ? kOptSourceLinkAddr : kOptTargetLinkAddr)
            : std::nullopt;
    // RFC 4861 7.1: code 0, at least 24 bytes of ICMP, no multicast target, sane options; a
    // multicast source is never valid.
    if (m.code != 0 || !lla || is_multicast(target) || is_multicast(m.src)) {
        ++counters_.invalid;
        return;
    }
    const wire::MacAddr* mac = *lla ? &**lla : nullptr;
    if (solicitation)
        receive_solicitation(m, target, mac, now_ns, sink);
    else
        receive_advertisement(m, target, mac, now_ns, sink);
}

void NdAgent::receive_solicitation(const Icmp6Message& m, const Ipv6Addr& target, const wire::MacAddr* source_mac,
                                   uint64_t now_ns, common::FrameSink& sink) {
    const bool dad = is_unspecified(m.src);
    // RFC 4861 7.1.1: a DAD probe goes to a solicited-node group and carries no source address.
    if (dad && (source_mac || solicited_node(target) != m.dst)) {
        ++counters_.invalid;
        return;
    }
    if (!self_.owns(target)) {
        ++counters_.ignored;
        return;
    }
    ++counters_.solicitations_received;
    if (dad) {
        // Someone is about to take our address: answering to all-nodes makes its DAD fail
        // (RFC 4862 5.4.3) and tells us it happened.
        ++counters_.address_conflicts;
        if (advertise(target, kAllNodes, multicast_mac(kAllNodes), kFlagOverride, sink))
            ++counters_.advertisements_sent;
        return;
    }
    // RFC 4861 7.2.3: the asker is learnt, stale until confirmed, so the first frame we send it
    // probes it; off-link askers (outside our prefixes) are answered but not learnt.
    if (source_mac && self_.on_link(m.src)) cache_.learn(m.src, *source_mac, now_ns, sink, true, false);
    const wire::MacAddr& reply_mac = source_mac ? *source_mac : m.eth_src;
    if (advertise(target, m.src, reply_mac, kFlagSolicited | kFlagOverride, sink)) ++counters_.advertisements_sent;
}

void NdAgent::receive_advertisement(const Icmp6Message& m, const Ipv6Addr& target, const wire::MacAddr* target_mac,
                                    uint64_t now_ns, common::FrameSink& sink) {
    const uint8_t flags = m.body[0];
    // RFC 4861 7.1.2: an answer to a solicitation is never sent to a group.
    if (is_multicast(m.dst) && (flags & kFlagSolicited)) {
        ++counters_.invalid;
        return;
    }
    ++counters_.advertisements_received;
    if (self_.owns(target)) {
        if (m.eth_src != self_.mac) ++counters_.address_conflicts;
        return;
    }
    // RFC 4861 7.2.5: advertisements never create entries.
    const auto have = cache_.lookup(target);
    if (!cache_.known(target) || (!target_mac && !have)) {  // an incomplete entry needs the address
        ++counters_.ignored;
        return;
    }
    // Without the override flag a different address does not replace one we have.
    if (target_mac && have && *have != *target_mac && !(flags & kFlagOverride)) {
        ++counters_.ignored;
        return;
    }
    // No target address option: the one we have stands (Linux answers a unicast probe so), and a
    // solicited answer confirms it.
    cache_.learn(target, target_mac ? *target_mac : *have, now_ns, sink, false, (flags & kFlagSolicited) != 0);
}

}  // namespace rnic::port
