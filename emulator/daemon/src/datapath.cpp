#include "datapath.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "rnic/wire/gsi_frame.hpp"

namespace rnic::daemon {

namespace {

// A MAD waits this long for its neighbour; the CM's own retries take over after that.
constexpr uint64_t kMadNeighbourWaitNs = 1'000'000'000;
constexpr size_t kMadsWaitingMax = 4096;

// Whether a RoCEv2 frame (classified ours, so its headers are in place) goes to QP 1: a look at
// the BTH's destination QP, so the engine's frames pay nothing for the CM.
bool to_gsi(std::span<const uint8_t> f) noexcept {
    if (f.size() < 14) return false;
    size_t l3 = 14;
    uint16_t type = static_cast<uint16_t>(f[12] << 8 | f[13]);
    if (type == 0x8100) {
        if (f.size() < 18) return false;
        type = static_cast<uint16_t>(f[16] << 8 | f[17]);
        l3 = 18;
    }
    size_t l4;
    if (type == 0x0800) {
        if (f.size() < l3 + 20) return false;
        l4 = l3 + size_t{f[l3] & 0x0Fu} * 4;
    } else if (type == 0x86DD) {
        l4 = l3 + 40;
    } else {
        return false;
    }
    const size_t bth = l4 + 8;
    return f.size() >= bth + 12 && f[bth + 5] == 0 && f[bth + 6] == 0 && f[bth + 7] == wire::kGsiQpn;
}

}  // namespace

Datapath::Datapath(port::PortIo& io, transport::Engine& engine, port::HostAddress self, port::Capture* capture,
                   int64_t realtime_offset_ns, Clock clock)
    : io_(io),
      engine_(engine),
      self_(std::move(self)),
      capture_(capture),
      realtime_offset_ns_(realtime_offset_ns),
      clock_(clock),
      arp_(self_),
      nd_(self_),
      pause_(self_.mac, engine.config().port_rate_mbps) {}

void Datapath::start(uint64_t now_ns) {
    now_ = now_ns;
    arp_.announce(io_.tx());
    nd_.announce(io_.tx());
    io_.flush_tx();
}

void Datapath::capture(std::span<const uint8_t> frame, uint64_t at_ns) {
    if (capture_->write(static_cast<uint64_t>(static_cast<int64_t>(at_ns) + realtime_offset_ns_), frame)) {
        ++counters_.captured;
    } else if (capture_log_.allow(now_)) {
        spdlog::error("capture stopped: {}", capture_->error());
    }
}

void Datapath::CaptureTap::commit(size_t length) {
    dp_.io_.tx().commit(length);
    dp_.capture(dp_.io_.last_committed(), dp_.clock_ ? dp_.clock_() : dp_.now_);
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

template <class Agent, class Addr>
Neighbour Datapath::lookup(Agent& agent, const Addr& addr, bool own, bool on_link, uint64_t now_ns,
                           wire::MacAddr& mac) {
    if (own) {
        mac = self_.mac;
        return Neighbour::Resolved;
    }
    // No routing yet: an off-link address would only time out.
    if (!on_link || agent.unreachable(addr)) return Neighbour::Unreachable;
    if (const auto m = agent.resolve(addr, now_ns, io_.tx())) {
        mac = *m;
        return Neighbour::Resolved;
    }
    io_.flush_tx();  // the request leaves now, not at the end of the next turn
    return Neighbour::Pending;
}

Neighbour Datapath::resolve(const wire::Gid& dgid, uint64_t now_ns, wire::MacAddr& mac) {
    if (dgid.is_ipv4_mapped()) {
        const uint32_t ip = dgid.ipv4();
        return lookup(arp_, ip, ip == self_.ipv4, self_.on_link(ip), now_ns, mac);
    }
    const port::Ipv6Addr& ip = dgid.raw;
    // Multicast and :: are never a neighbour; without an IPv6 address we cannot ask.
    const bool usable = !self_.ipv6.empty() && !port::is_multicast(ip) && !port::is_unspecified(ip);
    return lookup(nd_, ip, self_.owns(ip), usable && self_.on_link(ip), now_ns, mac);
}

void Datapath::warn_malformed(port::FrameClass c, size_t length) {
    if (malformed_log_.allow(now_))
        spdlog::warn("dropped a {}-byte frame: {} ({} similar lines suppressed)", length, port::to_string(c),
                     malformed_log_.suppressed());
}

void Datapath::warn_icmp(const char* family, const char* what) {
    if (icmp_log_.allow(now_))
        spdlog::warn("dropped an {} frame: {} ({} similar lines suppressed)", family, what, icmp_log_.suppressed());
}

void Datapath::warn_roce(const transport::RxResult& r, size_t length) {
    if (!roce_log_.allow(now_)) return;
    using transport::RxVerdict;
    if (r.verdict == RxVerdict::BadIcrc || r.verdict == RxVerdict::Malformed || r.verdict == RxVerdict::NotRocev2) {
        spdlog::warn("dropped a {}-byte RoCEv2 frame: {} ({}) ({} similar lines suppressed)", length,
                     transport::to_string(r.verdict), wire::parse_errc_text(r.parse_error), roce_log_.suppressed());
        return;
    }
    spdlog::warn(
        "{} a {}-byte RoCEv2 frame: {} (QP {:#x}, opcode {:#04x}, PSN {}) ({} similar lines suppressed)",
        r.verdict == transport::RxVerdict::RemoteAccessError || r.verdict == transport::RxVerdict::InvalidRequest
            ? "NAKed"
            : "dropped",
        length, transport::to_string(r.verdict), r.qpn, r.opcode, r.psn, roce_log_.suppressed());
}

void Datapath::receive_icmp(std::span<const uint8_t> frame) {
    const auto r = port::answer_echo(frame, self_, io_.tx(), icmp_);
    if (r == port::IcmpResult::BadChecksum || r == port::IcmpResult::Malformed)
        warn_icmp("ICMP", r == port::IcmpResult::BadChecksum ? "bad checksum" : "malformed");
}

void Datapath::receive_icmp6(std::span<const uint8_t> frame, uint64_t now_ns) {
    const auto m = port::parse_icmp6(frame);
    if (!m) {
        const bool checksum = m.error() == port::Icmp6Error::BadChecksum;
        ++(checksum ? icmp6_.bad_checksum : icmp6_.malformed);
        warn_icmp("ICMPv6", checksum ? "bad checksum" : "malformed");
        return;
    }
    switch (m->type) {
        case port::kIcmp6NeighborSolicitation:
        case port::kIcmp6NeighborAdvertisement:
            nd_.receive(*m, now_ns, io_.tx());
            break;
        case port::kIcmp6EchoRequest:
            if (port::answer_echo6(*m, self_, io_.tx(), icmp6_) == port::IcmpResult::Malformed)
                warn_icmp("ICMPv6", "malformed echo request");
            break;
        default:
            ++icmp6_.other_types;
            break;  // router discovery, MLD, errors: not served
    }
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
            case port::FrameClass::Arp:
                arp_.receive(frame, now_ns, io_.tx());
                break;
            case port::FrameClass::IcmpForUs:
                receive_icmp(frame);
                break;
            case port::FrameClass::Icmp6ForUs:
                receive_icmp6(frame, now_ns);
                break;
            case port::FrameClass::RoceForUs:
                receive_roce(frame, now_ns);
                break;
            case port::FrameClass::Malformed:
                warn_malformed(c, frame.size());
                break;
            case port::FrameClass::MacControl:
                if (!pause_.receive(frame, now_ns, engine_) && pause_log_.allow(now_))
                    spdlog::warn("port: MAC control frame of {} bytes dropped (malformed, another station's, or "
                                 "an opcode other than PAUSE/PFC)",
                                 frame.size());
                break;
            case port::FrameClass::NotForUs:
            case port::FrameClass::OtherForUs:
                break;  // counted above; a shared segment is full of these
        }
    }
    io_.release_rx();

    // Our own frames from the last turn, as if they had come in with this burst.
    size_t looped = 0;
    if (!loopback_.empty()) {
        // Swapped, not moved: both vectors keep their capacity, so a steady stream of looped
        // frames allocates nothing (the engine may loop new frames while these are received).
        auto& frames = loopback_receiving_;
        frames.swap(loopback_);
        for (auto& f : frames) {
            receive_roce(f, now_ns);
            loopback_spare_.push_back(std::move(f));
        }
        looped = frames.size();
        frames.clear();
        if (loopback_spare_.size() > 2 * kBurst) loopback_spare_.resize(2 * kBurst);
    }

    engine_.advance(now_ns);
    arp_.advance(now_ns, io_.tx());
    nd_.advance(now_ns, io_.tx());
    const size_t sent = engine_.transmit(loopback_sink_, now_ns, kBurst);
    counters_.roce_tx += sent;
    size_t mads = 0;
    if (cm_) {
        const uint64_t before = counters_.gsi_tx;
        cm_->advance(now_ns);
        send_cm_mads(now_ns);
        mads = counters_.gsi_tx - before;
    }
    io_.flush_tx();
    return n + sent + looped + mads;
}

void Datapath::receive_roce(std::span<const uint8_t> frame, uint64_t now_ns) {
    ++counters_.roce_rx;
    if (capture_) capture(frame, now_ns);
    if (to_gsi(frame)) {
        receive_gsi(frame, now_ns);
        return;
    }
    if (const auto r = engine_.receive(frame, now_ns); r.verdict != transport::RxVerdict::Accepted)
        warn_roce(r, frame.size());
}

void Datapath::receive_gsi(std::span<const uint8_t> frame, uint64_t now_ns) {
    ++counters_.gsi_rx;
    if (!cm_) {
        ++counters_.gsi_no_cm;
        return;
    }
    const auto g = wire::parse_gsi_frame(frame);
    if (!g) {
        ++counters_.gsi_bad;
        if (gsi_log_.allow(now_))
            spdlog::warn("dropped a {}-byte frame to QP 1: {} ({} similar lines suppressed)", frame.size(),
                         wire::parse_errc_text(g.error().code), gsi_log_.suppressed());
        return;
    }
    const wire::RoceFrame& f = g->frame;
    cm::MadRoute from;
    from.local_gid = f.dst_gid;
    from.remote_gid = f.src_gid;
    from.remote_qpn = f.ext.deth ? f.ext.deth->src_qp : wire::kGsiQpn;
    from.traffic_class = static_cast<uint8_t>(f.dscp() << 2 | f.ecn());
    from.hop_limit = f.ip_version == 4 ? f.ipv4.ttl : f.ipv6.hop_limit;
    from.flow_label = f.ip_version == 4 ? 0 : f.ipv6.flow_label;
    from.pkey = f.bth.pkey;
    const auto mad = g->mad.bytes();
    cm_->receive(from, mad, now_ns);
}

bool Datapath::send_mad(const cm::OutboundMad& m, const wire::MacAddr& dst_mac) {
    const cm::MadRoute& r = m.route;
    wire::GsiFrameSpec spec;
    spec.dst_mac = dst_mac;
    spec.src_mac = self_.mac;
    spec.src_gid = r.local_gid;
    spec.dst_gid = r.remote_gid;
    spec.dscp = r.traffic_class >> 2;
    spec.ecn = r.traffic_class & 0x3;
    spec.hop_limit = r.hop_limit;
    spec.ip_id = gsi_ip_id_;
    spec.flow_label = r.flow_label;
    spec.pkey = r.pkey;
    spec.psn = gsi_psn_ & 0xFFFFFF;
    spec.dest_qp = r.remote_qpn;
    const size_t size = r.remote_gid.is_ipv4_mapped() ? wire::kGsiFrameSizeIpv4 : wire::kGsiFrameSizeIpv6;
    const auto buf = loopback_sink_.allocate(size);
    if (buf.size() < size) return false;  // no TX room this turn: the MAD waits
    const auto built = wire::build_gsi_frame(spec, m.mad, buf);
    if (!built) {  // addresses of two families: nothing to send
        ++counters_.gsi_bad;
        return true;
    }
    loopback_sink_.commit(*built);
    ++gsi_ip_id_;
    ++gsi_psn_;
    ++counters_.gsi_tx;
    return true;
}

void Datapath::send_cm_mads(uint64_t now_ns) {
    wire::MacAddr mac{};
    for (auto it = cm_waiting_.begin(); it != cm_waiting_.end();) {
        const Neighbour r = resolve(it->mad.route.remote_gid, now_ns, mac);
        if (r == Neighbour::Resolved) {
            if (!send_mad(it->mad, mac)) return;
            it = cm_waiting_.erase(it);
        } else if (r == Neighbour::Unreachable || now_ns - it->since_ns >= kMadNeighbourWaitNs) {
            ++counters_.gsi_unresolved;
            it = cm_waiting_.erase(it);
        } else {
            ++it;
        }
    }
    while (cm_->has_outbound()) {
        const cm::OutboundMad& m = cm_->front_outbound();
        const Neighbour r = resolve(m.route.remote_gid, now_ns, mac);
        if (r == Neighbour::Resolved) {
            if (!send_mad(m, mac)) return;
        } else if (r == Neighbour::Pending) {
            if (cm_waiting_.size() >= kMadsWaitingMax) {
                cm_waiting_.pop_front();
                ++counters_.gsi_unresolved;
            }
            cm_waiting_.push_back({m, now_ns});
        } else {
            ++counters_.gsi_unresolved;
        }
        cm_->pop_outbound();
    }
}

std::optional<uint64_t> Datapath::next_deadline() const {
    auto a = engine_.next_deadline();
    std::optional<uint64_t> cm, waiting;
    if (cm_) cm = cm_->next_deadline();
    if (!cm_waiting_.empty()) waiting = cm_waiting_.front().since_ns + kMadNeighbourWaitNs;
    for (const auto b : {arp_.next_deadline(), nd_.next_deadline(), cm, waiting})
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
    put("port_rx_missed", ps.rx_missed);
    put("port_rx_bursts", ps.rx_bursts);
    put("port_tx_bursts", ps.tx_bursts);
    for (size_t i = 0; i < port::kFrameClassCount; ++i)
        put("port_rx_" + std::string(port::to_string(static_cast<port::FrameClass>(i))), counters_.rx_by_class[i]);
    put("roce_rx", counters_.roce_rx);
    put("roce_tx", counters_.roce_tx);
    put("captured", counters_.captured);
    put("loopback_frames", counters_.loopback_frames);
    put("gsi_rx", counters_.gsi_rx);
    put("gsi_tx", counters_.gsi_tx);
    put("gsi_bad", counters_.gsi_bad);
    put("gsi_no_cm", counters_.gsi_no_cm);
    put("gsi_unresolved", counters_.gsi_unresolved);
    put("polls", counters_.polls);
    // Each part's own counter list under its prefix (arp_, nd_, icmp_, icmp6_).
    auto put_all = [&](const std::string& prefix, const auto& list) {
        for (const auto& [name, v] : list) put(prefix + std::string(name), v);
    };
    put_all("arp_", arp_.counters().list());
    put_all("arp_", arp_.cache().counters().list());
    put("arp_entries", arp_.entries());
    put_all("nd_", nd_.counters().list());
    put_all("nd_", nd_.cache().counters().list());
    put("nd_entries", nd_.entries());
    put_all("icmp_", icmp_.list());
    put_all("icmp6_", icmp6_.list());
    for (auto& [name, v] : pause_.counter_list(now_)) put(std::move(name), v);
    if (cm_) put_all("cm_", cm_->counters().list());
    return out;
}

std::string Datapath::summary() const {
    std::ostringstream out;
    for (const auto& [name, v] : counter_list())
        if (v && name != "polls" && name != "arp_entries" && name != "nd_entries" && name != "port_rx_bytes" &&
            name != "port_tx_bytes")
            out << name << '=' << v << ' ';
    for (const auto& [name, v] : engine_.device_counters().list())
        if (v) out << "engine_" << name << '=' << v << ' ';
    std::string s = out.str();
    if (!s.empty()) s.pop_back();
    return s;
}

}  // namespace rnic::daemon
