#include "rnic/wire/mac_control.hpp"

#include <algorithm>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {

std::string_view to_string(MacControlError e) noexcept {
    switch (e) {
        case MacControlError::NotMacControl: return "not a MAC control frame";
        case MacControlError::Truncated: return "truncated";
        case MacControlError::UnsupportedOpcode: return "unsupported opcode";
    }
    return "?";
}

Expected<MacControlFrame, MacControlError> parse_mac_control(std::span<const uint8_t> frame) noexcept {
    constexpr size_t kOpcodeAt = EthernetHeader::kSize;  // right after the EtherType
    if (frame.size() < kOpcodeAt) return Unexpected{MacControlError::Truncated};
    if (load_be16(frame.data() + 12) != kEtherTypeMacControl) return Unexpected{MacControlError::NotMacControl};
    if (frame.size() < kOpcodeAt + 2) return Unexpected{MacControlError::Truncated};
    MacControlFrame f;
    std::copy_n(frame.begin(), 6, f.destination.begin());
    const uint8_t* p = frame.data() + kOpcodeAt;
    const uint16_t opcode = load_be16(p);
    if (opcode == kMacControlPause) {
        if (frame.size() < kOpcodeAt + 4) return Unexpected{MacControlError::Truncated};
        f.class_enable = 0xff;
        f.quanta.fill(load_be16(p + 2));
        return f;
    }
    if (opcode == kMacControlPfc) {
        if (frame.size() < kOpcodeAt + 4 + 2 * kPriorities) return Unexpected{MacControlError::Truncated};
        f.pfc = true;
        f.class_enable = p[3];  // the vector's low byte; 802.1Qbb reserves the high one
        for (size_t i = 0; i < kPriorities; ++i) f.quanta[i] = load_be16(p + 4 + 2 * i);
        return f;
    }
    return Unexpected{MacControlError::UnsupportedOpcode};
}

}  // namespace rnic::wire
