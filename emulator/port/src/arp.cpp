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
constexpr uint64_t kNever = UINT64_MAX;

bool emit_copy(transport::FrameSink& sink, std::span<const uint8_t> frame) {
    auto out = sink.allocate(frame.size());
    if (out.size() < frame.size()) return false;
    std::memcpy(out.data(), frame.data(), frame.size());
    sink.commit(frame.size());
    return true;
}
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

bool emit_arp(transport::FrameSink& sink, const wire::MacAddr& eth_src, const ArpPacket& pkt) {
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

void ArpAgent::announce(transport::FrameSink& sink) {
    // Gratuitous request (sender = target = our IP): updates caches that already know the IP
    // under an older MAC, which is what a restarted daemon needs.
    ArpPacket pkt{kOpRequest, self_.mac, self_.ipv4, {}, self_.ipv4, kBroadcastMac};
    if (emit_arp(sink, self_.mac, pkt)) ++counters_.gratuitous_sent;
}

void ArpAgent::send_request(uint32_t ip, const wire::MacAddr& dst, transport::FrameSink& sink) {
    ArpPacket pkt{kOpRequest, self_.mac, self_.ipv4, {}, ip, dst};
    if (emit_arp(sink, self_.mac, pkt)) ++counters_.requests_sent;
}

void ArpAgent::drop_queue(Entry& e) {
    counters_.queued_dropped += e.queue.size();
    e.queue.clear();
}

void ArpAgent::schedule(uint64_t deadline) { earliest_ = std::min(earliest_, deadline); }

void ArpAgent::learn(uint32_t ip, const wire::MacAddr& mac, uint64_t now_ns, transport::FrameSink& sink,
                     bool create) {
    auto it = cache_.find(ip);
    if (it == cache_.end()) {
        if (!create || cache_.size() >= config_.max_entries) return;
        it = cache_.emplace(ip, Entry{}).first;
    }
    Entry& e = it->second;
    if (e.state != State::Reachable && e.state != State::Probe) ++counters_.resolved;
    e.state = State::Reachable;
    e.mac = mac;
    e.requests = 0;
    e.deadline = now_ns + config_.reachable_ns;
    while (!e.queue.empty()) {
        auto& f = e.queue.front();
        std::copy(mac.begin(), mac.end(), f.begin());
        if (!emit_copy(sink, f)) ++counters_.queued_dropped;
        e.queue.pop_front();
    }
}

void ArpAgent::receive(std::span<const uint8_t> frame, uint64_t now_ns, transport::FrameSink& sink) {
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
        learn(pkt->sender_ip, pkt->sender_mac, now_ns, sink, for_us);
    else if (!for_us)
        ++counters_.ignored;
    if (pkt->op == kOpRequest && for_us) {
        ++counters_.requests_received;
        ArpPacket reply{kOpReply, self_.mac, self_.ipv4, pkt->sender_mac, pkt->sender_ip, pkt->sender_mac};
        if (emit_arp(sink, self_.mac, reply)) ++counters_.replies_sent;
    }
}

std::optional<wire::MacAddr> ArpAgent::resolve(uint32_t ip, uint64_t now_ns, transport::FrameSink& sink) {
    auto it = cache_.find(ip);
    if (it == cache_.end()) {
        if (cache_.size() >= config_.max_entries) return std::nullopt;
        Entry& e = cache_.emplace(ip, Entry{}).first->second;
        e.requests = 1;
        e.deadline = now_ns + config_.retry_ns;
        schedule(e.deadline);
        send_request(ip, kBroadcastMac, sink);
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
                send_request(ip, e.mac, sink);
            }
            return e.mac;
        case State::Probe: return e.mac;
        case State::Incomplete:
        case State::Failed: return std::nullopt;
    }
    return std::nullopt;
}

void ArpAgent::enqueue(uint32_t ip, std::span<const uint8_t> frame, uint64_t now_ns, transport::FrameSink& sink) {
    if (frame.size() < 6) {
        ++counters_.queued_dropped;
        return;
    }
    if (const auto mac = resolve(ip, now_ns, sink)) {
        std::vector<uint8_t> f(frame.begin(), frame.end());
        std::copy(mac->begin(), mac->end(), f.begin());
        if (!emit_copy(sink, f)) ++counters_.queued_dropped;
        return;
    }
    auto it = cache_.find(ip);
    if (it == cache_.end() || it->second.state == State::Failed ||
        it->second.queue.size() >= config_.max_queued_per_neighbour) {
        ++counters_.queued_dropped;
        return;
    }
    it->second.queue.emplace_back(frame.begin(), frame.end());
    ++counters_.queued_frames;
}

void ArpAgent::advance(uint64_t now_ns, transport::FrameSink& sink) {
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
                send_request(it->first, e.state == State::Probe ? e.mac : kBroadcastMac, sink);
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

std::optional<uint64_t> ArpAgent::next_deadline() const {
    if (earliest_ == kNever) return std::nullopt;
    return earliest_;
}

}  // namespace rnic::port
