// What a port_rate side prints: one parseable line ("port_rate tx: key=value ...") or, with
// --json, one JSON object. Pure formatting, unit-tested.
#pragma once

#include <cstdint>
#include <string>

#include "rate_options.hpp"

namespace rnic::port_rate {

struct Report {
    Role role = Role::Rx;
    Pmd pmd = Pmd::AfPacket;
    std::string iface;
    size_t payload = 0;  // tx: the WRITE payload per frame (the receiver knows only the frame sizes)
    unsigned burst = 0;
    double seconds = 0;    // tx: sending time; rx: first to last RoCEv2 frame
    uint64_t frames = 0;   // tx: taken by the port; rx: RoCEv2 frames received
    uint64_t bytes = 0;    // Ethernet frame bytes (no FCS) of `frames`
    uint64_t dropped = 0;  // tx: not taken after the port's retries, or no buffer
    uint64_t other = 0;    // rx: frames that were not RoCEv2 (ARP, ...)
    uint64_t bad = 0;      // rx --verify: RoCEv2 frames the parser rejected (ICRC, lengths)
    uint64_t missed = 0;   // rx: frames the PMD counted as lost before we polled (ring full)

    uint64_t frame_bytes() const noexcept { return frames ? bytes / frames : 0; }  // the mean
    double pps() const noexcept { return seconds > 0 ? static_cast<double>(frames) / seconds : 0; }
    double gbps() const noexcept { return seconds > 0 ? static_cast<double>(bytes) * 8 / seconds / 1e9 : 0; }
};

std::string format_line(const Report& r);
std::string format_json(const Report& r);

}  // namespace rnic::port_rate
