// The ICRC against a second, independent CRC-32: zlib's crc32 over an explicitly masked copy.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <random>
#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/icrc.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::wire;

namespace {

uint32_t zlib_icrc(std::vector<uint8_t> ip, size_t ip_header, size_t covered) {
    if ((ip[0] >> 4) == 4) {
        ip[1] = ip[8] = ip[10] = ip[11] = 0xFF;
    } else {
        ip[0] |= 0x0F;
        ip[1] = ip[2] = ip[3] = ip[7] = 0xFF;
    }
    ip[ip_header + 6] = ip[ip_header + 7] = 0xFF;
    ip[ip_header + 8 + 4] = 0xFF;
    const uint8_t pseudo_lrh[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    const uLong crc = crc32(0, pseudo_lrh, sizeof pseudo_lrh);
    return static_cast<uint32_t>(crc32(crc, ip.data(), static_cast<uInt>(covered)));
}

}  // namespace

TEST_CASE("ICRC equals zlib crc32 over the masked packet, for any payload and both IP versions", "[icrc]") {
    std::mt19937 rng(4791);
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> payload(rng() % 4097);
        for (auto& b : payload) b = static_cast<uint8_t>(rng());
        FrameSpec s;
        const bool v6 = i % 3 == 0;
        s.src_gid = v6 ? *Gid::parse("fd00::1") : Gid::from_ipv4(rng());
        s.dst_gid = v6 ? *Gid::parse("fd00::2") : Gid::from_ipv4(rng());
        s.dscp = static_cast<uint8_t>(rng() % 64);
        s.ecn = static_cast<uint8_t>(rng() % 4);
        s.flow_label = rng() & 0xFFFFF;
        s.ip_id = static_cast<uint16_t>(rng());
        s.bth.opcode = op::kRcSendOnly;
        s.bth.psn = rng() & 0xFFFFFF;
        s.bth.fecn = rng() % 2;
        s.bth.becn = rng() % 2;
        s.payload = payload;
        std::vector<uint8_t> frame(*frame_size(s));
        REQUIRE(build_frame(s, frame));
        auto p = parse_frame(frame);
        REQUIRE(p);
        const size_t ip_header = p->l4_offset - p->l3_offset;
        const size_t covered = p->frame_length - 4 - p->l3_offset;
        const std::vector<uint8_t> ip(frame.begin() + static_cast<long>(p->l3_offset),
                                      frame.begin() + static_cast<long>(p->frame_length));
        REQUIRE(compute_icrc(ip.data(), ip_header, covered) == zlib_icrc(ip, ip_header, covered));
        REQUIRE(p->icrc == zlib_icrc(ip, ip_header, covered));
    }
}
