// Rejections (no listener, no matching listener, the consumer's with private data) and ids
// destroyed in every state, alone or with their session: the MAD Linux sends for each state
// (REJ with its reason, DREQ, DREP) and what the peer's application sees.
#include <set>

#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;

namespace {

rnic::wire::CmRej last_rej(const Link& link, char from) {
    const auto rejs = link.sent(from, CmAttr::Rej);
    REQUIRE(!rejs.empty());
    return std::get<rnic::wire::CmRej>(*rejs.back().msg());
}

}  // namespace

TEST_CASE("a REQ nobody listens for is rejected with reason 8 (invalid service ID)", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const uint32_t bound = server.create();  // bound, not listening: still no listener
    REQUIRE(server.svc().bind_addr(server.owner, bound, addr("10.0.0.2", 7174)) == 0);
    start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto rej = last_rej(link, 'B');
    CHECK(rej.reason == rnic::wire::CmRejReason::InvalidServiceId);
    CHECK(rej.message_rejected == rnic::wire::CmMsgResponse::Req);
    CHECK(rej.local_comm_id == 0);
    const auto ev = client.expect(EventType::Rejected, 8);
    CHECK(ev.param.private_data_len == 148);
    CHECK(link.b.svc->id_count() == 1);
    // The client's IB CM is idle: destroying it sends nothing more.
    const uint32_t events = client.destroy(ev.id, link.now);
    CHECK(events == 3);
    link.pump();
    CHECK(link.count('A', CmAttr::Rej) == 0);
}

TEST_CASE("a listener on another address, or of another QP type, rejects as the consumer", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    // To the server's IPv6 address, where nothing listens on that port: the IPv4 listener does
    // not match the header's address family.
    const uint32_t c = client.create();
    REQUIRE(client.resolve(c, addr("fd00::2", 7174), link.now) == 0);
    client.expect(EventType::AddrResolved);
    REQUIRE(client.svc().resolve_route(client.owner, c, 1, link.now) == 0);
    client.expect(EventType::RouteResolved);
    REQUIRE(client.svc().connect(client.owner, c, conn_param(1), link.now) == 0);
    link.pump();
    client.expect(EventType::Rejected, 28);
    CHECK(last_rej(link, 'B').reason == rnic::wire::CmRejReason::ConsumerDefined);
    // A UC REQ to an RC listener.
    listen_on(server, addr("10.0.0.2", 7175), 16, kIb, rnic::cm::verbs::kQptRc);
    start_connect(link, client, addr("10.0.0.2", 7175), conn_param(2), kIb, rnic::cm::verbs::kQptUc);
    client.expect(EventType::Rejected, 28);
    server.expect_none();
}

TEST_CASE("the consumer's reject carries its private data to the requester", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    const auto creq = server.expect(EventType::ConnectRequest);
    const std::string why = "go away";
    const std::vector<uint8_t> pd(why.begin(), why.end());
    CHECK(server.svc().reject(server.owner, creq.id, 3, pd, link.now) == EINVAL);
    CHECK(server.svc().reject(server.owner, creq.id, 0, std::vector<uint8_t>(149, 1), link.now) == EINVAL);
    REQUIRE(server.svc().reject(server.owner, creq.id, 0, pd, link.now) == 0);
    link.pump();
    const auto rej = last_rej(link, 'B');
    CHECK(rej.message_rejected == rnic::wire::CmMsgResponse::Req);
    CHECK(rej.local_comm_id != 0);  // the MRA state: the peer may know our id
    const auto ev = client.expect(EventType::Rejected, 28);
    CHECK(ev.param.private_data_len == 148);
    CHECK(std::memcmp(ev.param.private_data, "go away", 7) == 0);
    CHECK(client.query(cid).state == static_cast<uint8_t>(RdmaState::Connect));
    // A second reject has nothing left to reject.
    CHECK(server.svc().reject(server.owner, creq.id, 0, pd, link.now) == EINVAL);
    // The requester gave up on the REQ: no retransmission.
    link.run_for(100'000);
    CHECK(link.count('A', CmAttr::Req) == 1);
    client.expect_none();
}

TEST_CASE("destroying the active side in each state sends what Linux sends", "[cm]") {
    SECTION("REQ sent: REJ timeout with our CA GUID, the passive id learns REJECTED 4") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174));
        const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
        const auto creq = server.expect(EventType::ConnectRequest);
        client.destroy(cid, link.now);
        link.pump();
        const auto rej = last_rej(link, 'A');
        CHECK(rej.reason == rnic::wire::CmRejReason::Timeout);
        REQUIRE(rej.ari_length == 8);
        CHECK(rej.ari[0] == 0x02);
        CHECK(rej.ari[7] == 0x01);
        server.expect(EventType::Rejected, 4);
        CHECK(server.svc().accept(server.owner, creq.id, conn_param(3), link.now) == EINVAL);
        link.run_for(100'000);
        CHECK(link.count('A', CmAttr::Req) == 1);
    }
    SECTION("REP received, no RTU yet: REJ consumer defined for the REP, the server's REP stops") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174));
        const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
        const auto creq = server.expect(EventType::ConnectRequest);
        REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
        link.pump();
        client.expect(EventType::ConnectResponse);
        client.destroy(cid, link.now);
        link.pump();
        const auto rej = last_rej(link, 'A');
        CHECK(rej.reason == rnic::wire::CmRejReason::ConsumerDefined);
        CHECK(rej.message_rejected == rnic::wire::CmMsgResponse::Rep);
        server.expect(EventType::Rejected, 28);
        link.run_for(100'000);
        CHECK(link.count('B', CmAttr::Rep) == 1);
    }
    SECTION("established: a DREQ the CM sees answered after the id is gone; then it goes") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        client.destroy(c.client, link.now);
        CHECK(link.a.hooks.ids[1] == 0);  // the application's share goes with the destroy
        link.pump();
        CHECK(link.count('A', CmAttr::Dreq) == 1);
        server.expect(EventType::Disconnected);
        REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
        link.run_for(10'000);
        CHECK(link.count('B', CmAttr::Drep) == 1);
        CHECK(link.count('A', CmAttr::Dreq) == 1);
        server.expect(EventType::TimewaitExit);
        client.expect_none();
        CHECK(link.a.svc->counters().orphaned_disconnects == 1);
        CHECK(link.a.svc->id_count() == 0);
    }
    SECTION("DREQ received: the DREP goes out with the destroy") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
        link.pump();
        client.expect(EventType::Disconnected);
        client.destroy(c.client, link.now);
        link.pump();
        CHECK(link.count('A', CmAttr::Drep) == 1);
        server.expect(EventType::Disconnected);
    }
    SECTION("DREQ sent and lost, the id destroyed at once (rping): the DREQ is still retried") {
        // Linux cancels the DREQ here and the peer that only waits never hears of the end.
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        bool dropped_one = false;
        link.drop_if = [&](const Sent& s) {
            if (dropped_one || s.from != 'A' || s.attr() != static_cast<uint16_t>(CmAttr::Dreq)) return false;
            return dropped_one = true;
        };
        REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
        client.destroy(c.client, link.now);
        link.pump();
        server.expect_none();
        link.run_for(6144);  // the active side's DREQ waits as long as its REQ did
        CHECK(link.count('A', CmAttr::Dreq) == 2);
        server.expect(EventType::Disconnected);
        REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
        link.run_for(100'000);
        CHECK(link.count('A', CmAttr::Dreq) == 2);
        CHECK(link.a.svc->id_count() == 0);
        client.expect_none();
    }
    SECTION("the peer's DREQ crossing ours after the destroy is answered") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        link.drop_if = [](const Sent& s) { return s.from == 'A' && s.attr() == static_cast<uint16_t>(CmAttr::Dreq); };
        REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
        client.destroy(c.client, link.now);
        link.pump();
        REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
        link.pump();
        CHECK(link.count('A', CmAttr::Drep) == 1);
        link.run_for(10'000);
        server.expect(EventType::Disconnected);
        server.expect(EventType::TimewaitExit);
        CHECK(link.a.svc->id_count() == 0);
    }
    SECTION("DREQ sent, the peer gone: retried 15 times after the destroy, then the id goes") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        link.drop_all = true;
        REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
        link.pump();
        client.destroy(c.client, link.now);
        link.run_for(17 * 6144);
        CHECK(link.count('A', CmAttr::Dreq) == 16);
        CHECK(link.a.svc->id_count() == 0);
        client.expect_none();
    }
    SECTION("in timewait: nothing more") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const auto c = connect_pair(link, client, server);
        REQUIRE(client.svc().disconnect(client.owner, c.client, link.now) == 0);
        link.pump();
        server.expect(EventType::Disconnected);
        REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
        link.pump();
        client.expect(EventType::Disconnected);
        const size_t before = link.log.size();
        client.destroy(c.client, link.now);
        link.run_for(100'000);
        CHECK(link.log.size() == before);
        CHECK(link.a.svc->id_count() == 0);
    }
}

TEST_CASE("destroying the passive side in each state sends what Linux sends", "[cm]") {
    SECTION("a request taken but not answered: REJ consumer defined") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174));
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
        const auto creq = server.expect(EventType::ConnectRequest);
        server.destroy(creq.id, link.now);
        link.pump();
        CHECK(last_rej(link, 'B').reason == rnic::wire::CmRejReason::ConsumerDefined);
        client.expect(EventType::Rejected, 28);
    }
    SECTION("REP sent: REJ, and the requester's connection ends in timewait") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        listen_on(server, addr("10.0.0.2", 7174));
        const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
        const auto creq = server.expect(EventType::ConnectRequest);
        REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(2), link.now) == 0);
        link.pump();
        server.destroy(creq.id, link.now);
        link.pump();
        CHECK(last_rej(link, 'B').message_rejected == rnic::wire::CmMsgResponse::Other);
        client.expect(EventType::ConnectResponse);
        client.expect(EventType::Rejected, 28);
        CHECK(client.svc().accept(client.owner, cid, conn_param(0), link.now) == EINVAL);
    }
    SECTION("a listener with requests nobody took: each is rejected, the listener's events go") {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const uint32_t l = listen_on(server, addr("10.0.0.2", 7174));
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
        start_connect(link, client, addr("10.0.0.2", 7174), conn_param(2));
        CHECK(link.b.svc->id_count() == 3);
        CHECK(server.destroy(l, link.now) == 0);
        link.pump();
        CHECK(link.count('B', CmAttr::Rej) == 2);
        client.expect(EventType::Rejected, 28);
        client.expect(EventType::Rejected, 28);
        server.expect_none();
        CHECK(link.b.svc->id_count() == 0);
        CHECK(link.b.hooks.ids[2] == 0);
    }
}

TEST_CASE("a session's end destroys its ids as a process's death does", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    start_connect(link, client, addr("10.0.0.2", 7174), conn_param(9));  // left untaken on B
    link.b.svc->destroy_owner(server.owner, link.now);
    link.pump();
    CHECK(link.b.svc->id_count() == 1);  // the connected one, finishing its disconnect
    CHECK(link.b.hooks.ids[2] == 0);
    CHECK(link.b.svc->channel_count() == 0);
    CHECK(link.count('B', CmAttr::Dreq) == 1);
    CHECK(link.count('B', CmAttr::Rej) == 1);
    std::set<uint32_t> seen;
    for (int i = 0; i < 2; ++i) {
        const auto ev = client.event();
        REQUIRE(ev);
        seen.insert(ev->event);
    }
    CHECK(seen == std::set<uint32_t>{static_cast<uint32_t>(EventType::Disconnected),
                                     static_cast<uint32_t>(EventType::Rejected)});
    // The other session is untouched, and may close too.
    link.a.svc->destroy_owner(client.owner, link.now);
    CHECK(link.a.svc->id_count() == 0);
    CHECK(link.a.hooks.ids[1] == 0);
    link.run_for(10'000);  // B's DREQ was answered by A's close: B's orphan leaves with its timewait
    CHECK(link.b.svc->id_count() == 0);
    CHECK(link.count('B', CmAttr::Dreq) == 1);
    (void)c;
}
