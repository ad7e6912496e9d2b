#include <catch2/catch.hpp>
#include <vector>

#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/icrc.hpp"
#include "rnic/wire/inet_checksum.hpp"

using namespace rnic::wire;

namespace {

GsiFrameSpec v4_spec() {
    GsiFrameSpec s;
    s.src_mac = {0x52, 0x54, 0x00, 0xC0, 0xFF, 0x01};
    s.dst_mac = {0x52, 0x54, 0x00, 0xC0, 0xFF, 0x00};
    s.src_gid = *Gid::parse("10.199.0.2");
    s.dst_gid = *Gid::parse("10.199.0.1");
    s.ip_id = 0xDE7C;
    s.psn = 3;
    return s;
}

Mad sample_mad() {
    CmDreq dreq;
    dreq.local_comm_id = 0x326AE686;
    dreq.remote_comm_id = 0x038892CF;
    dreq.remote_qpn_eecn = 0x11;
    return encode_cm(dreq, 0x0000000286E66A32);
}

}  // namespace

TEST_CASE("GSI frame: rxe's defaults", "[gsi]") {
    CHECK(kGsiSourcePort == 55410);            // what every golden rdma_cm capture shows for QP 1
    CHECK(rxe_qp_source_port(0x11) == 57236);  // rxe_ud_pingpong's UD QP 0x11
    CHECK(kGsiFrameSizeIpv4 == 322);
    const GsiFrameSpec s;
    CHECK(s.pkey == 0xFFFF);
    CHECK(s.qkey == 0x80010000);
    CHECK(s.dest_qp == 1);
    CHECK(s.src_qp == 1);
    CHECK(s.ack_req);
}

TEST_CASE("GSI frame: build -> parse gives back spec and MAD, IPv4, IPv6 and VLAN", "[gsi]") {
    GsiFrameSpec v6 = v4_spec();
    v6.src_gid = *Gid::parse("fe80::5054:ff:fec0:ff01");
    v6.dst_gid = *Gid::parse("fe80::5054:ff:fec0:ff00");
    v6.flow_label = 0x60C79;
    v6.ip_id = 0;
    v6.hop_limit = 1;
    v6.dscp = 26;
    GsiFrameSpec tagged = v4_spec();
    tagged.vlan_tci = 0x2005;
    tagged.psn = 0xFFFFFF;
    tagged.ecn = 2;
    GsiFrameSpec redirected = v4_spec();
    redirected.dest_qp = 0x1234;  // a redirected GSI: still a MAD frame, but not one gsi_mad accepts
    for (const auto& [spec, size] : {std::pair{v4_spec(), kGsiFrameSizeIpv4}, std::pair{v6, kGsiFrameSizeIpv6},
                                     std::pair{tagged, kGsiFrameSizeIpv4 + 4}}) {
        INFO(spec.src_gid.to_string() << (spec.vlan_tci ? " vlan" : ""));
        std::vector<uint8_t> buf(400, 0xEE);
        auto n = build_gsi_frame(spec, sample_mad(), buf);
        REQUIRE(n);
        CHECK(*n == size);
        buf.resize(*n);
        auto g = parse_gsi_frame(buf);
        if (!g) FAIL(parse_errc_name(g.error().code));
        CHECK(g->mad == sample_mad());
        CHECK(gsi_spec_from_frame(g->frame) == spec);
        CHECK(g->frame.bth.opcode == 0x64);
        CHECK(g->frame.bth.pad_count == 0);
        CHECK(g->frame.payload.size() == kMadSize);
    }
    std::vector<uint8_t> buf(400);
    auto n = build_gsi_frame(redirected, sample_mad(), buf);
    REQUIRE(n);
    buf.resize(*n);
    CHECK(parse_gsi_frame(buf).error().code == ParseErrc::NotGsiSend);
}

TEST_CASE("GSI frame: build errors", "[gsi]") {
    std::vector<uint8_t> small(kGsiFrameSizeIpv4 - 1);
    auto n = build_gsi_frame(v4_spec(), sample_mad(), small);
    REQUIRE_FALSE(n);
    CHECK(n.error() == BuildErrc::BufferTooSmall);
    GsiFrameSpec mixed = v4_spec();
    mixed.dst_gid = *Gid::parse("2001:db8::1");
    std::vector<uint8_t> buf(400);
    CHECK(build_gsi_frame(mixed, sample_mad(), buf).error() == BuildErrc::AddressFamilyMismatch);
}

TEST_CASE("GSI frame: frames to QP 1 that carry no valid MAD", "[gsi][malformed]") {
    std::vector<uint8_t> good(kGsiFrameSizeIpv4);
    REQUIRE(build_gsi_frame(v4_spec(), sample_mad(), good));
    const size_t bth = 14 + 20 + 8;
    const size_t mad = bth + 12 + 8;
    // Re-seals the ICRC after an edit, so the rule under test is the one that fails.
    auto reseal = [](std::vector<uint8_t>& f) {
        const size_t ip_len = f.size() - 14;
        store_le32(f.data() + f.size() - 4, compute_icrc(f.data() + 14, 20, ip_len - 4));
    };
    auto error_of = [](const std::vector<uint8_t>& f) {
        auto r = parse_gsi_frame(f);
        REQUIRE_FALSE(r);
        return r.error();
    };

    auto f = good;
    f[mad] = 2;  // base version
    reseal(f);
    CHECK(error_of(f).code == ParseErrc::BadMadBaseVersion);
    CHECK(error_of(f).offset == mad);

    f = good;
    store_be32(f.data() + bth + 12, 0x80010001);  // Q_Key
    reseal(f);
    CHECK(error_of(f).code == ParseErrc::BadGsiQkey);
    CHECK(error_of(f).offset == bth + 12);

    f = good;
    f[bth] = 0x65;  // UD SEND ONLY WITH IMMEDIATE: 4 more header bytes, still to QP 1
    reseal(f);
    CHECK(error_of(f).code == ParseErrc::NotGsiSend);

    f = good;
    f[bth] = 0x04;  // RC SEND ONLY to QP 1
    reseal(f);
    CHECK(error_of(f).code == ParseErrc::NotGsiSend);

    // A UD SEND ONLY to QP 1 whose payload is not 256 bytes: 252 (MAD cut short by a word).
    f = good;
    f.erase(f.begin() + static_cast<std::ptrdiff_t>(mad + 252), f.begin() + static_cast<std::ptrdiff_t>(mad + 256));
    store_be16(f.data() + 14 + 2, static_cast<uint16_t>(f.size() - 14));            // IP total length
    store_be16(f.data() + 14 + 20 + 4, static_cast<uint16_t>(f.size() - 14 - 20));  // UDP length
    store_be16(f.data() + 14 + 10, ipv4_header_checksum(f.data() + 14, 20));
    reseal(f);
    CHECK(error_of(f).code == ParseErrc::BadMadLength);
    CHECK(error_of(f).offset == mad + 252);

    // A frame to another QP is not GSI, and a broken frame keeps its frame-level error.
    CHECK(gsi_mad(*parse_frame(good)));
    f = good;
    f[mad + 40] ^= 1;
    CHECK(error_of(f).code == ParseErrc::BadIcrc);
}
