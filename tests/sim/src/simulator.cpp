#include "rnic/sim/simulator.hpp"

#include <algorithm>
#include <ostream>
#include <stdexcept>
#include <string>

namespace rnic::sim {

NodeId Simulator::add_node(Node& node, const MacAddr& mac) {
    if (is_group_address(mac)) throw std::invalid_argument("sim: node MAC must be unicast: " + to_string(mac));
    if (by_mac_.contains(mac)) throw std::invalid_argument("sim: duplicate node MAC " + to_string(mac));
    if (ports_.size() >= kNoNode) throw std::invalid_argument("sim: too many nodes");
    const auto id = static_cast<NodeId>(ports_.size());
    ports_.push_back(Port{&node, mac});
    by_mac_.emplace(mac, id);
    return id;
}

void Simulator::check_node(NodeId id) const {
    if (id >= ports_.size()) throw std::invalid_argument("sim: no node " + std::to_string(id));
}

void Simulator::connect(NodeId a, NodeId b, const LinkConfig& a_to_b, const LinkConfig& b_to_a) {
    check_node(a);
    check_node(b);
    if (a == b) throw std::invalid_argument("sim: a node cannot be linked to itself");
    if (link_index_.contains({a, b}) || link_index_.contains({b, a}))
        throw std::invalid_argument("sim: nodes " + std::to_string(a) + " and " + std::to_string(b) +
                                    " are already connected");
    link_index_.emplace(std::pair(a, b), &links_.emplace_back(a, b, a_to_b));
    link_index_.emplace(std::pair(b, a), &links_.emplace_back(b, a, b_to_a));
}

void Simulator::connect_all(const LinkConfig& config) {
    for (NodeId a = 0; a < ports_.size(); ++a)
        for (NodeId b = a + 1; b < ports_.size(); ++b)
            if (!link_index_.contains({a, b})) connect(a, b, config);
}

void Simulator::set_uplink(NodeId node, NodeId gateway) {
    find_link(node, gateway);  // throws when they are not connected
    uplink_[node] = gateway;
}

Link& Simulator::find_link(NodeId from, NodeId to) const {
    const auto it = link_index_.find({from, to});
    if (it == link_index_.end())
        throw std::out_of_range("sim: no link " + std::to_string(from) + " -> " + std::to_string(to));
    return *it->second;
}

Link& Simulator::link(NodeId from, NodeId to) {
    return find_link(from, to);
}

const Link& Simulator::link(NodeId from, NodeId to) const {
    return find_link(from, to);
}

void Simulator::emit(TraceKind kind, NodeId from, NodeId to, std::span<const uint8_t> frame) {
    if (trace_) trace_(TraceEvent{now_, kind, from, to, frame});
}

void Simulator::send(NodeId from, std::span<const uint8_t> frame) {
    check_node(from);
    forward(from, frame);
}

void Simulator::forward(NodeId from, std::span<const uint8_t> frame) {
    const std::optional<MacAddr> dst = destination_mac(frame);
    if (!dst) {
        ++counters_.runts;
        emit(TraceKind::kUnroutable, from, kNoNode, frame);
        return;
    }
    if (is_group_address(*dst)) {
        // Broadcast and multicast go to every node this one is linked to, in node order, as a
        // switch floods them (ARP requests must reach the peer).
        for (NodeId to = 0; to < ports_.size(); ++to) {
            const auto it = link_index_.find({from, to});
            if (it != link_index_.end()) send_on(*it->second, frame);
        }
        return;
    }
    const auto node = by_mac_.find(*dst);
    auto it = node == by_mac_.end() ? link_index_.end() : link_index_.find({from, node->second});
    if (it == link_index_.end() && node != by_mac_.end() && node->second != from) {
        const auto up = uplink_.find(from);
        if (up != uplink_.end()) it = link_index_.find({from, up->second});
    }
    if (it == link_index_.end()) {
        ++counters_.unroutable;
        emit(TraceKind::kUnroutable, from, kNoNode, frame);
        return;
    }
    send_on(*it->second, frame);
}

void Simulator::send_on(Link& link, std::span<const uint8_t> frame) {
    emit(TraceKind::kSent, link.from(), link.to(), frame);
    LinkFate fate = link.offer(frame, now_, rng_);
    if (fate.dropped) {
        switch (*fate.dropped) {
            case DropReason::kLoss:
                emit(TraceKind::kDroppedLoss, link.from(), link.to(), frame);
                break;
            case DropReason::kLinkDown:
                emit(TraceKind::kDroppedLinkDown, link.from(), link.to(), frame);
                break;
            case DropReason::kFilter:
                emit(TraceKind::kDroppedFilter, link.from(), link.to(), frame);
                break;
        }
        return;
    }
    for (LinkFate::Arrival& arrival : fate.arrivals) {
        if (arrival.corrupted && !arrival.duplicate) emit(TraceKind::kCorrupted, link.from(), link.to(), arrival.frame);
        if (arrival.reordered) emit(TraceKind::kReordered, link.from(), link.to(), arrival.frame);
        if (arrival.duplicate) emit(TraceKind::kDuplicated, link.from(), link.to(), arrival.frame);
        schedule(link, arrival.time, std::move(arrival.frame));
    }
}

void Simulator::schedule(Link& link, TimeNs time, std::vector<uint8_t> frame) {
    queue_.push_back(Delivery{time, next_sequence_++, &link, std::move(frame)});
    std::push_heap(queue_.begin(), queue_.end(), LaterFirst{});
}

void Simulator::poll_transmits() {
    for (NodeId id = 0; id < ports_.size(); ++id) {
        tx_scratch_.clear();
        ports_[id].node->transmit(tx_scratch_, now_);
        for (const std::vector<uint8_t>& frame : tx_scratch_) forward(id, frame);
    }
    tx_scratch_.clear();
}

std::optional<TimeNs> Simulator::next_event_time() const {
    std::optional<TimeNs> next;
    if (!queue_.empty()) next = queue_.front().time;
    for (const Port& port : ports_) {
        const std::optional<TimeNs> deadline = port.node->next_deadline();
        if (deadline && (!next || *deadline < *next)) next = deadline;
    }
    // A deadline already past fires now: time never runs backwards.
    if (next && *next < now_) next = now_;
    return next;
}

uint64_t Simulator::run_due_events(uint64_t budget) {
    uint64_t handled = 0;
    while (handled < budget && !queue_.empty() && queue_.front().time <= now_) {
        std::pop_heap(queue_.begin(), queue_.end(), LaterFirst{});
        Delivery delivery = std::move(queue_.back());
        queue_.pop_back();
        ++handled;
        Link& link = *delivery.link;
        if (!link.arrive(delivery.frame.size())) {
            emit(TraceKind::kDroppedLinkDown, link.from(), link.to(), delivery.frame);
            continue;
        }
        ++counters_.deliveries;
        emit(TraceKind::kDelivered, link.from(), link.to(), delivery.frame);
        ports_[link.to()].node->receive(delivery.frame, now_);
    }
    for (NodeId id = 0; id < ports_.size() && handled < budget; ++id) {
        const std::optional<TimeNs> deadline = ports_[id].node->next_deadline();
        if (!deadline || *deadline > now_) continue;
        ++handled;
        ++counters_.timer_calls;
        emit(TraceKind::kTimer, id, id, {});
        ports_[id].node->advance(now_);
    }
    return handled;
}

RunResult Simulator::run_until(const std::function<bool()>& done, TimeNs max_time_ns, uint64_t max_events) {
    RunResult result;
    // Bounded: every pass either returns or handles at least one event (next_event_time()
    // found one due at the new now_), and handled events are capped by max_events.
    for (;;) {
        if (done()) {
            result.outcome = RunOutcome::kDone;
            return result;
        }
        poll_transmits();
        if (done()) {
            result.outcome = RunOutcome::kDone;
            return result;
        }
        const std::optional<TimeNs> next = next_event_time();
        if (!next) {
            result.outcome = RunOutcome::kIdle;
            return result;
        }
        if (*next > max_time_ns) {
            now_ = std::max(now_, max_time_ns);
            result.outcome = RunOutcome::kTimedOut;
            return result;
        }
        if (result.events >= max_events) {
            result.outcome = RunOutcome::kEventLimit;
            return result;
        }
        now_ = *next;
        // A node whose next_deadline() disagrees with itself between two calls could make a
        // pass handle nothing; counting the pass anyway keeps even that loop bounded.
        result.events += std::max<uint64_t>(1, run_due_events(max_events - result.events));
    }
}

RunResult Simulator::run_for(TimeNs duration, uint64_t max_events) {
    const TimeNs end = saturating_add(now_, duration);
    RunResult result = run_until([] { return false; }, end, max_events);
    if (result.outcome == RunOutcome::kTimedOut || result.outcome == RunOutcome::kIdle) {
        now_ = end;
        result.outcome = RunOutcome::kDone;
    }
    return result;
}

const char* to_string(RunOutcome outcome) noexcept {
    switch (outcome) {
        case RunOutcome::kDone:
            return "done";
        case RunOutcome::kTimedOut:
            return "timed out";
        case RunOutcome::kEventLimit:
            return "event limit";
        case RunOutcome::kIdle:
            return "idle";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, RunOutcome outcome) {
    return os << to_string(outcome);
}

const char* to_string(TraceKind kind) noexcept {
    switch (kind) {
        case TraceKind::kSent:
            return "sent";
        case TraceKind::kDelivered:
            return "delivered";
        case TraceKind::kDroppedLoss:
            return "dropped (loss)";
        case TraceKind::kDroppedLinkDown:
            return "dropped (link down)";
        case TraceKind::kDroppedFilter:
            return "dropped (filter)";
        case TraceKind::kDuplicated:
            return "duplicated";
        case TraceKind::kReordered:
            return "reordered";
        case TraceKind::kCorrupted:
            return "corrupted";
        case TraceKind::kUnroutable:
            return "unroutable";
        case TraceKind::kTimer:
            return "timer";
    }
    return "?";
}

}  // namespace rnic::sim
