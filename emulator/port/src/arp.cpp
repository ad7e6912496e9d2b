#include "rnic/port/arp.hpp"

#include <algorithm>
#include <cstring>

#include "rnic/port/classify.hpp"
#include "rnic/wire/byte_order.hpp"

namespace rnic::port {

namespace {
constexpr uint16_t kHtypeEthernet = 1;
constexpr uint16_t kOpRequest = 1;
constexpr uint16_t kOpReply = 2;
}  // namespace

std::optional<ArpPacket> parse_arp(std::span<const uint8_t> frame) noexcept {
    using wire::load_be16;
    if (frame.size() < kArpFrameSize) return std::nullopt;
    const uint8_t* p = frame.data();
    if (load_be16(p + 12) != kEtherTypeArp) return std::nullopt;  // VLAN-tagged ARP: not served
    const uint8_t* a = p + 14;
    if (load_be16(a) != kHtypeEthernet || load_be16(a + 2) != wire::kEtherTypeIpv4 || a[4] != 6 || a[5] != 4)
        return std::nullopt;
    ArpPacket pkt;
    pkt.op = load_be16(a + 6);
    if (pkt.op != kOpRequest && pkt.op != kOpReply) return std::nullopt;
    std::copy_n(p, 6, pkt.eth_dst.begin());
    std::copy_n(a + 8, 6, pkt.sender_mac.begin());
    pkt.sender_ip = wire::load_be32(a + 14);
    std::copy_n(a + 18, 6, pkt.target_mac.begin());
    pkt.target_ip = wire::load_be32(a + 24);
    return pkt;
}

bool emit_arp(common::FrameSink& sink, const wire::MacAddr& eth_src, const ArpPacket& pkt) {
    auto out = sink.allocate(wire::kMinEthernetFrame);
    if (out.size() < wire::kMinEthernetFrame) return false;
    uint8_t* p = out.data();
    std::memset(p, 0, wire::kMinEthernetFrame);
    std::copy(pkt.eth_dst.begin(), pkt.eth_dst.end(), p);
    std::copy(eth_src.begin(), eth_src.end(), p + 6);
    wire::store_be16(p + 12, kEtherTypeArp);
    uint8_t* a = p + 14;
    wire::store_be16(a, kHtypeEthernet);
    wire::store_be16(a + 2, wire::kEtherTypeIpv4);
    a[4] = 6;
    a[5] = 4;
    wire::store_be16(a + 6, pkt.op);
    std::copy(pkt.sender_mac.begin(), pkt.sender_mac.end(), a + 8);
    wire::store_be32(a + 14, pkt.sender_ip);
    std::copy(pkt.target_mac.begin(), pkt.target_mac.end(), a + 18);
    wire::store_be32(a + 24, pkt.target_ip);
    sink.commit(wire::kMinEthernetFrame);
    return true;
}

void ArpAgent::announce(common::FrameSink& sink) {
    // Gratuitous request (sender = target = our IP): updates caches that already know the IP
    // under an older MAC, which is what a restarted daemon needs.
    ArpPacket pkt{kOpRequest, self_.mac, self_.ipv4, {}, self_.ipv4, kBroadcastMac};
    if (emit_arp(sink, self_.mac, pkt)) ++counters_.gratuitous_sent;
}

void ArpAgent::solicit(const NeighbourCache::Key& addr, const wire::MacAddr* unicast, common::FrameSink& sink) {
    const uint32_t ip = wire::load_be32(addr.data() + 12);
    ArpPacket pkt{kOpRequest, self_.mac, self_.ipv4, {}, ip, unicast ? *unicast : kBroadcastMac};
    if (emit_arp(sink, self_.mac, pkt)) ++counters_.requests_sent;
}

void ArpAgent::receive(std::span<const uint8_t> frame, uint64_t now_ns, common::FrameSink& sink) {
    const auto pkt = parse_arp(frame);
    if (!pkt) {
        ++counters_.ignored;
        return;
    }
    const bool for_us = pkt->target_ip == self_.ipv4;
    if (pkt->sender_ip == self_.ipv4 && pkt->sender_mac != self_.mac) ++counters_.address_conflicts;
    if (pkt->op == kOpReply) ++counters_.replies_received;
    // RFC 826's merge: refresh what we know; add the sender only when it talked to us, so a
    // busy segment cannot fill the cache. Probes (sender IP 0) teach nothing.
    if (pkt->sender_ip != 0 && pkt->sender_ip != self_.ipv4 && self_.on_link(pkt->sender_ip))
        cache_.learn(key(pkt->sender_ip), pkt->sender_mac, now_ns, sink, for_us);
    else if (!for_us)
        ++counters_.ignored;
    if (pkt->op == kOpRequest && for_us) {
        ++counters_.requests_received;
        ArpPacket reply{kOpReply, self_.mac, self_.ipv4, pkt->sender_mac, pkt->sender_ip, pkt->sender_mac};
        if (emit_arp(sink, self_.mac, reply)) ++counters_.replies_sent;
    }
}

}  // namespace rnic::port
