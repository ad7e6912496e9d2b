// MADs nobody should send: wrong lengths, classes, versions, methods and attributes, unknown or
// guessed communication ids, every message in every state, random bytes. Never a crash, never a
// state change for a connection the MAD does not belong to, every one counted.
#include <random>

#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;

namespace {

rnic::cm::MadRoute from_a() {
    rnic::cm::MadRoute r;
    r.local_gid = gid("10.0.0.2");
    r.remote_gid = gid("10.0.0.1");
    return r;
}

}  // namespace

TEST_CASE("malformed MADs are counted and dropped", "[cm]") {
    Link link;
    auto& svc = *link.b.svc;
    const auto route = from_a();
    std::vector<uint8_t> mad(256, 0);
    mad[0] = 1;
    mad[1] = 0x07;
    mad[2] = 2;
    mad[3] = 0x03;
    svc.receive(route, std::span<const uint8_t>(mad).first(100), link.now);  // short
    std::vector<uint8_t> long_mad(300, 0);
    svc.receive(route, long_mad, link.now);  // long
    mad[0] = 2;
    svc.receive(route, mad, link.now);  // base version
    mad[0] = 1;
    mad[2] = 1;
    svc.receive(route, mad, link.now);  // class version
    mad[2] = 2;
    mad[16] = 0x00;
    mad[17] = 0x33;
    svc.receive(route, mad, link.now);  // attribute
    mad[17] = 0x19;
    svc.receive(route, mad, link.now);  // LAP: not on RoCE
    mad[3] = 0x05;
    svc.receive(route, mad, link.now);  // Trap
    CHECK(svc.counters().bad_mads == 7);
    CHECK(svc.counters().mads_received == 7);
    link.pump();
    CHECK(link.log.empty());
}

TEST_CASE("ClassPortInfo is answered, other Gets and Sets get 'unsupported'", "[cm]") {
    Link link;
    auto& svc = *link.b.svc;
    rnic::wire::Mad get;
    get.header.mgmt_class = 0x07;
    get.header.class_version = 2;
    get.header.method = rnic::wire::MadMethod::Get;
    get.header.attribute_id = 0x0001;
    get.header.transaction_id = 0xABCDEF;
    svc.receive(from_a(), get.bytes(), link.now);
    get.header.method = rnic::wire::MadMethod::Set;
    svc.receive(from_a(), get.bytes(), link.now);
    get.header.method = rnic::wire::MadMethod::Get;
    get.header.mgmt_class = 0x03;  // SA: no agent here
    svc.receive(from_a(), get.bytes(), link.now);
    link.pump();
    REQUIRE(link.log.size() == 3);
    const auto& cpi = link.log[0].mad.mad;
    CHECK(cpi.header.method == rnic::wire::MadMethod::GetResp);
    CHECK(cpi.header.status == 0);
    CHECK(cpi.header.transaction_id == 0xABCDEF);
    const auto info = rnic::wire::ClassPortInfo::read(cpi.data.data());
    CHECK(info.base_version == 1);
    CHECK(info.class_version == 2);
    CHECK(info.resp_time_value == 20);
    CHECK(link.log[1].mad.mad.header.status == 0x000C);
    CHECK(link.log[2].mad.mad.header.status == 0x000C);
    CHECK(link.log[0].mad.route.remote_gid == gid("10.0.0.1"));
    CHECK(svc.counters().class_port_info_answered == 1);
    CHECK(svc.counters().unsupported_answered == 2);
}

TEST_CASE("every message with unknown or guessed ids, and in states that do not expect it", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    auto& svc = *link.b.svc;
    const auto before = svc.counters();
    const auto route = from_a();
    // The server id's real communication ids, as an attacker might guess them.
    const auto rep = std::get<rnic::wire::CmRep>(*link.sent('B', CmAttr::Rep)[0].msg());
    const uint32_t ours = rep.local_comm_id, theirs = rep.remote_comm_id;
    std::vector<rnic::wire::CmMessage> msgs;
    for (uint32_t local : {0u, 1u, theirs})
        for (uint32_t remote : {0u, 7u, ours}) {
            rnic::wire::CmMra mra;
            mra.local_comm_id = local;
            mra.remote_comm_id = remote;
            msgs.push_back(mra);
            mra.message_mraed = rnic::wire::CmMsgResponse::Rep;
            msgs.push_back(mra);
            rnic::wire::CmRep r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            msgs.push_back(r);
            rnic::wire::CmRtu rtu;
            rtu.local_comm_id = local;
            rtu.remote_comm_id = remote;
            msgs.push_back(rtu);
            rnic::wire::CmDrep drep;
            drep.local_comm_id = local;
            drep.remote_comm_id = remote;
            msgs.push_back(drep);
            rnic::wire::CmSidrRep srep;
            srep.request_id = remote;
            msgs.push_back(srep);
            rnic::wire::CmDreq dreq;  // the right ids but the wrong QPN: dropped
            dreq.local_comm_id = local;
            dreq.remote_comm_id = remote;
            dreq.remote_qpn_eecn = 0x999;
            msgs.push_back(dreq);
        }
    const size_t logged = link.log.size();
    for (const auto& m : msgs) svc.receive(route, rnic::wire::encode_cm(m, 5).bytes(), link.now);
    link.pump();
    // Still established: a DISCONNECTED or REJECTED would be on the server's channel.
    server.expect_none();
    abi::CmQueryReply q{};
    REQUIRE(svc.query(server.owner, c.server, q) == 0);
    CHECK(q.state == static_cast<uint8_t>(RdmaState::Connect));
    const auto after = svc.counters();
    CHECK(after.unmatched_mads + after.duplicates - before.unmatched_mads - before.duplicates == msgs.size());
    CHECK(after.mads_received - before.mads_received == msgs.size());
    // The only answers: a DREP for each DREQ of ids that do not exist (8), and the RTU a REP with
    // the connection's own ids draws, as a duplicate REP does.
    size_t dreps = 0, rtus = 0;
    for (size_t i = logged; i < link.log.size(); ++i) {
        REQUIRE(link.log[i].from == 'B');
        dreps += link.log[i].attr() == static_cast<uint16_t>(CmAttr::Drep);
        rtus += link.log[i].attr() == static_cast<uint16_t>(CmAttr::Rtu);
    }
    CHECK(dreps == 8);
    CHECK(rtus == 1);
    CHECK(dreps + rtus == link.log.size() - logged);
    // A REJ naming our ids ends the connection, as it would on Linux: only the peer's CM may.
    rnic::wire::CmRej rej;
    rej.local_comm_id = theirs;
    rej.remote_comm_id = ours;
    rej.message_rejected = rnic::wire::CmMsgResponse::Other;
    svc.receive(route, rnic::wire::encode_cm(rej, 5).bytes(), link.now);
    server.expect(EventType::Rejected, 28);
}

TEST_CASE("REQs the CM cannot take: bad rdma_cm header, a GID not ours, a foreign service", "[cm]") {
    Link link;
    App server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    auto& svc = *link.b.svc;
    rnic::wire::CmReq req;
    req.local_comm_id = 0x10;
    req.local_ca_guid = 0x99;
    req.local_qpn = 5;
    req.service_id = 0x0000000001061C06ull;
    req.primary_path.local_gid = gid("10.0.0.1");
    req.primary_path.remote_gid = gid("10.0.0.2");
    req.private_data[0] = 7;  // rdma_cm header version 7
    svc.receive(from_a(), rnic::wire::encode_cm(req, 1).bytes(), link.now);
    req.private_data.fill(0);
    const auto hdr = rnic::wire::RdmaCmIpHeader::make(gid("10.0.0.1"), gid("10.0.0.2"), 1234);
    hdr.write(req.private_data.data());
    req.local_comm_id = 0x11;
    req.local_qpn = 6;
    req.primary_path.remote_gid = gid("10.0.0.99");
    svc.receive(from_a(), rnic::wire::encode_cm(req, 2).bytes(), link.now);
    req.local_comm_id = 0x12;
    req.local_qpn = 7;
    req.primary_path.remote_gid = gid("10.0.0.2");
    req.service_id = 0x1234;  // not an rdma_cm service
    svc.receive(from_a(), rnic::wire::encode_cm(req, 3).bytes(), link.now);
    link.pump();
    server.expect_none();
    REQUIRE(link.log.size() == 3);
    const auto r0 = std::get<rnic::wire::CmRej>(*link.log[0].msg());
    const auto r1 = std::get<rnic::wire::CmRej>(*link.log[1].msg());
    const auto r2 = std::get<rnic::wire::CmRej>(*link.log[2].msg());
    CHECK(r0.reason == rnic::wire::CmRejReason::ConsumerDefined);
    CHECK(r1.reason == rnic::wire::CmRejReason::InvalidGid);
    CHECK(r1.ari_length == 16);
    CHECK(r2.reason == rnic::wire::CmRejReason::InvalidServiceId);
    CHECK(svc.id_count() == 1);
}

TEST_CASE("random MADs, and random mutations of real ones, never crash", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    std::mt19937 rng(1234);
    std::vector<std::array<uint8_t, 256>> real;
    for (const Sent& s : link.log) real.push_back(s.mad.mad.bytes());
    for (int i = 0; i < 20000; ++i) {
        std::array<uint8_t, 256> m{};
        if (i % 2) {
            for (auto& b : m) b = static_cast<uint8_t>(rng());
            m[0] = 1;
            m[1] = 7;
            m[2] = 2;
            m[3] = (i % 4) ? 3 : static_cast<uint8_t>(rng());
            m[16] = 0;
            m[17] = static_cast<uint8_t>(0x10 + rng() % 10);
        } else {
            m = real[rng() % real.size()];
            for (int k = 0; k < 3; ++k) m[24 + rng() % 232] = static_cast<uint8_t>(rng());
        }
        link.b.svc->receive(from_a(), m, link.now);
        link.a.svc->receive(from_a(), m, link.now);
        if (i % 100 == 0) link.run_for(50);
        // Applications answer what they get, as they would.
        while (auto ev = server.event())
            if (ev->event == static_cast<uint32_t>(EventType::ConnectRequest))
                server.svc().reject(server.owner, ev->id, 0, {}, link.now);
        while (client.event()) {
        }
    }
    link.run_for(300'000);
    CHECK(link.a.svc->counters().mads_received > 20000);
    (void)c;
}
