// libFuzzer target: any bytes into the parser, with and without ICRC checking (without it the
// fuzzer gets past the CRC into the transport headers). Whatever parses must rebuild into a
// frame that parses again with the same transport fields. Frames to QP 1 go on through the MAD,
// CM and rdma_cm decoders: a decoded CM message must encode back to a MAD that decodes to it.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/parser.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

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

void check_mad(const RoceFrame& p) {
    auto mad = gsi_mad(p);
    if (!mad) return;
    auto cm = decode_cm(*mad);
    if (!cm) return;
    const Mad again = encode_cm(*cm, mad->header.transaction_id, mad->header.attribute_modifier);
    auto back = decode_cm(again);
    if (!back || !(*back == *cm)) std::abort();
    if (const auto* req = std::get_if<CmReq>(&*cm)) (void)parse_rdma_cm_ip_header(req->private_data);
    if (const auto* sreq = std::get_if<CmSidrReq>(&*cm)) (void)parse_rdma_cm_ip_header(sreq->private_data);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> frame(data, size);
    if (auto p = parse_frame(frame)) check_rebuild(*p);
    if (auto p = parse_frame(
            frame, ParseOptions{.verify_icrc = false, .verify_ip_checksum = false, .verify_udp_checksum = false})) {
        check_rebuild(*p);
        check_mad(*p);
    }
    return 0;
}
