// UD ids: service ID resolution (SIDR_REQ, SIDR_REP) for the remote QPN, Q_Key and address;
// no listener, the consumer's reject, a requester nobody answers, duplicates.
#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;

TEST_CASE("SIDR gives the UD requester the QPN, the Q_Key and where to send", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const uint32_t l = listen_on(server, addr("10.0.0.2", 7174), 16, kUdp);
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(0x55, "ud hello"), kUdp);
    REQUIRE(link.count('A', CmAttr::SidrReq) == 1);
    const Sent req_mad = link.sent('A', CmAttr::SidrReq)[0];
    const auto req = std::get<rnic::wire::CmSidrReq>(*req_mad.msg());
    CHECK(req.service_id == 0x0000000001111C06ull);
    CHECK(req.pkey == 0xFFFF);
    CHECK(req_mad.mad.mad.header.transaction_id == ((uint64_t{1} << 32) | __builtin_bswap32(req.request_id)));
    const auto creq = server.expect(EventType::ConnectRequest);
    CHECK(creq.listen_id == l);
    CHECK(creq.param.private_data_len == 180);
    CHECK(std::memcmp(creq.param.private_data, "ud hello", 8) == 0);
    CHECK(addr_gid(creq.dst) == gid("10.0.0.1"));
    Gid ah_dgid;
    std::memcpy(ah_dgid.raw.data(), creq.ah_attr.dgid, 16);
    CHECK(ah_dgid == gid("10.0.0.1"));
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(0x66, "ud welcome"), link.now) == 0);
    link.pump();
    const auto rep = std::get<rnic::wire::CmSidrRep>(*link.sent('B', CmAttr::SidrRep)[0].msg());
    CHECK(rep.status == rnic::wire::CmSidrStatus::Success);
    CHECK(rep.qpn == 0x66);
    CHECK(rep.qkey == 0x01234567);
    CHECK(rep.request_id == req.request_id);
    CHECK(rep.service_id == req.service_id);
    const auto est = client.expect(EventType::Established);
    CHECK(est.param.qp_num == 0x66);
    CHECK(est.param.qkey == 0x01234567);
    CHECK(est.param.private_data_len == 136);
    CHECK(std::memcmp(est.param.private_data, "ud welcome", 10) == 0);
    std::memcpy(ah_dgid.raw.data(), est.ah_attr.dgid, 16);
    CHECK(ah_dgid == gid("10.0.0.2"));
    CHECK(est.ah_attr.is_global == 1);
    CHECK(est.ah_attr.hop_limit == 64);
    // Both ids' QPs take the port space's Q_Key.
    CHECK(client.qp_attr(cid, rnic::cm::verbs::kQpsInit).attr.qkey == 0x01234567);
    CHECK(server.qp_attr(creq.id, rnic::cm::verbs::kQpsRts).attr.qkey == 0x01234567);
    // Nothing to disconnect on UD; destroy sends nothing.
    CHECK(client.svc().disconnect(client.owner, cid, link.now) == 0);
    client.destroy(cid, link.now);
    server.destroy(creq.id, link.now);
    link.pump();
    CHECK(link.log.size() == 2);
}

TEST_CASE("SIDR without a listener, rejected, or unanswered", "[cm]") {
    SECTION("nobody listens: SIDR_REP unsupported, UNREACHABLE with status 1") {
        Link link;
        App client(link.a, 1);
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kUdp);
        client.expect(EventType::Unreachable, 1);
    }
    SECTION("the consumer rejects: status 2 and its private data") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174), 16, kUdp);
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kUdp);
        const auto creq = server.expect(EventType::ConnectRequest);
        const std::vector<uint8_t> pd{'n', 'o'};
        REQUIRE(server.svc().reject(server.owner, creq.id, 0, pd, link.now) == 0);
        link.pump();
        const auto ev = client.expect(EventType::Unreachable, 2);
        CHECK(ev.param.private_data[0] == 'n');
        CHECK(server.svc().accept(server.owner, creq.id, conn_param(1), link.now) == EINVAL);
    }
    SECTION("a listener destroyed before answering: SIDR_REP reject") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const uint32_t l = listen_on(server, addr("10.0.0.2", 7174), 16, kUdp);
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kUdp);
        server.destroy(l, link.now);
        link.pump();
        client.expect(EventType::Unreachable, 2);
    }
    SECTION("nobody answers: 16 SIDR_REQs 4096 ms apart, then UNREACHABLE -ETIMEDOUT") {
        Link link;
        link.drop_all = true;
        App client(link.a, 1);
        const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kUdp);
        link.run_for(16 * 4096 - 1);
        CHECK(link.count('A', CmAttr::SidrReq) == 16);
        client.expect_none();
        link.run_for(1);
        client.expect(EventType::Unreachable, -ETIMEDOUT);
        client.destroy(cid, link.now);
    }
    SECTION("a retried SIDR_REQ while the first is unanswered is a duplicate") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174), 16, kUdp);
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kUdp);
        link.run_for(4096);
        CHECK(link.count('A', CmAttr::SidrReq) == 2);
        server.expect(EventType::ConnectRequest);
        server.expect_none();
        CHECK(link.b.svc->counters().duplicates == 1);
    }
    SECTION("an RC request to a UD listener is rejected") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174), 16, kIb, rnic::cm::verbs::kQptUd);
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1), kIb, rnic::cm::verbs::kQptRc);
        client.expect(EventType::Rejected, 28);
    }
}
