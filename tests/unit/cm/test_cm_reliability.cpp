// The CM's own reliability: retransmission of REQ, REP and DREQ with the MADs' timeouts and retry
// counts, duplicates answered as Linux answers them (MRA, RTU, DREP, REJ stale), MRA for an
// application slow to accept, giving up after the last retry, and a lossy link under all of it.
#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;

TEST_CASE("a REQ nobody answers is sent 16 times, 6144 ms apart, then UNREACHABLE", "[cm]") {
    Link link;
    App client(link.a, 1);
    link.drop_all = true;
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    // 2 * 2^(18-8) ms (packet life time 18, twice) + 2^(20-8) ms (the CM response timeout)
    link.run_for(6143);
    CHECK(link.count('A', CmAttr::Req) == 1);
    link.run_for(1);
    CHECK(link.count('A', CmAttr::Req) == 2);
    link.run_for(14 * 6144);
    CHECK(link.count('A', CmAttr::Req) == 16);
    client.expect_none();
    link.run_for(6144);
    CHECK(link.count('A', CmAttr::Req) == 16);
    client.expect(EventType::Unreachable, -ETIMEDOUT);
    CHECK(link.a.svc->counters().mads_resent == 15);
    CHECK(link.a.svc->counters().send_timeouts == 1);
    // Nothing more to send when it is destroyed now (the IB CM is idle).
    client.destroy(cid, link.now);
    link.pump();
    CHECK(link.count('A', CmAttr::Rej) == 0);
}

TEST_CASE("a REP without its RTU is resent every 4096 ms, then the passive side gives up", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto creq = server.expect(EventType::ConnectRequest);
    link.drop_if = [](const Sent& s) { return s.from == 'B'; };  // the server's MADs never arrive
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
    link.run_for(16 * 4096 - 1);
    CHECK(link.count('B', CmAttr::Rep) == 16);
    server.expect_none();
    link.run_for(1);
    server.expect(EventType::Unreachable, -ETIMEDOUT);
    // The client's retried REQs met a REP already sent: duplicates, not answered.
    CHECK(link.b.svc->counters().duplicates > 0);
    CHECK(link.count('B', CmAttr::Mra) == 0);
    (void)cid;
}

TEST_CASE("an application slow to accept gets an MRA out for the REQ's retry", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto creq = server.expect(EventType::ConnectRequest);
    CHECK(link.count('B', CmAttr::Mra) == 0);  // delayed: only a duplicate REQ draws it
    link.run_for(6144);
    REQUIRE(link.count('A', CmAttr::Req) == 2);
    REQUIRE(link.count('B', CmAttr::Mra) == 1);
    const auto mra = std::get<rnic::wire::CmMra>(*link.sent('B', CmAttr::Mra)[0].msg());
    CHECK(mra.message_mraed == rnic::wire::CmMsgResponse::Req);
    CHECK(mra.service_timeout == 24);
    server.expect_none();  // a duplicate makes no second CONNECT_REQUEST
    // The REQ now waits 2^(24-8) + 2^(19-8) ms before its next try, well past the 98 s it had.
    link.run_for(65536 + 2048 - 1);
    CHECK(link.count('A', CmAttr::Req) == 2);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    REQUIRE(client.svc().accept(client.owner, cid, conn_param(0), link.now) == 0);
    link.pump();
    server.expect(EventType::Established);
    link.run_for(200'000);
    CHECK(link.count('A', CmAttr::Req) == 2);
    client.expect_none();
}

TEST_CASE("a lost RTU is made good by the REP's retry (RTU resent for the duplicate)", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto creq = server.expect(EventType::ConnectRequest);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    link.drop_if = [](const Sent& s) { return s.attr() == static_cast<uint16_t>(CmAttr::Rtu) && s.from == 'A'; };
    REQUIRE(client.svc().accept(client.owner, cid, conn_param(0), link.now) == 0);
    link.pump();
    server.expect_none();
    link.drop_if = nullptr;
    link.run_for(4096);
    CHECK(link.count('B', CmAttr::Rep) == 2);
    CHECK(link.count('A', CmAttr::Rtu) == 2);
    server.expect(EventType::Established);
    CHECK(link.a.svc->counters().duplicates == 1);
}

TEST_CASE("a repeated REP before the RTU gets an MRA, and a DREQ unanswered ends in timewait", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto creq = server.expect(EventType::ConnectRequest);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    link.run_for(4096);  // the library is slow to send the RTU: the REP comes again
    REQUIRE(link.count('A', CmAttr::Mra) == 1);
    CHECK(std::get<rnic::wire::CmMra>(*link.sent('A', CmAttr::Mra)[0].msg()).message_mraed ==
          rnic::wire::CmMsgResponse::Rep);
    link.run_for(60'000);
    CHECK(link.count('B', CmAttr::Rep) == 2);  // the MRA stretched the REP's timeout
    REQUIRE(client.svc().accept(client.owner, cid, conn_param(0), link.now) == 0);
    link.pump();
    server.expect(EventType::Established);

    // The server disconnects; the client's DREPs never arrive: DREQ 16 times, then timewait.
    link.drop_if = [](const Sent& s) { return s.from == 'A'; };
    REQUIRE(server.svc().disconnect(server.owner, creq.id, link.now) == 0);
    link.pump();
    client.expect(EventType::Disconnected);
    REQUIRE(client.svc().disconnect(client.owner, cid, link.now) == 0);  // the DREP (lost)
    link.run_for(15 * 4096);
    CHECK(link.count('B', CmAttr::Dreq) == 16);
    // One DREP; the retried DREQs came after the client's 2 s timewait, to an idle IB CM (Linux
    // drops those too until the application destroys the id).
    CHECK(link.count('A', CmAttr::Drep) == 1);
    server.expect_none();
    link.run_for(4096);
    server.expect(EventType::Disconnected, -ETIMEDOUT);
    link.run_for(2048);
    server.expect(EventType::TimewaitExit);
}

TEST_CASE("connections over a link that drops every n-th MAD all establish and close", "[cm]") {
    for (uint32_t n : {2u, 3u, 4u, 5u, 7u}) {
        Link link;
        link.drop_every = n;
        App client(link.a, 1), server(link.b, 2);
        const uint32_t listener = listen_on(server, addr("10.0.0.2", 7174), 64);
        constexpr int kConns = 12;
        std::vector<uint32_t> clients;
        for (int i = 0; i < kConns; ++i)
            clients.push_back(start_connect(link, client, addr("10.0.0.2", 7174), conn_param(100 + i)));
        std::map<uint32_t, uint32_t> server_of;  // client id -> server id (by the QPN the REQ named)
        int established_server = 0, responses = 0, disconnected_c = 0, disconnected_s = 0, tw_c = 0, tw_s = 0;
        for (int step = 0; step < 400; ++step) {
            link.run_for(500);
            while (auto ev = server.event()) {
                switch (static_cast<EventType>(ev->event)) {
                    case EventType::ConnectRequest:
                        REQUIRE(server.svc().accept(server.owner, ev->id, conn_param(1000 + ev->param.qp_num),
                                                    link.now) == 0);
                        break;
                    case EventType::Established:
                        ++established_server;
                        break;
                    case EventType::Disconnected:
                        ++disconnected_s;
                        REQUIRE(server.svc().disconnect(server.owner, ev->id, link.now) == 0);
                        break;
                    case EventType::TimewaitExit:
                        ++tw_s;
                        server.destroy(ev->id, link.now);
                        break;
                    default:
                        FAIL("server event " << ev->event << " status " << ev->status);
                }
            }
            while (auto ev = client.event()) {
                switch (static_cast<EventType>(ev->event)) {
                    case EventType::ConnectResponse:
                        ++responses;
                        REQUIRE(client.svc().accept(client.owner, ev->id, conn_param(0), link.now) == 0);
                        REQUIRE(client.svc().disconnect(client.owner, ev->id, link.now) == 0);
                        break;
                    case EventType::Disconnected:
                        ++disconnected_c;
                        break;
                    case EventType::TimewaitExit:
                        ++tw_c;
                        client.destroy(ev->id, link.now);
                        break;
                    default:
                        FAIL("client event " << ev->event << " status " << ev->status);
                }
            }
            if (tw_c == kConns && tw_s == kConns) break;
        }
        INFO("drop every " << n << ": resent "
                           << link.a.svc->counters().mads_resent + link.b.svc->counters().mads_resent << ", duplicates "
                           << link.a.svc->counters().duplicates + link.b.svc->counters().duplicates << ", dropped "
                           << std::count_if(link.log.begin(), link.log.end(), [](const Sent& s) { return s.dropped; })
                           << " of " << link.log.size() << ", " << link.now / kMs << " ms");
        CHECK(responses == kConns);
        CHECK(disconnected_c == kConns);
        CHECK(disconnected_s == kConns);
        CHECK(tw_c == kConns);
        CHECK(tw_s == kConns);
        CHECK(established_server <= kConns);  // a DREQ may overtake a lost RTU
        CHECK(link.a.svc->counters().mads_resent + link.b.svc->counters().mads_resent > 0);
        CHECK(link.a.svc->counters().bad_mads == 0);
        CHECK(link.b.svc->counters().bad_mads == 0);
        (void)listener;
        (void)server_of;
    }
}

TEST_CASE("a REQ from a QP already connected is stale: REJ to it, DREQ to the old", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    // The client's side was reset and connects the same QP again (a new comm id, QPN 0x11).
    start_connect(link, client, addr("10.0.0.2", 7174), conn_param(0x11));
    REQUIRE(link.count('B', CmAttr::Rej) == 1);
    const auto rej = std::get<rnic::wire::CmRej>(*link.sent('B', CmAttr::Rej)[0].msg());
    CHECK(rej.reason == rnic::wire::CmRejReason::StaleConn);
    CHECK(link.count('B', CmAttr::Dreq) == 1);
    client.expect(EventType::Rejected, 10);
    client.expect(EventType::Disconnected);
    REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
    link.pump();
    server.expect(EventType::Disconnected);
    (void)c;
}

TEST_CASE("a full backlog drops the REQ silently, and the retry after a CONNECT_REQUEST is taken gets in", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174), 1);
    start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const uint32_t second = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(2));
    CHECK(link.b.svc->counters().requests_dropped == 1);
    CHECK(link.count('B', CmAttr::Rej) == 0);
    const auto first = server.expect(EventType::ConnectRequest);
    CHECK(first.param.qp_num == 1);
    server.expect_none();
    link.run_for(6144);
    const auto again = server.expect(EventType::ConnectRequest);
    CHECK(again.param.qp_num == 2);
    (void)second;
}

TEST_CASE("a DREQ for a connection already gone is answered with a DREP", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    // The server's id is destroyed while established: its DREQ, which the client's DREP answers
    // (the CM keeps the connection until then, and through its timewait).
    server.destroy(c.server, link.now);
    link.pump();
    CHECK(link.count('B', CmAttr::Dreq) == 1);
    client.expect(EventType::Disconnected);
    REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
    link.pump();
    CHECK(link.b.svc->counters().unmatched_mads == 0);
    link.run_for(60'000);
    CHECK(link.count('B', CmAttr::Dreq) == 1);
    CHECK(link.b.svc->id_count() == 1);  // the listener
    // A DREQ arriving for an id that no longer exists gets a DREP anyway.
    client.destroy(c.client, link.now);
    rnic::wire::CmDreq dreq;
    dreq.local_comm_id = 0x1234;
    dreq.remote_comm_id = 0x5678;
    rnic::cm::MadRoute from;
    from.local_gid = gid("10.0.0.2");
    from.remote_gid = gid("10.0.0.1");
    const auto mad = rnic::wire::encode_cm(dreq, 77).bytes();
    link.b.svc->receive(from, mad, link.now);
    link.pump();
    const auto dreps = link.sent('B', CmAttr::Drep);
    REQUIRE(dreps.size() == 1);
    const auto drep = std::get<rnic::wire::CmDrep>(*dreps[0].msg());
    CHECK(drep.local_comm_id == 0x5678);
    CHECK(drep.remote_comm_id == 0x1234);
    CHECK(dreps[0].mad.mad.header.transaction_id == 77);
}
