// Toy nodes for the simulator's own tests. Their frames are Ethernet headers with a local
// experimental EtherType followed by a 64-bit sequence number, padded to any size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "rnic/sim/mac.hpp"
#include "rnic/sim/node.hpp"

namespace rnic::sim::test {

inline constexpr uint16_t kToyEtherType = 0x88B5;  // IEEE local experimental
inline constexpr size_t kToyMinFrame = kEthernetHeaderSize + 8;

inline MacAddr toy_mac(uint8_t n) {
    return MacAddr{0x02, 0, 0, 0, 0, n};
}  // locally administered

inline std::vector<uint8_t> toy_frame(const MacAddr& dst, const MacAddr& src, uint64_t seq,
                                      size_t size = kToyMinFrame) {
    std::vector<uint8_t> frame(std::max(size, kToyMinFrame), 0);
    std::copy(dst.begin(), dst.end(), frame.begin());
    std::copy(src.begin(), src.end(), frame.begin() + 6);
    frame[12] = kToyEtherType >> 8;
    frame[13] = kToyEtherType & 0xff;
    for (int i = 0; i < 8; ++i) frame[kEthernetHeaderSize + i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
    for (size_t i = kToyMinFrame; i < frame.size(); ++i) frame[i] = static_cast<uint8_t>(seq + i);
    return frame;
}

inline uint64_t toy_seq(std::span<const uint8_t> frame) {
    uint64_t seq = 0;
    for (int i = 0; i < 8; ++i) seq = seq << 8 | frame[kEthernetHeaderSize + i];
    return seq;
}

// Sends frames 0..count-1 to `dst`, the first at `start`, then one every `interval`
// (interval 0: all at once). Sending on a timer exercises the deadline path.
class SenderNode : public Node {
public:
    SenderNode(MacAddr self, MacAddr dst, uint64_t count, TimeNs start = 0, TimeNs interval = 0,
               size_t size = kToyMinFrame)
        : self_(self), dst_(dst), count_(count), next_time_(start), interval_(interval), size_(size) {}

    void receive(std::span<const uint8_t> frame, TimeNs now) override { received.push_back({toy_seq(frame), now}); }
    void transmit(std::vector<std::vector<uint8_t>>& out, TimeNs) override {
        for (auto& frame : ready_) out.push_back(std::move(frame));
        ready_.clear();
    }
    std::optional<TimeNs> next_deadline() const override {
        if (next_seq_ >= count_) return std::nullopt;
        return next_time_;
    }
    void advance(TimeNs now) override {
        // Bounded by count_: each pass consumes one sequence number.
        while (next_seq_ < count_ && next_time_ <= now) {
            ready_.push_back(toy_frame(dst_, self_, next_seq_++, size_));
            next_time_ += interval_;
        }
    }

    uint64_t sent() const { return next_seq_; }
    struct Arrival {
        uint64_t seq;
        TimeNs time;
    };
    std::vector<Arrival> received;

private:
    MacAddr self_;
    MacAddr dst_;
    uint64_t count_;
    TimeNs next_time_;
    TimeNs interval_;
    size_t size_;
    uint64_t next_seq_ = 0;
    std::vector<std::vector<uint8_t>> ready_;
};

// Records what arrives; with echo on, sends each frame back with the addresses swapped.
class SinkNode : public Node {
public:
    explicit SinkNode(bool echo = false) : echo_(echo) {}

    struct Arrival {
        uint64_t seq;
        TimeNs time;
        std::vector<uint8_t> frame;
    };
    std::vector<Arrival> received;

    void receive(std::span<const uint8_t> frame, TimeNs now) override {
        received.push_back({frame.size() >= kToyMinFrame ? toy_seq(frame) : ~uint64_t{0}, now,
                            std::vector<uint8_t>(frame.begin(), frame.end())});
        if (echo_) {
            std::vector<uint8_t> reply(frame.begin(), frame.end());
            std::swap_ranges(reply.begin(), reply.begin() + 6, reply.begin() + 6);
            replies_.push_back(std::move(reply));
        }
    }
    void transmit(std::vector<std::vector<uint8_t>>& out, TimeNs) override {
        for (auto& frame : replies_) out.push_back(std::move(frame));
        replies_.clear();
    }
    std::optional<TimeNs> next_deadline() const override { return std::nullopt; }
    void advance(TimeNs) override {}

private:
    bool echo_;
    std::vector<std::vector<uint8_t>> replies_;
};

// Timers at fixed instants; records when each fired. With rearm set, each firing arms a
// new timer `rearm` later, forever (a runaway for the bounds tests).
class TimerNode : public Node {
public:
    explicit TimerNode(std::vector<TimeNs> deadlines, TimeNs rearm = 0)
        : pending_(deadlines.begin(), deadlines.end()), rearm_(rearm) {
        std::sort(pending_.begin(), pending_.end());
    }

    std::vector<TimeNs> fired;

    void receive(std::span<const uint8_t>, TimeNs) override {}
    void transmit(std::vector<std::vector<uint8_t>>&, TimeNs) override {}
    std::optional<TimeNs> next_deadline() const override {
        if (pending_.empty()) return std::nullopt;
        return pending_.front();
    }
    void advance(TimeNs now) override {
        while (!pending_.empty() && pending_.front() <= now) {
            fired.push_back(now);
            pending_.pop_front();
            if (rearm_ != 0)
                pending_.insert(std::upper_bound(pending_.begin(), pending_.end(), now + rearm_), now + rearm_);
        }
    }

private:
    std::deque<TimeNs> pending_;
    TimeNs rearm_;
};

// A buggy node whose timer never clears: the loop must still end.
class StuckTimerNode : public Node {
public:
    uint64_t calls = 0;
    void receive(std::span<const uint8_t>, TimeNs) override {}
    void transmit(std::vector<std::vector<uint8_t>>&, TimeNs) override {}
    std::optional<TimeNs> next_deadline() const override { return TimeNs{0}; }
    void advance(TimeNs) override { ++calls; }
};

}  // namespace rnic::sim::test
