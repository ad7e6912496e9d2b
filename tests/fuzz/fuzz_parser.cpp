// libFuzzer target: any bytes into the parser, with and without ICRC checking (without it the
// fuzzer gets past the CRC into the transport headers). Whatever parses must rebuild into a
// frame that parses again with the same transport fields.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::wire;

namespace {

void check_rebuild(const RoceFrame& p) {
    const FrameSpec spec = spec_from_frame(p);
    auto size = frame_size(spec);
    if (!size) std::abort();  // a parsed frame is always buildable
    std::vector<uint8_t> out(*size);
    auto n = build_frame(spec, out);
    if (!n || *n != *size) std::abort();
    auto again = parse_frame(out);
    if (!again) std::abort();
    if (again->bth.opcode != p.bth.opcode || again->bth.psn != p.bth.psn || again->bth.dest_qp != p.bth.dest_qp ||
        again->payload.size() != p.payload.size() || again->src_gid != p.src_gid || again->dst_gid != p.dst_gid)
        std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> frame(data, size);
    if (auto p = parse_frame(frame)) check_rebuild(*p);
    if (auto p = parse_frame(
            frame, ParseOptions{.verify_icrc = false, .verify_ip_checksum = false, .verify_udp_checksum = false}))
        check_rebuild(*p);
    return 0;
}
