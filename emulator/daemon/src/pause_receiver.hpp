// The port's side of 802.3x PAUSE and 802.1Qbb PFC received (docs/congestion.md): parses each
// MAC control frame, turns its pause times (quanta of 512 bit times at the port's rate) into an
// end time per priority for the engine, and keeps the counters under mlx5/ethtool's names
// (rx_prio{N}_pause, rx_prio{N}_pause_duration, rx_pause_ctrl_phy ...). The engine only holds
// and releases; it never sees a MAC control frame.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rnic/transport/engine.hpp"
#include "rnic/wire/headers.hpp"
#include "rnic/wire/mac_control.hpp"

namespace rnic::daemon {

class PauseReceiver {
public:
    PauseReceiver(const wire::MacAddr& own_mac, uint64_t port_rate_mbps) noexcept
        : own_mac_(own_mac), rate_mbps_(port_rate_mbps) {}

    // A frame of EtherType 0x8808 (port::FrameClass::MacControl); false when it was refused
    // (malformed, addressed to another station, or an opcode we do not serve): counted, dropped.
    bool receive(std::span<const uint8_t> frame, uint64_t now_ns, transport::Engine& engine);

    // Every counter by name; durations include a pause still running at `now_ns` (microseconds,
    // as mlx5 reports them).
    std::vector<std::pair<std::string, uint64_t>> counter_list(uint64_t now_ns) const;

private:
    // One pause state: the episode running since `since` until `until` (open), and what is
    // closed already.
    struct Pause {
        uint64_t frames = 0;
        uint64_t since = 0;
        uint64_t until = 0;
        bool open = false;
        uint64_t closed_ns = 0;
        uint64_t transitions = 0;  // XOFF -> XON: a resume frame, or a pause that ran out
    };
    void apply(Pause& p, uint16_t quanta, uint64_t now_ns);
    static uint64_t duration_ns(const Pause& p, uint64_t now_ns) noexcept;
    static uint64_t transitions(const Pause& p, uint64_t now_ns) noexcept;

    wire::MacAddr own_mac_;
    uint64_t rate_mbps_;
    std::array<Pause, wire::kPriorities> prio_{};  // PFC, per priority
    Pause global_;                                   // 802.3x PAUSE: every priority
    uint64_t mac_control_ = 0;   // rx_mac_control_phy: every MAC control frame
    uint64_t pause_ctrl_ = 0;    // rx_pause_ctrl_phy: PAUSE and PFC frames honoured
    uint64_t unsupported_ = 0;   // rx_unsupported_op_phy
    uint64_t malformed_ = 0;     // rx_mac_control_malformed: truncated, or another station's
    uint64_t own_ = 0;           // rx_mac_control_own: from our own MAC (seen leaving), ignored
};

}  // namespace rnic::daemon
