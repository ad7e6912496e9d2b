#include "rnic/sim/switch_node.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "rnic/sim/link.hpp"

namespace rnic::sim {
namespace {

TimeNs serialization_ns(size_t bytes, uint64_t rate_bps) {
    // Rounded up, as the link does: a frame is not out until its last bit is.
    return (uint64_t{bytes} * 8 * kSecond + rate_bps - 1) / rate_bps;
}

std::optional<MacAddr> source_mac(std::span<const uint8_t> frame) {
    if (frame.size() < kEthernetHeaderSize) return std::nullopt;
    MacAddr mac;
    std::copy_n(frame.begin() + 6, 6, mac.begin());
    return mac;
}

}  // namespace

void SwitchNode::add_port(const MacAddr& mac, const EgressPortConfig& config) {
    if (config.rate_bps == 0) throw std::invalid_argument("switch: egress port " + to_string(mac) + " needs a rate");
    if (config.kmax_bytes != 0 && config.kmax_bytes <= config.kmin_bytes)
        throw std::invalid_argument("switch: kmax must exceed kmin on port " + to_string(mac));
    if (!ports_.emplace(mac, Port{config, {}, {}, 0, std::nullopt, 0, {}}).second)
        throw std::invalid_argument("switch: port " + to_string(mac) + " exists already");
}

const SwitchNode::Port& SwitchNode::find(const MacAddr& mac) const {
    const auto it = ports_.find(mac);
    if (it == ports_.end()) throw std::out_of_range("switch: no port " + to_string(mac));
    return it->second;
}

EgressPortConfig& SwitchNode::port_config(const MacAddr& mac) {
    return const_cast<Port&>(find(mac)).config;
}

const EgressPortCounters& SwitchNode::counters(const MacAddr& mac) const {
    return find(mac).counters;
}

uint64_t SwitchNode::queue_bytes(const MacAddr& mac) const {
    const Port& port = find(mac);
    return port.waiting_bytes + (port.in_service ? port.in_service->size() : 0);
}

const std::map<MacAddr, uint64_t>& SwitchNode::bytes_out_by_source(const MacAddr& mac) const {
    return find(mac).by_source;
}

void SwitchNode::maybe_mark(Port& port, std::vector<uint8_t>& frame, uint64_t queue_bytes) {
    const EgressPortConfig& c = port.config;
    if (c.kmax_bytes == 0 || queue_bytes < c.kmin_bytes) return;
    const double p = queue_bytes >= c.kmax_bytes ? 1.0
                                                 : c.pmax * static_cast<double>(queue_bytes - c.kmin_bytes) /
                                                       static_cast<double>(c.kmax_bytes - c.kmin_bytes);
    if (!rng_.chance(p)) return;
    if (mark_ce(frame))
        ++port.counters.ce_marked;
    else
        ++port.counters.not_ect;
}

void SwitchNode::start_service(Port& port, TimeNs now) {
    if (port.in_service || port.waiting.empty()) return;
    port.in_service = std::move(port.waiting.front());
    port.waiting.pop_front();
    port.waiting_bytes -= port.in_service->size();
    if (port.config.mark_point == EcnMarkPoint::kDequeue) maybe_mark(port, *port.in_service, port.waiting_bytes);
    port.service_done = now + serialization_ns(port.in_service->size(), port.config.rate_bps);
}

void SwitchNode::receive(std::span<const uint8_t> frame, TimeNs now) {
    const std::optional<MacAddr> dst = destination_mac(frame);
    const auto it = dst && !is_group_address(*dst) ? ports_.find(*dst) : ports_.end();
    if (it == ports_.end()) {
        ++unknown_destination_;
        return;
    }
    Port& port = it->second;
    const uint64_t buffered = port.waiting_bytes + (port.in_service ? port.in_service->size() : 0);
    if (port.config.buffer_bytes != 0 && buffered + frame.size() > port.config.buffer_bytes) {
        ++port.counters.dropped;
        return;
    }
    std::vector<uint8_t> copy(frame.begin(), frame.end());
    if (port.config.mark_point == EcnMarkPoint::kEnqueue) maybe_mark(port, copy, buffered);
    ++port.counters.enqueued;
    port.waiting_bytes += copy.size();
    port.waiting.push_back(std::move(copy));
    port.counters.peak_queue_bytes = std::max(port.counters.peak_queue_bytes, buffered + frame.size());
    start_service(port, now);
}

void SwitchNode::advance(TimeNs now) {
    // Ports in MAC order, frames in FIFO order: the same inputs give the same outputs.
    for (auto& [mac, port] : ports_) {
        while (port.in_service && port.service_done <= now) {
            const TimeNs done = port.service_done;
            ++port.counters.frames_out;
            port.counters.bytes_out += port.in_service->size();
            if (const auto src = source_mac(*port.in_service)) port.by_source[*src] += port.in_service->size();
            ready_.push_back(std::move(*port.in_service));
            port.in_service.reset();
            // The next frame started when this one finished, not when we got to look.
            start_service(port, done);
        }
    }
}

void SwitchNode::transmit(std::vector<std::vector<uint8_t>>& out, TimeNs /*now*/) {
    for (auto& frame : ready_) out.push_back(std::move(frame));
    ready_.clear();
}

std::optional<TimeNs> SwitchNode::next_deadline() const {
    std::optional<TimeNs> next;
    for (const auto& [mac, port] : ports_)
        if (port.in_service && (!next || port.service_done < *next)) next = port.service_done;
    return next;
}

}  // namespace rnic::sim
