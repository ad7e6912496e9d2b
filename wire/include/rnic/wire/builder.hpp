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
    HeaderMissing,     // the opcode needs an extension header the spec lacks
    UnexpectedHeader,  // the spec carries a header the opcode does not have
    PayloadNotAllowed,
    AddressFamilyMismatch,  // one GID IPv4-mapped, the other not
    TooLong,                // exceeds the IP length fields
    BufferTooSmall,
};

std::string_view build_errc_name(BuildErrc code) noexcept;

// Bytes the frame will occupy, or an error; does not touch any buffer.
Expected<size_t, BuildErrc> frame_size(const FrameSpec& spec);

// Writes the frame at the start of `out`; returns its length.
Expected<size_t, BuildErrc> build_frame(const FrameSpec& spec, std::span<uint8_t> out);

// Building in two steps, for a payload written straight into the frame (gathered from
// registered memory, so it is copied once, as eRPC fills a header template in place):
// plan_frame sizes the frame for `payload_length` bytes of payload (`spec.payload` must be
// empty); begin_frame writes every header into a buffer of at least `total` bytes and says where
// the payload goes; the caller writes it; finish_frame adds the pad, the ICRC and the Ethernet
// padding and returns the frame's length.
struct FrameInProgress {
    size_t total = 0;  // bytes of the finished frame, Ethernet padding included
    size_t payload_offset = 0;
    size_t payload_length = 0;
    size_t ip_offset = 0;
    size_t ip_header = 0;
    size_t transport = 0;  // BTH .. ICRC
    size_t ip_end = 0;
    uint8_t pad = 0;
};
Expected<FrameInProgress, BuildErrc> plan_frame(const FrameSpec& spec, size_t payload_length);
void begin_frame(const FrameSpec& spec, FrameInProgress& frame, std::span<uint8_t> out);
size_t finish_frame(const FrameInProgress& frame, std::span<uint8_t> out);

}  // namespace rnic::wire
