// port_rate's command line: which side, which interface and PMD, what to send and for how long.
// Pure logic (no DPDK), so it is unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rnic/wire/headers.hpp"

namespace rnic::port_rate {

enum class Role : uint8_t { Tx, Rx };
enum class Pmd : uint8_t { AfPacket, AfXdp, Ring };

const char* to_string(Pmd pmd) noexcept;

struct Options {
    Role role = Role::Rx;
    std::string iface;
    Pmd pmd = Pmd::AfPacket;
    size_t payload = 64;   // RDMA WRITE payload bytes per frame
    double seconds = 4.0;  // tx: how long to send; rx: the longest window after the first frame
    unsigned burst = 32;   // frames per tx_burst / rx_burst
    // Addresses written into the frames (tx). The receiver counts what reaches its port, so only
    // the destination MAC matters for delivery: the peer's, as rnicd's frames carry it.
    wire::MacAddr dst_mac{0x02, 0, 0, 0, 0, 0x02};
    uint32_t src_ip = 0x0A3E0001;  // 10.62.0.1
    uint32_t dst_ip = 0x0A3E0002;  // 10.62.0.2
    double wait = 10.0;      // rx: give up when no RoCEv2 frame came within this many seconds
    unsigned idle_ms = 500;  // rx: the stream is over after this long without a frame
    // rx: sleep this long after a poll that found nothing. A receiver that spins on the ring
    // reads the very frame header the sender's softirq writes next (af_packet): on this VM that
    // cache-line traffic cut the sender from 679 k to 140 k frames/s. 0: spin.
    unsigned nap_us = 50;
    bool verify = false;     // rx: parse every RoCEv2 frame and check its ICRC (costs CPU)
    bool json = false;
};

// Throws std::invalid_argument with a message for the user on anything it does not accept.
Options parse_options(const std::vector<std::string>& args);

std::string usage();

}  // namespace rnic::port_rate
