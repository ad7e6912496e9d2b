// FrameSpec -> complete Ethernet frame in a caller buffer: lengths, pad, IPv4 checksum and ICRC
// filled in. The opcode table decides which extension headers are written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "rnic/wire/expected.hpp"
#include "rnic/wire/packet.hpp"

namespace rnic::wire {

enum class BuildErrc : uint8_t {
    IllegalOpcode,
    HeaderMissing,       // the opcode needs an extension header the spec lacks
    UnexpectedHeader,    // the spec carries a header the opcode does not have
    PayloadNotAllowed,
    AddressFamilyMismatch,  // one GID IPv4-mapped, the other not
    TooLong,             // exceeds the IP length fields
    BufferTooSmall,
};

std::string_view build_errc_name(BuildErrc code) noexcept;

// Bytes the frame will occupy, or an error; does not touch any buffer.
Expected<size_t, BuildErrc> frame_size(const FrameSpec& spec);

// Writes the frame at the start of `out`; returns its length.
Expected<size_t, BuildErrc> build_frame(const FrameSpec& spec, std::span<uint8_t> out);

}  // namespace rnic::wire
