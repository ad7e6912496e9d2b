// Ethernet MAC control frames a port must honour: 802.3x PAUSE (Annex 31B: opcode 0x0001, one
// pause time) and 802.1Qbb priority flow control (opcode 0x0101, a class-enable vector and one
// pause time per priority). Times are in quanta of 512 bit times at the link's rate; 0 means
// "resume now". Parsing only: what a pause does to transmission is the port's and engine's.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "rnic/wire/expected.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::wire {

inline constexpr uint16_t kEtherTypeMacControl = 0x8808;
inline constexpr uint16_t kMacControlPause = 0x0001;
inline constexpr uint16_t kMacControlPfc = 0x0101;
// The reserved group address MAC control frames go to (a PAUSE may also name the station).
inline constexpr MacAddr kMacControlAddress = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
inline constexpr size_t kPriorities = 8;

struct MacControlFrame {
    bool pfc = false;  // false: 802.3x PAUSE, which stops every priority
    // PFC: the priorities whose time is valid (the vector's low byte; the high byte is reserved);
    // PAUSE: all eight.
    uint8_t class_enable = 0;
    std::array<uint16_t, kPriorities> quanta{};  // PAUSE: the one time, copied to all eight
    MacAddr destination{};
};

enum class MacControlError : uint8_t {
    NotMacControl,      // another EtherType (or a VLAN tag: MAC control frames are never tagged)
    Truncated,          // shorter than its opcode's fields
    UnsupportedOpcode,  // a MAC control opcode other than PAUSE and PFC (e.g. EPON's MPCP)
};
std::string_view to_string(MacControlError e) noexcept;

// `frame` from the destination MAC on, without FCS (padding to 60 bytes allowed, not required).
Expected<MacControlFrame, MacControlError> parse_mac_control(std::span<const uint8_t> frame) noexcept;

// How long `quanta` pause times last on a link of `rate_mbps`: quanta * 512 bit times, in ns
// (rounded up, so a pause is never shorter than asked). 0 for a rate of 0.
constexpr uint64_t pause_quanta_ns(uint32_t quanta, uint64_t rate_mbps) noexcept {
    if (rate_mbps == 0) return 0;
    const uint64_t bits = uint64_t{quanta} * 512;
    return (bits * 1000 + rate_mbps - 1) / rate_mbps;
}

}  // namespace rnic::wire
