// Peer liveness (peer_liveness.cpp): a silent peer with connections is probed with a
// Get(ClassPortInfo); one that stops answering ends its connections with DISCONNECTED
// (-ETIMEDOUT), so an application that only waits learns of the peer's death.
#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;
using rnic::wire::MadMethod;

namespace {

constexpr Keepalive kFast{5000, 2000, 4};

bool is_probe(const Sent& s, char from, MadMethod method) {
    return s.from == from && s.attr() == static_cast<uint16_t>(CmAttr::ClassPortInfo) &&
           s.mad.mad.header.method == method;
}

size_t probes(const Link& link, char from, MadMethod method) {
    size_t n = 0;
    for (const Sent& s : link.log) n += is_probe(s, from, method);
    return n;
}

}  // namespace

TEST_CASE("a peer that answers its probes keeps its connections, one probe per peer, not per connection", "[cm]") {
    Link link(kFast);
    App client(link.a, 1), server(link.b, 2);
    for (uint16_t i = 0; i < 3; ++i) connect_pair(link, client, server, 7174 + i, "10.0.0.2", 0x11 + i, 0x22 + i);
    link.run_for(60'000);
    // Every 5 s of silence one probe from each side, whatever the number of connections.
    const size_t from_a = probes(link, 'A', MadMethod::Get);
    CHECK(from_a >= 10);
    CHECK(from_a <= 12);
    CHECK(probes(link, 'B', MadMethod::GetResp) == from_a);
    CHECK(link.a.svc->counters().keepalive_answers == from_a);
    CHECK(link.a.svc->counters().peers_lost == 0);
    CHECK(link.b.svc->counters().peers_lost == 0);
    client.expect_none();
    server.expect_none();
}

TEST_CASE("a peer that stops answering: its connections end DISCONNECTED -ETIMEDOUT in idle + probes", "[cm]") {
    Link link(kFast);
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    link.run_for(1'000);
    // A's daemon dies: nothing from it reaches B any more, and nothing reaches it.
    link.drop_all = true;
    link.run_for(11'000);
    server.expect_none();  // 5 s idle and four probes 2 s apart: not before 13 s
    link.run_for(4'000);
    const auto ev = server.expect(EventType::Disconnected, -ETIMEDOUT);
    CHECK(ev.id == c.server);
    CHECK(link.b.svc->counters().peers_lost == 1);
    CHECK(probes(link, 'B', MadMethod::Get) == 4);
    // The application disconnects as usual: nothing to send, then its timewait ends.
    REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
    link.run_for(5'000);
    CHECK(link.count('B', CmAttr::Dreq) == 0);
    server.expect(EventType::TimewaitExit);
    // No connection left: no more probes.
    const size_t before = probes(link, 'B', MadMethod::Get);
    link.run_for(30'000);
    CHECK(probes(link, 'B', MadMethod::Get) == before);
}

TEST_CASE("a lost probe or two is not a lost peer", "[cm]") {
    Link link(kFast);
    App client(link.a, 1), server(link.b, 2);
    connect_pair(link, client, server);
    size_t dropped = 0;
    link.drop_if = [&](const Sent& s) {
        return is_probe(s, 'B', MadMethod::Get) && dropped++ % 4 < 3;  // three of every four of B's probes lost
    };
    link.run_for(120'000);
    CHECK(link.b.svc->counters().peers_lost == 0);
    CHECK(link.b.svc->counters().keepalive_answers > 0);
    server.expect_none();
    client.expect_none();
}

TEST_CASE("a DREQ waiting for its answer is left to its own retries", "[cm]") {
    Link link(kFast);
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    link.drop_if = [](const Sent& s) { return s.from == 'A'; };
    REQUIRE(server.svc().disconnect(server.owner, c.server, link.now) == 0);
    link.run_for(30'000);
    server.expect_none();  // the probes would have given up at 13 s
    link.run_for(40'000);
    CHECK(link.count('B', CmAttr::Dreq) == 16);
    server.expect(EventType::Disconnected, -ETIMEDOUT);
}

TEST_CASE("a probe answer nobody asked for is counted as unmatched", "[cm]") {
    Link link(kFast);
    App client(link.a, 1), server(link.b, 2);
    connect_pair(link, client, server);
    rnic::wire::Mad answer;
    answer.header.mgmt_class = rnic::wire::kMgmtClassCm;
    answer.header.class_version = rnic::wire::kCmClassVersion;
    answer.header.method = MadMethod::GetResp;
    answer.header.attribute_id = static_cast<uint16_t>(CmAttr::ClassPortInfo);
    answer.header.transaction_id = 0x1234;
    const auto bytes = answer.bytes();
    rnic::cm::MadRoute from;
    from.local_gid = gid("10.0.0.2");
    from.remote_gid = gid("10.0.0.1");
    const auto unmatched = link.b.svc->counters().unmatched_mads;
    link.b.svc->receive(from, bytes, link.now);
    CHECK(link.b.svc->counters().unmatched_mads == unmatched + 1);
    CHECK(link.b.svc->counters().keepalive_answers == 0);
}
