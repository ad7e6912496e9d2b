#include "datapath.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

namespace rnic::daemon {

Datapath::Datapath(port::PortIo& io, transport::Engine& engine, port::HostAddress self, port::Capture* capture,
                   int64_t realtime_offset_ns)
    : io_(io), engine_(engine), self_(self), capture_(capture), realtime_offset_ns_(realtime_offset_ns), arp_(self) {}

void Datapath::start(uint64_t now_ns) {
    now_ = now_ns;
    arp_.announce(io_.tx());
    io_.flush_tx();
}

void Datapath::capture(std::span<const uint8_t> frame) {
    if (capture_->write(static_cast<uint64_t>(static_cast<int64_t>(now_) + realtime_offset_ns_), frame)) {
        ++counters_.captured;
    } else if (capture_log_.allow(now_)) {
        spdlog::error("capture stopped: {}", capture_->error());
    }
}

void Datapath::CaptureTap::commit(size_t length) {
    dp_.io_.tx().commit(length);
    dp_.capture(dp_.io_.last_committed());
}

std::span<uint8_t> Datapath::LoopbackSink::allocate(size_t length) {
    transport::FrameSink& down = dp_.capture_ ? static_cast<transport::FrameSink&>(dp_.tap_) : dp_.io_.tx();
    pending_ = down.allocate(length);
    return pending_;
}

void Datapath::LoopbackSink::commit(size_t length) {
    if (length >= 6 && std::equal(dp_.self_.mac.begin(), dp_.self_.mac.end(), pending_.begin())) {
        // Never committed downstream: the port reuses an allocation that was not committed.
        std::vector<uint8_t> frame;
        if (!dp_.loopback_spare_.empty()) {
            frame = std::move(dp_.loopback_spare_.back());
            dp_.loopback_spare_.pop_back();
        }
        frame.assign(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(length));
        dp_.loopback_.push_back(std::move(frame));
        ++dp_.counters_.loopback_frames;
        return;
    }
    transport::FrameSink& down = dp_.capture_ ? static_cast<transport::FrameSink&>(dp_.tap_) : dp_.io_.tx();
    down.commit(length);
}

Neighbour Datapath::resolve(uint32_t ipv4, uint64_t now_ns, wire::MacAddr& mac) {
    if (ipv4 == self_.ipv4) {
        mac = self_.mac;
        return Neighbour::Resolved;
    }
    // No routing yet: an off-link address would only time out in ARP.
    if (!self_.on_link(ipv4) || arp_.unreachable(ipv4)) return Neighbour::Unreachable;
    if (const auto m = arp_.resolve(ipv4, now_ns, io_.tx())) {
        mac = *m;
        return Neighbour::Resolved;
    }
    io_.flush_tx();  // the request leaves now, not at the end of the next turn
    return Neighbour::Pending;
}

void Datapath::warn_malformed(port::FrameClass c, size_t length) {
    if (malformed_log_.allow(now_))
        spdlog::warn("dropped a {}-byte frame: {} ({} similar lines suppressed)", length, port::to_string(c),
                     malformed_log_.suppressed());
}

size_t Datapath::poll(uint64_t now_ns) {
    now_ = now_ns;
    ++counters_.polls;
    const size_t n = io_.rx_burst(rx_);
    for (size_t i = 0; i < n; ++i) {
        const auto frame = rx_[i];
        const auto c = port::classify(frame, self_);
        ++counters_.rx_by_class[static_cast<size_t>(c)];
        switch (c) {
            case port::FrameClass::Arp: arp_.receive(frame, now_ns, io_.tx()); break;
            case port::FrameClass::IcmpForUs:
                if (const auto r = port::answer_echo(frame, self_, io_.tx(), icmp_);
                    r == port::IcmpResult::BadChecksum || r == port::IcmpResult::Malformed) {
                    if (icmp_log_.allow(now_ns))
                        spdlog::warn("dropped an ICMP frame: {} ({} similar lines suppressed)",
                                     r == port::IcmpResult::BadChecksum ? "bad checksum" : "malformed",
                                     icmp_log_.suppressed());
                }
                break;
            case port::FrameClass::RoceForUs:
                ++counters_.roce_rx;
                if (capture_) capture(frame);
                engine_.receive(frame, now_ns);
                break;
            case port::FrameClass::Malformed: warn_malformed(c, frame.size()); break;
            case port::FrameClass::NotForUs:
            case port::FrameClass::OtherForUs:
            case port::FrameClass::Ipv6: break;  // counted above; a shared segment is full of these
        }
    }
    io_.release_rx();

    // Our own frames from the last turn, as if they had come in with this burst.
    size_t looped = 0;
    if (!loopback_.empty()) {
        auto frames = std::move(loopback_);
        loopback_.clear();
        for (auto& f : frames) {
            ++counters_.roce_rx;
            if (capture_) capture(f);
            engine_.receive(f, now_ns);
            loopback_spare_.push_back(std::move(f));
        }
        looped = frames.size();
        if (loopback_spare_.size() > 2 * kBurst) loopback_spare_.resize(2 * kBurst);
    }

    engine_.advance(now_ns);
    arp_.advance(now_ns, io_.tx());
    const size_t sent = engine_.transmit(loopback_sink_, now_ns, kBurst);
    counters_.roce_tx += sent;
    io_.flush_tx();
    return n + sent + looped;
}

std::optional<uint64_t> Datapath::next_deadline() const {
    auto a = engine_.next_deadline();
    const auto b = arp_.next_deadline();
    if (!a || (b && *b < *a)) a = b;
    return a;
}

std::vector<std::pair<std::string, uint64_t>> Datapath::counter_list() const {
    std::vector<std::pair<std::string, uint64_t>> out;
    auto put = [&](std::string name, uint64_t v) { out.emplace_back(std::move(name), v); };
    const auto ps = io_.stats();
    put("port_rx_frames", ps.rx_frames);
    put("port_rx_bytes", ps.rx_bytes);
    put("port_tx_frames", ps.tx_frames);
    put("port_tx_bytes", ps.tx_bytes);
    put("port_tx_no_buffer", ps.tx_no_buffer);
    put("port_tx_dropped", ps.tx_dropped);
    for (size_t i = 0; i < port::kFrameClassCount; ++i)
        put("port_rx_" + std::string(port::to_string(static_cast<port::FrameClass>(i))), counters_.rx_by_class[i]);
    put("roce_rx", counters_.roce_rx);
    put("roce_tx", counters_.roce_tx);
    put("captured", counters_.captured);
    put("loopback_frames", counters_.loopback_frames);
    put("polls", counters_.polls);
    const auto& a = arp_.counters();
    put("arp_requests_received", a.requests_received);
    put("arp_replies_sent", a.replies_sent);
    put("arp_requests_sent", a.requests_sent);
    put("arp_replies_received", a.replies_received);
    put("arp_gratuitous_sent", a.gratuitous_sent);
    put("arp_resolved", a.resolved);
    put("arp_resolution_failures", a.resolution_failures);
    put("arp_queued_frames", a.queued_frames);
    put("arp_queued_dropped", a.queued_dropped);
    put("arp_ignored", a.ignored);
    put("arp_address_conflicts", a.address_conflicts);
    put("arp_entries", arp_.entries());
    put("icmp_echo_requests", icmp_.echo_requests);
    put("icmp_echo_replies", icmp_.echo_replies);
    put("icmp_other_types", icmp_.other_types);
    put("icmp_bad_checksum", icmp_.bad_checksum);
    return out;
}

std::string Datapath::summary() const {
    std::ostringstream out;
    for (const auto& [name, v] : counter_list())
        if (v && name != "polls" && name != "arp_entries" && name != "port_rx_bytes" && name != "port_tx_bytes")
            out << name << '=' << v << ' ';
    for (const auto& [name, v] : engine_.device_counters().list())
        if (v) out << "engine_" << name << '=' << v << ' ';
    std::string s = out.str();
    if (!s.empty()) s.pop_back();
    return s;
}

}  // namespace rnic::daemon
