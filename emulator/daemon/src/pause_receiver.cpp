#include "pause_receiver.hpp"

#include <algorithm>

namespace rnic::daemon {

bool PauseReceiver::receive(std::span<const uint8_t> frame, uint64_t now_ns, transport::Engine& engine) {
    // From our own MAC: a frame another program sent on this interface, which an af_packet port
    // sees too. Not a peer's request, and a NIC would never receive its own.
    if (frame.size() >= 12 && std::equal(frame.begin() + 6, frame.begin() + 12, own_mac_.begin())) {
        ++own_;
        return true;
    }
    ++mac_control_;
    const auto parsed = wire::parse_mac_control(frame);
    if (!parsed) {
        if (parsed.error() == wire::MacControlError::UnsupportedOpcode)
            ++unsupported_;
        else
            ++malformed_;
        return false;
    }
    const wire::MacControlFrame& f = *parsed;
    // 802.3 31B.3.3: a MAC control frame is for the reserved group address or this station.
    if (f.destination != wire::kMacControlAddress && f.destination != own_mac_) {
        ++malformed_;
        return false;
    }
    ++pause_ctrl_;
    if (!f.pfc) {
        apply(global_, f.quanta[0], now_ns);
        for (uint8_t p = 0; p < wire::kPriorities; ++p) engine.pause_priority(p, global_.until);
        return true;
    }
    for (uint8_t p = 0; p < wire::kPriorities; ++p) {
        if (!((f.class_enable >> p) & 1)) continue;
        apply(prio_[p], f.quanta[p], now_ns);
        engine.pause_priority(p, prio_[p].until);
    }
    return true;
}

void PauseReceiver::apply(Pause& p, uint16_t quanta, uint64_t now_ns) {
    ++p.frames;
    if (p.open && p.until <= now_ns) {  // ran out before this frame
        p.closed_ns += p.until - p.since;
        ++p.transitions;
        p.open = false;
    }
    if (p.open) p.closed_ns += now_ns - p.since;  // a refresh or a resume: the time so far counts
    if (quanta == 0) {
        if (p.open) ++p.transitions;
        p.open = false;
        p.until = now_ns;
        return;
    }
    p.open = true;
    p.since = now_ns;
    p.until = now_ns + wire::pause_quanta_ns(quanta, rate_mbps_);
}

uint64_t PauseReceiver::duration_ns(const Pause& p, uint64_t now_ns) noexcept {
    return p.closed_ns + (p.open ? std::min(now_ns, p.until) - std::min(p.since, now_ns) : 0);
}

uint64_t PauseReceiver::transitions(const Pause& p, uint64_t now_ns) noexcept {
    return p.transitions + (p.open && p.until <= now_ns ? 1 : 0);
}

std::vector<std::pair<std::string, uint64_t>> PauseReceiver::counter_list(uint64_t now_ns) const {
    std::vector<std::pair<std::string, uint64_t>> out;
    out.emplace_back("rx_mac_control_phy", mac_control_);
    out.emplace_back("rx_pause_ctrl_phy", pause_ctrl_);
    out.emplace_back("rx_unsupported_op_phy", unsupported_);
    out.emplace_back("rx_mac_control_malformed", malformed_);
    out.emplace_back("rx_mac_control_own", own_);
    out.emplace_back("rx_global_pause", global_.frames);
    out.emplace_back("rx_global_pause_duration", duration_ns(global_, now_ns) / 1000);
    out.emplace_back("rx_global_pause_transition", transitions(global_, now_ns));
    for (size_t p = 0; p < prio_.size(); ++p) {
        const std::string prefix = "rx_prio" + std::to_string(p) + "_pause";
        out.emplace_back(prefix, prio_[p].frames);
        out.emplace_back(prefix + "_duration", duration_ns(prio_[p], now_ns) / 1000);
        out.emplace_back(prefix + "_transition", transitions(prio_[p], now_ns));
    }
    return out;
}

}  // namespace rnic::daemon
