// The IBTA 1.5 opcodes Linux rxe sends since 6.2: FLUSH (0x1C: BTH, FETH, RETH, no payload) and
// ATOMIC WRITE (0x1D: BTH, RETH, 8 bytes). Frames are laid out here byte by byte, independently
// of the builder, then parsed (ICRC checked) and rebuilt byte for byte.
#include <catch2/catch.hpp>

#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/icrc.hpp"
#include "rnic/wire/inet_checksum.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::wire;

namespace {

// Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2) + UDP 4791 + `transport` (BTH onwards, without the
// ICRC), then the ICRC, least-significant byte first.
std::vector<uint8_t> ipv4_frame(const std::vector<uint8_t>& transport) {
    std::vector<uint8_t> f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00};
    const size_t ip_len = 20 + 8 + transport.size() + 4;
    const std::vector<uint8_t> ip = {0x45, 0x00, uint8_t(ip_len >> 8), uint8_t(ip_len), 0x12, 0x34, 0x40, 0x00,
                                     0x40, 0x11, 0,    0,    10,         0,              0,    1,    10,   0,
                                     0,    2};
    f.insert(f.end(), ip.begin(), ip.end());
    const uint16_t ck = ipv4_header_checksum(f.data() + 14, 20);
    f[14 + 10] = uint8_t(ck >> 8);
    f[14 + 11] = uint8_t(ck);
    const size_t udp_len = 8 + transport.size() + 4;
    const std::vector<uint8_t> udp = {0xC0, 0x00, 0x12, 0xB7, uint8_t(udp_len >> 8), uint8_t(udp_len), 0, 0};
    f.insert(f.end(), udp.begin(), udp.end());
    f.insert(f.end(), transport.begin(), transport.end());
    const uint32_t icrc = compute_icrc(f.data() + 14, 20, f.size() - 14);
    for (int i = 0; i < 4; ++i) f.push_back(uint8_t(icrc >> (8 * i)));
    return f;
}

void check_rebuilds(const std::vector<uint8_t>& frame, const RoceFrame& p) {
    FrameSpec s = spec_from_frame(p);
    s.payload = p.payload;
    std::vector<uint8_t> out(frame.size());
    auto n = build_frame(s, out);
    REQUIRE(n.has_value());
    REQUIRE(*n == frame.size());
    CHECK(out == frame);
}

}  // namespace

TEST_CASE("IBTA 1.5 opcodes: table entries", "[opcode][ibta15]") {
    const OpcodeInfo& fl = opcode_info(op::kRcFlush);
    CHECK(fl.name == "RC_FLUSH");
    CHECK(fl.kind == OpKind::Flush);
    CHECK(fl.has(kExtFeth));
    CHECK(fl.has(kExtReth));
    CHECK_FALSE(fl.has_payload);
    CHECK(fl.header_length == Bth::kSize + Feth::kSize + Reth::kSize);
    CHECK(fl.is_request());
    const OpcodeInfo& aw = opcode_info(op::kRcAtomicWrite);
    CHECK(aw.name == "RC_ATOMIC_WRITE");
    CHECK(aw.kind == OpKind::AtomicWrite);
    CHECK(aw.has(kExtReth));
    CHECK(aw.has_payload);
    CHECK(aw.header_length == Bth::kSize + Reth::kSize);
    CHECK(aw.is_request());
    // UC has neither (IBTA 1.5: RC only).
    CHECK_FALSE(opcode_info(0x3C).valid());
    CHECK_FALSE(opcode_info(0x3D).valid());
}

TEST_CASE("IBTA 1.5 opcodes: a hand-laid ATOMIC WRITE parses, ICRC checked, and rebuilds", "[parser][ibta15]") {
    const std::vector<uint8_t> t = {
        0x1D, 0x00, 0xFF, 0xFF,                          // BTH: opcode, SE/M/pad/tver, P_Key
        0x00, 0x00, 0x00, 0x12,                          // dest QP 0x12
        0x80, 0x00, 0x03, 0xE8,                          // AckReq, PSN 1000
        0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x56, 0x78,  // RETH VA
        0x00, 0x00, 0x05, 0x01,                          // R_Key
        0x00, 0x00, 0x00, 0x08,                          // DMA length 8
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // the 8 bytes
    };
    const auto frame = ipv4_frame(t);
    auto p = parse_frame(frame);
    if (!p) FAIL(parse_errc_name(p.error().code));
    CHECK(p->bth.opcode == op::kRcAtomicWrite);
    CHECK(p->bth.ack_req);
    CHECK(p->bth.psn == 1000);
    REQUIRE(p->ext.reth);
    CHECK(p->ext.reth->va == 0x00007F0012345678ull);
    CHECK(p->ext.reth->rkey == 0x501);
    CHECK(p->ext.reth->dma_length == 8);
    CHECK_FALSE(p->ext.feth);
    REQUIRE(p->payload.size() == 8);
    CHECK(p->payload[0] == 0x11);
    CHECK(p->payload[7] == 0x88);
    check_rebuilds(frame, *p);

    auto bad = frame;
    bad[bad.size() - 1] ^= 1;  // the ICRC is checked
    CHECK_FALSE(parse_frame(bad).has_value());
}

TEST_CASE("IBTA 1.5 opcodes: a hand-laid FLUSH parses, ICRC checked, and rebuilds", "[parser][ibta15]") {
    const std::vector<uint8_t> t = {
        0x1C, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x03, 0xE9,  // BTH, PSN 1001
        0x00, 0x00, 0x00, 0x11,                                                  // FETH: level 1, type 1
        0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x50, 0x00,                          // RETH VA
        0x00, 0x00, 0x05, 0x01, 0x00, 0x00, 0x10, 0x00,                          // R_Key, length 4096
    };
    const auto frame = ipv4_frame(t);
    auto p = parse_frame(frame);
    if (!p) FAIL(parse_errc_name(p.error().code));
    CHECK(p->bth.opcode == op::kRcFlush);
    REQUIRE(p->ext.feth);
    CHECK(p->ext.feth->placement == Feth::kPlacementGlobal);
    CHECK(p->ext.feth->selectivity == Feth::kSelectRegion);
    CHECK(p->ext.feth->reserved == 0);
    REQUIRE(p->ext.reth);
    CHECK(p->ext.reth->va == 0x00007F0012345000ull);
    CHECK(p->ext.reth->rkey == 0x501);
    CHECK(p->ext.reth->dma_length == 4096);
    CHECK(p->payload.empty());
    check_rebuilds(frame, *p);

    // FETH field placement: placement type in bits 3-0, selectivity in bits 5-4.
    uint8_t b[4];
    Feth{Feth::kPlacementPersistent, Feth::kSelectRange, 0}.write(b);
    CHECK((b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0x02));
    Feth{Feth::kPlacementGlobal | Feth::kPlacementPersistent, Feth::kSelectRegion, 0}.write(b);
    CHECK(b[3] == 0x13);
}

TEST_CASE("IBTA 1.5 opcodes: the builder insists on each opcode's header set", "[builder][ibta15]") {
    FrameSpec s;
    s.src_gid = Gid::from_ipv4(0x0A000001);
    s.dst_gid = Gid::from_ipv4(0x0A000002);
    s.bth.opcode = op::kRcFlush;
    s.ext.reth = Reth{0x1000, 1, 8};
    CHECK(frame_size(s).error() == BuildErrc::HeaderMissing);  // no FETH
    s.ext.feth = Feth{1, 0, 0};
    CHECK(frame_size(s).has_value());
    const uint8_t payload[8] = {};
    s.payload = payload;
    CHECK(frame_size(s).error() == BuildErrc::PayloadNotAllowed);
    s.bth.opcode = op::kRcAtomicWrite;
    CHECK(frame_size(s).error() == BuildErrc::UnexpectedHeader);  // FETH on ATOMIC WRITE
    s.ext.feth.reset();
    CHECK(frame_size(s).has_value());
}
