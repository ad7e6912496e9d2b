// A deterministic set of frames covering every opcode of the table (IPv4), plus IPv6, 802.1Q,
// DSCP/ECN and every pad count; the source of pcaps/wire_all_opcodes.pcap and of tests.
#pragma once

#include <cstdint>
#include <vector>

#include "rnic/wire/packet.hpp"

namespace rnic::tools {

struct SampleFrame {
    wire::FrameSpec spec;
    std::vector<uint8_t> payload;  // spec.payload points here once finalized
};

// Specs own their payloads; call on a vector that is not resized afterwards.
std::vector<SampleFrame> make_sample_frames();

// Builds each sample into bytes.
std::vector<std::vector<uint8_t>> build_sample_frames();

}  // namespace rnic::tools
