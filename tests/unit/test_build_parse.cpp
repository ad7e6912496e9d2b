#include <catch2/catch.hpp>

#include <vector>

#include "rnic/wire/aeth.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/parser.hpp"
#include "sample_frames.hpp"

using namespace rnic::wire;

namespace {

template <class T>
void check_same(const std::optional<T>& a, const std::optional<T>& b) {
    REQUIRE(a.has_value() == b.has_value());
}

FrameSpec minimal_spec(uint8_t opcode) {
    FrameSpec s;
    s.src_gid = Gid::from_ipv4(0x0A000001);
    s.dst_gid = Gid::from_ipv4(0x0A000002);
    s.bth.opcode = opcode;
    return s;
}

}  // namespace

TEST_CASE("every sample frame builds and parses back to the same fields", "[builder][parser]") {
    const auto samples = rnic::tools::make_sample_frames();
    const auto frames = rnic::tools::build_sample_frames();
    REQUIRE(samples.size() == frames.size());
    for (size_t i = 0; i < samples.size(); ++i) {
        const FrameSpec& s = samples[i].spec;
        INFO("sample " << i << " " << opcode_info(s.bth.opcode).name);
        auto p = parse_frame(frames[i]);
        if (!p) FAIL(parse_errc_name(p.error().code));
        CHECK(p->eth.dst == s.dst_mac);
        CHECK(p->eth.src == s.src_mac);
        CHECK(p->eth.vlan_tci == s.vlan_tci);
        CHECK(p->src_gid == s.src_gid);
        CHECK(p->dst_gid == s.dst_gid);
        CHECK(p->dscp() == s.dscp);
        CHECK(p->ecn() == s.ecn);
        CHECK(p->udp.src_port == s.src_port);
        CHECK(p->udp.dst_port == kRoceV2Port);
        CHECK(p->udp.checksum == 0);
        CHECK(p->bth.opcode == s.bth.opcode);
        CHECK(p->bth.psn == s.bth.psn);
        CHECK(p->bth.dest_qp == s.bth.dest_qp);
        CHECK(p->bth.ack_req == s.bth.ack_req);
        CHECK(p->bth.solicited == s.bth.solicited);
        CHECK(p->bth.becn == s.bth.becn);
        CHECK(p->bth.pad_count == (4 - s.payload.size() % 4) % 4);
        CHECK(std::equal(p->payload.begin(), p->payload.end(), s.payload.begin(), s.payload.end()));
        if (p->ip_version == 4) {
            CHECK(p->ipv4.dont_fragment());
            CHECK(p->ipv4.ttl == 64);
            CHECK(p->ipv4.id == s.ip_id);
        } else {
            CHECK(p->ipv6.flow_label == s.flow_label);
            CHECK(p->ipv6.hop_limit == 64);
        }
        const ExtHeaders& a = p->ext;
        const ExtHeaders& b = s.ext;
        check_same(a.deth, b.deth);
        check_same(a.reth, b.reth);
        check_same(a.atomic_eth, b.atomic_eth);
        check_same(a.aeth, b.aeth);
        check_same(a.atomic_ack_eth, b.atomic_ack_eth);
        check_same(a.immdt, b.immdt);
        check_same(a.ieth, b.ieth);
        if (b.deth) { CHECK(a.deth->qkey == b.deth->qkey); CHECK(a.deth->src_qp == b.deth->src_qp); }
        if (b.reth) { CHECK(a.reth->va == b.reth->va); CHECK(a.reth->rkey == b.reth->rkey); CHECK(a.reth->dma_length == b.reth->dma_length); }
        if (b.atomic_eth) {
            CHECK(a.atomic_eth->va == b.atomic_eth->va);
            CHECK(a.atomic_eth->rkey == b.atomic_eth->rkey);
            CHECK(a.atomic_eth->swap_add == b.atomic_eth->swap_add);
            CHECK(a.atomic_eth->compare == b.atomic_eth->compare);
        }
        if (b.aeth) { CHECK(a.aeth->syndrome == b.aeth->syndrome); CHECK(a.aeth->msn == b.aeth->msn); }
        if (b.atomic_ack_eth) CHECK(a.atomic_ack_eth->original == b.atomic_ack_eth->original);
        if (b.immdt) CHECK(a.immdt->value == b.immdt->value);
        if (b.ieth) CHECK(a.ieth->rkey == b.ieth->rkey);

        // And the rebuilt frame is the same bytes.
        std::vector<uint8_t> again(frames[i].size());
        auto n = build_frame(spec_from_frame(*p), again);
        REQUIRE(n);
        CHECK(again == frames[i]);
    }
}

TEST_CASE("builder: short frames are padded to the Ethernet minimum, with zeros", "[builder]") {
    FrameSpec s = minimal_spec(op::kRcAcknowledge);
    s.ext.aeth = Aeth{AethSyndrome::ack().encode(), 1};
    auto size = frame_size(s);
    REQUIRE(size);
    CHECK(*size == 14 + 20 + 8 + 12 + 4 + 4);  // 62: already above 60
    FrameSpec cnp = minimal_spec(op::kCnp);
    cnp.bth.becn = true;
    REQUIRE(*frame_size(cnp) == 14 + 20 + 8 + 12 + 16 + 4);
    FrameSpec send = minimal_spec(op::kRcSendOnly);
    const uint8_t one = 0x5A;
    send.payload = {&one, 1};
    std::vector<uint8_t> buf(128, 0xEE);
    auto n = build_frame(send, buf);
    REQUIRE(n);
    CHECK(*n == 14 + 20 + 8 + 12 + 1 + 3 + 4);
    auto p = parse_frame({buf.data(), *n});
    REQUIRE(p);
    CHECK(p->bth.pad_count == 3);
    CHECK(p->pad.size() == 3);
    for (uint8_t b : p->pad) CHECK(b == 0);
}

TEST_CASE("builder: rejects specs the opcode table forbids", "[builder]") {
    std::vector<uint8_t> buf(9000);
    FrameSpec s = minimal_spec(0x15);
    CHECK(build_frame(s, buf).error() == BuildErrc::IllegalOpcode);

    s = minimal_spec(op::kRcWriteFirst);  // needs a RETH
    CHECK(build_frame(s, buf).error() == BuildErrc::HeaderMissing);

    s = minimal_spec(op::kRcSendOnly);
    s.ext.reth = Reth{};
    CHECK(build_frame(s, buf).error() == BuildErrc::UnexpectedHeader);

    s = minimal_spec(op::kRcAcknowledge);
    s.ext.aeth = Aeth{};
    const uint8_t data[4] = {};
    s.payload = data;
    CHECK(build_frame(s, buf).error() == BuildErrc::PayloadNotAllowed);

    s = minimal_spec(op::kRcSendOnly);
    s.dst_gid = *Gid::parse("fd00::2");
    CHECK(build_frame(s, buf).error() == BuildErrc::AddressFamilyMismatch);

    s = minimal_spec(op::kRcSendOnly);
    std::vector<uint8_t> big(70000);
    s.payload = big;
    CHECK(frame_size(s).error() == BuildErrc::TooLong);

    s = minimal_spec(op::kRcSendOnly);
    std::vector<uint8_t> tiny(10);
    CHECK(build_frame(s, tiny).error() == BuildErrc::BufferTooSmall);
    CHECK(build_errc_name(BuildErrc::BufferTooSmall) == "buffer_too_small");
}

TEST_CASE("builder: DSCP, ECN, VLAN and IPv6 fields land where tshark expects", "[builder]") {
    FrameSpec s = minimal_spec(op::kRcSendOnly);
    s.dscp = 46;
    s.ecn = 2;
    s.vlan_tci = 0x6064;
    std::vector<uint8_t> buf(256);
    auto n = build_frame(s, buf);
    REQUIRE(n);
    CHECK(load_be16(buf.data() + 12) == kEtherTypeVlan);
    CHECK(load_be16(buf.data() + 14) == 0x6064);
    CHECK(load_be16(buf.data() + 16) == kEtherTypeIpv4);
    CHECK(buf[19] == ((46 << 2) | 2));
    CHECK((buf[18 + 6] & 0x40) != 0);  // DF

    s = minimal_spec(op::kRcSendOnly);
    s.src_gid = *Gid::parse("fd00::1");
    s.dst_gid = *Gid::parse("fd00::2");
    s.dscp = 26;
    s.ecn = 1;
    s.flow_label = 0xABCDE;
    n = build_frame(s, buf);
    REQUIRE(n);
    CHECK(load_be16(buf.data() + 12) == kEtherTypeIpv6);
    CHECK(load_be32(buf.data() + 14) == ((6u << 28) | (((26u << 2) | 1u) << 20) | 0xABCDEu));
    auto p = parse_frame({buf.data(), *n});
    REQUIRE(p);
    CHECK(p->dscp() == 26);
    CHECK(p->ecn() == 1);
}
