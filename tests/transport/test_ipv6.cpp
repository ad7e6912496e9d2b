// RoCEv2 over IPv6 between two engines: the source GID's IP version decides the framing (IPv6
// header with the flow label and hop limit, UDP 4791, ICRC with the IPv6 variant fields masked),
// data arrives intact, the source-address check works on IPv6 GIDs, and address vectors that mix
// IP versions are refused.
#include <catch2/catch.hpp>
#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::test;
namespace wire = rnic::wire;

namespace {

constexpr size_t kBuf = 256 * 1024;

// Every frame put on the link, parsed (the parser verifies the ICRC).
struct WireLog {
    std::vector<rnic::wire::RoceFrame> frames;
    std::vector<std::vector<uint8_t>> bytes;
    size_t failures = 0;
    void watch(rnic::sim::Simulator& sim) {
        sim.set_trace([this](const rnic::sim::TraceEvent& e) {
            if (e.kind != rnic::sim::TraceKind::kSent) return;
            bytes.emplace_back(e.frame.begin(), e.frame.end());
            if (!rnic::wire::parse_frame(bytes.back())) ++failures;
        });
    }
};

}  // namespace

TEST_CASE("RC SEND, WRITE and READ over IPv6 GIDs, link-local and global", "[engine][ipv6]") {
    const uint8_t sgid = GENERATE(uint8_t{1}, uint8_t{2});
    INFO("sgid_index " << int{sgid});
    TwoNodes t(11);
    WireLog log;
    log.watch(t.sim);
    t.setup(kBuf);
    QpOptions o;
    o.mtu = Mtu::Mtu1024;
    o.sgid_index = sgid;
    t.connect(o);

    const uint32_t size = 10000;  // several packets per message
    fill_pattern(t.a.buf, 1, 0, size);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{7, {{t.b.addr(), size, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), size, t.a.mr.lkey}})) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
    CHECK(rc[0].byte_len == size);
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data(), size) == 0);

    fill_pattern(t.a.buf, 2, 0, size);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 2, {{t.a.addr(), size, t.a.mr.lkey}});
    w.remote_addr = t.b.addr(65536);
    w.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    SendWr r = make_wr(WrOpcode::RdmaRead, 3, {{t.a.addr(131072), size, t.a.mr.lkey}});
    r.remote_addr = t.b.addr(65536);
    r.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 3);
    REQUIRE(sc.size() == 3);
    for (const auto& wc : sc) CHECK(wc.status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data() + 65536, size) == 0);
    CHECK(std::memcmp(t.a.buf.data(), t.a.buf.data() + 131072, size) == 0);

    // Every frame both ways was IPv6 between the chosen GIDs and carried a valid ICRC.
    REQUIRE(log.bytes.size() > 20);
    CHECK(log.failures == 0);
    const auto& ga = t.a.e().gids()[sgid];
    const auto& gb = t.b.e().gids()[sgid];
    for (const auto& b : log.bytes) {
        const auto f = rnic::wire::parse_frame(b);
        REQUIRE(f);
        CHECK(f->ip_version == 6);
        CHECK(f->ipv6.hop_limit == 64);
        CHECK(f->udp.dst_port == 4791);
        const bool from_a = f->src_gid == ga;
        CHECK(f->dst_gid == (from_a ? gb : ga));
    }
    CHECK(t.a.e().device_counters().rx_bad_source == 0);
    CHECK(t.b.e().device_counters().rx_icrc_errors == 0);
}

TEST_CASE("the flow label and traffic class of an IPv6 path are on the wire, outside the ICRC", "[engine][ipv6]") {
    TwoNodes t(12);
    WireLog log;
    log.watch(t.sim);
    t.setup(kBuf);
    QpOptions o;
    o.type = QpType::Ud;
    o.sgid_index = 2;
    t.connect(o);
    AddressVector av;
    av.dgid = t.b.e().gids()[2];
    av.sgid_index = 2;
    av.dmac = t.b.e().config().mac;
    av.flow_label = 0xABCDE;
    av.traffic_class = (26 << 2) | 2;  // AF31, ECT(0)
    av.hop_limit = 17;
    const auto ah = t.a.e().create_ah(t.a.pd, av);
    REQUIRE(ah);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{7, {{t.b.addr(), 128, t.b.mr.lkey}}}) == 0);
    SendWr w = make_wr(WrOpcode::Send, 1, {{t.a.addr(), 64, t.a.mr.lkey}});
    w.ah = *ah;
    w.remote_qpn = t.b.qpn;
    w.remote_qkey = o.qkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    REQUIRE(t.wait_cq(t.b, t.b.recv_cq, 1).size() == 1);
    const auto f = wire::parse_frame(log.bytes.at(0));
    REQUIRE(f);
    CHECK(f->ip_version == 6);
    CHECK(f->ipv6.flow_label == 0xABCDE);
    CHECK(f->ipv6.traffic_class == ((26 << 2) | 2));
    CHECK(f->ipv6.hop_limit == 17);
    CHECK(f->udp.src_port == wire::rocev2_source_port(t.a.qpn, t.b.qpn, 0xABCDE));
    // The variant fields are masked out of the ICRC: a router rewriting them keeps it valid,
    // while any other header bit breaks it.
    auto routed = log.bytes.at(0);
    routed[14] ^= 0x0F;      // traffic class, high nibble
    routed[14 + 3] ^= 0xFF;  // flow label, low byte
    routed[14 + 7] = 3;      // hop limit
    CHECK(wire::parse_frame(routed));
    auto forged = log.bytes.at(0);
    forged[14 + 8 + 15] ^= 1;  // source address
    CHECK(wire::parse_frame(forged).error().code == wire::ParseErrc::BadIcrc);
}

TEST_CASE("connected QPs accept IPv6 frames only from their peer's GID", "[engine][ipv6]") {
    TwoNodes t(13);
    t.setup(kBuf);
    QpOptions o;
    o.sgid_index = 2;
    t.connect(o);
    // B's QP expects A's fd77::1; the same frame from A's link-local address is someone else.
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{7, {{t.b.addr(), 64, t.b.mr.lkey}}}) == 0);
    wire::FrameSpec spec;
    spec.src_mac = t.a.e().config().mac;
    spec.dst_mac = t.b.e().config().mac;
    spec.src_gid = t.a.e().gids()[1];
    spec.dst_gid = t.b.e().gids()[2];
    spec.bth.opcode = 0x04;  // RC SEND only
    spec.bth.dest_qp = t.b.qpn;
    spec.bth.psn = o.sq_psn;  // B's expected PSN (A sends from sq_psn)
    spec.bth.ack_req = true;
    std::vector<uint8_t> frame(256);
    frame.resize(*wire::build_frame(spec, frame));
    t.b.e().receive(frame, t.sim.now());
    CHECK(t.b.e().device_counters().rx_bad_source == 1);
    // From the right address it is taken.
    spec.src_gid = t.a.e().gids()[2];
    frame.assign(256, 0);
    frame.resize(*wire::build_frame(spec, frame));
    t.b.e().receive(frame, t.sim.now());
    WorkCompletion wc[2];
    CHECK(t.b.e().poll_cq(t.b.recv_cq, wc) == 1);
    CHECK(wc[0].status == WcStatus::Success);
    // A frame for an IPv6 address that is not in B's GID table is not for B.
    spec.dst_gid = *wire::Gid::parse("fd77::99");
    frame.assign(256, 0);
    frame.resize(*wire::build_frame(spec, frame));
    t.b.e().receive(frame, t.sim.now());
    CHECK(t.b.e().device_counters().rx_not_for_us == 1);
}

TEST_CASE("UD over IPv6: the receive buffer starts with the IPv6 header as GRH", "[engine][ipv6][ud]") {
    TwoNodes t(14);
    t.setup(kBuf);
    QpOptions o;
    o.type = QpType::Ud;
    o.sgid_index = 2;
    t.connect(o);
    fill_pattern(t.a.buf, 5, 0, 100);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{9, {{t.b.addr(), 40 + 100, t.b.mr.lkey}}}) == 0);
    SendWr w = make_wr(WrOpcode::Send, 4, {{t.a.addr(), 100, t.a.mr.lkey}});
    w.ah = t.ah_a_to_b;
    w.remote_qpn = t.b.qpn;
    w.remote_qkey = o.qkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
    CHECK(rc[0].byte_len == 140);
    // The GRH area: the IPv6 version nibble at offset 0, the source address at offset 8.
    CHECK(t.b.buf[0] >> 4 == 6);
    CHECK(std::memcmp(t.b.buf.data() + 8, t.a.e().gids()[2].raw.data(), 16) == 0);
    CHECK(std::memcmp(t.b.buf.data() + 40, t.a.buf.data(), 100) == 0);
}

TEST_CASE("address vectors mixing IPv4 and IPv6 between source and destination are refused", "[engine][ipv6]") {
    TwoNodes t(15);
    t.setup(kBuf);
    Engine& e = t.a.e();
    AddressVector mixed;
    mixed.dgid = t.b.e().gids()[2];  // IPv6 destination...
    mixed.sgid_index = 0;            // ...from the IPv4 GID
    CHECK_FALSE(e.create_ah(t.a.pd, mixed));
    mixed.dgid = t.b.e().gids()[0];
    mixed.sgid_index = 2;
    CHECK_FALSE(e.create_ah(t.a.pd, mixed));
    mixed.sgid_index = 3;  // no such GID
    CHECK_FALSE(e.create_ah(t.a.pd, mixed));
    mixed.sgid_index = 0;
    CHECK(e.create_ah(t.a.pd, mixed));

    QpInitAttr init;
    init.pd = t.a.pd;
    init.send_cq = init.recv_cq = t.a.send_cq;
    init.cap = {4, 4, 1, 1, 0};
    const uint32_t qpn = e.create_qp(init)->qpn;
    QpAttributes attr;
    attr.qp_state = QpState::Init;
    REQUIRE(e.modify_qp(qpn, attr, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) == 0);
    attr.qp_state = QpState::Rtr;
    attr.dest_qp_num = 0x99;
    attr.ah_attr.dgid = t.b.e().gids()[1];
    attr.ah_attr.sgid_index = 0;
    const uint32_t rtr = QpAttr::State | QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn |
                         QpAttr::MaxDestRdAtomic | QpAttr::MinRnrTimer;
    CHECK(e.modify_qp(qpn, attr, rtr) == EINVAL);
    attr.ah_attr.sgid_index = 1;
    CHECK(e.modify_qp(qpn, attr, rtr) == 0);
}
