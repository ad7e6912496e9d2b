#include "rnic/sim/link.hpp"

#include <algorithm>

namespace rnic::sim {

TimeNs Link::serialization_delay(size_t frame_bytes) const noexcept {
    if (config_.bandwidth_bps == 0) return 0;
    const uint64_t bits = uint64_t{frame_bytes} * 8;
    // Rounded up: a frame is not there until its last bit is. bits * 1e9 fits in 64 bits for
    // any frame under 2 GB.
    return (bits * kSecond + config_.bandwidth_bps - 1) / config_.bandwidth_bps;
}

void Link::count_drop(DropReason reason) noexcept {
    ++counters_.dropped;
    switch (reason) {
        case DropReason::kLoss:
            ++counters_.dropped_loss;
            break;
        case DropReason::kLinkDown:
            ++counters_.dropped_link_down;
            break;
        case DropReason::kFilter:
            ++counters_.dropped_filter;
            break;
    }
}

uint64_t Link::queued_bytes(TimeNs now) const noexcept {
    if (config_.bandwidth_bps == 0 || busy_until_ <= now) return 0;
    return (busy_until_ - now) * config_.bandwidth_bps / (8 * kSecond);
}

bool mark_ce(std::vector<uint8_t>& frame) noexcept {
    size_t l3 = 14;
    if (frame.size() < l3) return false;
    uint16_t ethertype = static_cast<uint16_t>(frame[12] << 8 | frame[13]);
    if (ethertype == 0x8100 && frame.size() >= 18) {
        ethertype = static_cast<uint16_t>(frame[16] << 8 | frame[17]);
        l3 = 18;
    }
    if (ethertype == 0x0800 && frame.size() >= l3 + 20) {
        uint8_t& tos = frame[l3 + 1];
        if ((tos & 3) == 0) return false;  // not ECN-capable: a switch would drop, not mark
        tos |= 3;
        const size_t header = static_cast<size_t>(frame[l3] & 0x0F) * 4;
        if (header < 20 || frame.size() < l3 + header) return false;
        frame[l3 + 10] = frame[l3 + 11] = 0;
        uint32_t sum = 0;
        for (size_t i = 0; i < header; i += 2) sum += static_cast<uint32_t>(frame[l3 + i] << 8 | frame[l3 + i + 1]);
        while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
        const auto checksum = static_cast<uint16_t>(~sum);
        frame[l3 + 10] = static_cast<uint8_t>(checksum >> 8);
        frame[l3 + 11] = static_cast<uint8_t>(checksum);
        return true;
    }
    if (ethertype == 0x86DD && frame.size() >= l3 + 40) {
        const uint8_t ecn = (frame[l3 + 1] >> 4) & 3;  // traffic class straddles bytes 0 and 1
        if (ecn == 0) return false;
        frame[l3 + 1] |= 0x30;
        return true;
    }
    return false;
}

LinkFate Link::offer(std::span<const uint8_t> frame, TimeNs now, Random& rng) {
    LinkFate fate;
    ++counters_.sent;
    counters_.bytes_sent += frame.size();

    if (config_.down) {
        count_drop(DropReason::kLinkDown);
        fate.dropped = DropReason::kLinkDown;
        return fate;
    }

    // The sender's port clocks the frame out even if the network then loses it, so a lost
    // frame still costs its serialization time.
    const uint64_t queued = queued_bytes(now);
    counters_.peak_queue_bytes = std::max(counters_.peak_queue_bytes, queued);
    const TimeNs departure = saturating_add(std::max(now, busy_until_), serialization_delay(frame.size()));
    busy_until_ = departure;

    if (config_.drop_filter && config_.drop_filter(frame)) {
        count_drop(DropReason::kFilter);
        fate.dropped = DropReason::kFilter;
        return fate;
    }
    if (rng.chance(config_.loss_probability)) {
        count_drop(DropReason::kLoss);
        fate.dropped = DropReason::kLoss;
        return fate;
    }

    LinkFate::Arrival arrival;
    arrival.time = saturating_add(saturating_add(departure, config_.latency_ns), rng.uniform(0, config_.jitter_ns));
    if (rng.chance(config_.reorder_probability)) {
        // Held back past the FIFO floor and without raising it, so later frames overtake it.
        arrival.time =
            saturating_add(arrival.time, rng.uniform(config_.reorder_delay_min_ns, config_.reorder_delay_max_ns));
        arrival.reordered = true;
        ++counters_.reordered;
    } else {
        arrival.time = std::max(arrival.time, last_in_order_arrival_);
        last_in_order_arrival_ = arrival.time;
    }

    arrival.frame.assign(frame.begin(), frame.end());
    if (config_.ecn.kmax_bytes > 0 && queued >= config_.ecn.kmin_bytes) {
        const auto& red = config_.ecn;
        const double p = queued >= red.kmax_bytes
                             ? 1.0
                             : red.pmax * static_cast<double>(queued - red.kmin_bytes) /
                                   static_cast<double>(red.kmax_bytes - red.kmin_bytes);
        if (rng.chance(p) && mark_ce(arrival.frame)) ++counters_.ce_marked;
    }
    if (!arrival.frame.empty() && rng.chance(config_.corrupt_probability)) {
        const uint64_t bit = rng.uniform(0, arrival.frame.size() * 8 - 1);
        arrival.frame[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        arrival.corrupted = true;
        ++counters_.corrupted;
    }

    if (rng.chance(config_.duplicate_probability)) {
        LinkFate::Arrival copy;
        copy.time = saturating_add(arrival.time, rng.uniform(0, config_.duplicate_delay_max_ns));
        copy.frame = arrival.frame;
        copy.duplicate = true;
        copy.corrupted = arrival.corrupted;
        ++counters_.duplicated;
        fate.arrivals.push_back(std::move(arrival));
        fate.arrivals.push_back(std::move(copy));
    } else {
        fate.arrivals.push_back(std::move(arrival));
    }
    return fate;
}

bool Link::arrive(size_t frame_bytes) {
    if (config_.down) {
        count_drop(DropReason::kLinkDown);
        return false;
    }
    ++counters_.delivered;
    counters_.bytes_delivered += frame_bytes;
    return true;
}

const char* to_string(DropReason reason) noexcept {
    switch (reason) {
        case DropReason::kLoss:
            return "loss";
        case DropReason::kLinkDown:
            return "link down";
        case DropReason::kFilter:
            return "filter";
    }
    return "?";
}

}  // namespace rnic::sim
