// Ethernet frame bytes -> RoceFrame, or the first rule the frame breaks. Reads only inside the
// given span, whatever the bytes say.
#pragma once

#include <cstdint>
#include <span>

#include "rnic/wire/expected.hpp"
#include "rnic/wire/packet.hpp"
#include "rnic/wire/parse_error.hpp"

namespace rnic::wire {

struct ParseOptions {
    bool verify_icrc = true;
    bool verify_ip_checksum = true;
    bool verify_udp_checksum = true;  // only when the sender filled it (non-zero)
    uint16_t udp_port = kRoceV2Port;
};

Expected<RoceFrame, ParseError> parse_frame(std::span<const uint8_t> frame,
                                            const ParseOptions& options = {});

}  // namespace rnic::wire
