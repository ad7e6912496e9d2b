// The poll loop's part in connection management: RoCEv2 frames to QP 1 go to the CM, not the
// engine; the CM's MADs leave as GSI frames once ARP has the peer's MAC; a CM talking to its own
// addresses loops back without the port; bad GSI frames are counted.
#include <catch2/catch.hpp>
#include <cstring>

#include "datapath.hpp"
#include "frames.hpp"
#include "rnic/cm/cm_service.hpp"
#include "rnic/port/fake_port.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

using namespace rnic;
using namespace rnic::port::test;

namespace {

transport::EngineConfig engine_config() {
    transport::EngineConfig c;
    c.mac = kSelf.mac;
    c.gids = port::gid_table(kSelf);
    return c;
}

cm::CmConfig cm_config() {
    cm::CmConfig c;
    c.node_guid = 0x42;
    for (const wire::Gid& g : port::gid_table(kSelf)) c.addresses.push_back({g, 24});
    c.seed = 3;
    return c;
}

cm::Resolver resolver_of(daemon::Datapath& dp) {
    return [&dp](const wire::Gid& g, uint64_t now, wire::MacAddr& mac) {
        switch (dp.resolve(g, now, mac)) {
            case daemon::Neighbour::Resolved:
                return cm::Resolution::Resolved;
            case daemon::Neighbour::Pending:
                return cm::Resolution::Pending;
            default:
                return cm::Resolution::Unreachable;
        }
    };
}

std::vector<uint8_t> gsi_frame_from_peer(const wire::Mad& mad, uint32_t qkey = wire::kGsiQkey) {
    wire::GsiFrameSpec spec;
    spec.src_mac = kPeerMac;
    spec.dst_mac = kSelf.mac;
    spec.src_gid = wire::Gid::from_ipv4(kPeerIp);
    spec.dst_gid = wire::Gid::from_ipv4(kSelf.ipv4);
    spec.qkey = qkey;
    std::vector<uint8_t> out(wire::kGsiFrameSizeIpv4);
    const auto n = wire::build_gsi_frame(spec, mad, out);
    REQUIRE(n);
    out.resize(*n);
    return out;
}

wire::Mad req_to(uint16_t port) {
    wire::CmReq req;
    req.local_comm_id = 0xAA;
    req.local_ca_guid = 0x77;
    req.local_qpn = 0x33;
    req.service_id = wire::rdma_cm_service_id(wire::RdmaPortSpace::Tcp, port);
    req.primary_path.local_gid = wire::Gid::from_ipv4(kPeerIp);
    req.primary_path.remote_gid = wire::Gid::from_ipv4(kSelf.ipv4);
    wire::RdmaCmIpHeader::make(req.primary_path.local_gid, req.primary_path.remote_gid, 5555)
        .write(req.private_data.data());
    return wire::encode_cm(req, 0x1234);
}

}  // namespace

TEST_CASE("datapath: QP 1 frames reach the CM, and its REJ leaves once ARP answers", "[datapath][cm]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    cm::CmService cm(cm_config(), resolver_of(dp));
    io.inject(gsi_frame_from_peer(req_to(7174)));
    // Without a CM the frame is counted, not given to the engine.
    dp.poll(1000);
    CHECK(dp.counters().gsi_no_cm == 1);
    CHECK(engine.device_counters().list().size() > 0);
    dp.set_cm(&cm);
    io.inject(gsi_frame_from_peer(req_to(7174)));
    dp.poll(2000);
    CHECK(cm.counters().req_received == 1);
    CHECK(cm.counters().rej_sent == 1);
    // The peer's MAC is unknown: an ARP request went out, the REJ waits for it.
    REQUIRE(io.sent().size() == 1);
    CHECK(port::parse_arp(io.sent()[0])->target_ip == kPeerIp);
    CHECK(dp.next_deadline().has_value());
    io.inject(arp_frame(2, kPeerMac, kPeerIp, kSelf.ipv4));
    dp.poll(3000);
    REQUIRE(io.sent().size() == 2);
    const auto g = wire::parse_gsi_frame(io.sent()[1]);
    REQUIRE(g);
    CHECK(g->frame.eth.dst == kPeerMac);
    CHECK(g->frame.dst_gid == wire::Gid::from_ipv4(kPeerIp));
    CHECK(g->frame.bth.dest_qp == 1);
    CHECK(g->frame.ext.deth->src_qp == 1);
    CHECK(g->frame.ext.deth->qkey == wire::kGsiQkey);
    CHECK(g->frame.udp.src_port == wire::kGsiSourcePort);
    CHECK(g->frame.bth.psn == 0);
    const auto rej = std::get<wire::CmRej>(*wire::decode_cm(g->mad));
    CHECK(rej.reason == wire::CmRejReason::InvalidServiceId);
    CHECK(rej.remote_comm_id == 0xAA);
    CHECK(g->mad.header.transaction_id == 0x1234);
    CHECK(dp.counters().gsi_tx == 1);
    CHECK(dp.summary().find("cm_rej_sent=1") != std::string::npos);

    // A frame to QP 1 with the wrong Q_Key is no GSI frame.
    io.inject(gsi_frame_from_peer(req_to(7174), 0x1111));
    dp.poll(4000);
    CHECK(dp.counters().gsi_bad == 1);
    CHECK(cm.counters().req_received == 1);
}

TEST_CASE("datapath: a CM connecting to its own address loops its MADs back", "[datapath][cm]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    cm::CmService cm(cm_config(), resolver_of(dp));
    dp.set_cm(&cm);
    uint32_t ch = 0, listener = 0, client = 0;
    REQUIRE(cm.create_channel(1, ch) == 0);
    host::abi::CmCreateIdRequest cr{ch, 0x0106, 0, 0};
    REQUIRE(cm.create_id(1, cr, listener) == 0);
    REQUIRE(cm.create_id(1, cr, client) == 0);
    host::abi::CmAddress self{};
    self.family = cm::kAfInet;
    self.port = 9999;
    const auto gid = wire::Gid::from_ipv4(kSelf.ipv4);
    std::memcpy(self.addr, gid.raw.data(), 16);
    REQUIRE(cm.bind_addr(1, listener, self) == 0);
    REQUIRE(cm.listen(1, listener, 4) == 0);
    host::abi::CmResolveAddrRequest ra{client, 100, {}, self};
    REQUIRE(cm.resolve_addr(1, ra, 10) == 0);
    host::abi::CmEvent ev{};
    REQUIRE(cm.get_event(1, ch, ev) == 0);
    CHECK(ev.event == static_cast<uint32_t>(cm::EventType::AddrResolved));
    REQUIRE(cm.resolve_route(1, client, 100, 10) == 0);
    REQUIRE(cm.get_event(1, ch, ev) == 0);
    host::abi::CmConnParam p{};
    p.qp_num = 5;
    REQUIRE(cm.connect(1, client, p, 10) == 0);
    for (uint64_t t = 100; t < 1000; t += 100) dp.poll(t);
    REQUIRE(cm.get_event(1, ch, ev) == 0);
    CHECK(ev.event == static_cast<uint32_t>(cm::EventType::ConnectRequest));
    CHECK(io.sent().empty());
    CHECK(dp.counters().loopback_frames == 1);
    CHECK(dp.counters().gsi_rx == 1);
}
