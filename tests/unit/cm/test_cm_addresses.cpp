// Port spaces (bind, ephemeral ports, REUSEADDR, AFONLY, wildcard and specific addresses),
// listen, address resolution through the neighbour cache, the route, and the states that refuse
// each call, with Linux's errno.
#include "cm_fixture.hpp"

using namespace cmtest;

TEST_CASE("bind takes ports in the port space, errnos as rdma_cm's", "[cm]") {
    Link link;
    App app(link.a, 1), root(link.a, 0);
    const uint32_t a = app.create(), b = app.create(), c = app.create(kUdp), d = app.create();
    CHECK(app.svc().bind_addr(app.owner, a, addr("10.0.0.1", 9000)) == 0);
    // Same specific address and port: in use; a wildcard against it: not available.
    CHECK(app.svc().bind_addr(app.owner, b, addr("10.0.0.1", 9000)) == EADDRINUSE);
    CHECK(app.svc().bind_addr(app.owner, b, addr("0.0.0.0", 9000)) == EADDRNOTAVAIL);
    // Another port space has ports of its own.
    CHECK(app.svc().bind_addr(app.owner, c, addr("10.0.0.1", 9000)) == 0);
    // Not an address of this port; a second bind; a bad family; a link-local address without scope.
    CHECK(app.svc().bind_addr(app.owner, b, addr("10.0.0.9", 9001)) == EADDRNOTAVAIL);
    CHECK(app.svc().bind_addr(app.owner, a, addr("10.0.0.1", 9002)) == EINVAL);
    abi::CmAddress weird = addr("10.0.0.1", 1);
    weird.family = 3;
    CHECK(app.svc().bind_addr(app.owner, b, weird) == EAFNOSUPPORT);
    weird.family = 0;
    CHECK(app.svc().bind_addr(app.owner, b, weird) == EAFNOSUPPORT);
    CHECK(app.svc().bind_addr(app.owner, b, addr("fe80::1", 9003)) == EINVAL);
    CHECK(app.svc().bind_addr(app.owner, b, addr("fe80::1", 9003, 2)) == 0);
    // Below 1024 only for the privileged.
    CHECK(app.svc().bind_addr(app.owner, d, addr("10.0.0.1", 80)) == EACCES);
    const uint32_t r = root.create();
    CHECK(root.svc().bind_addr(root.owner, r, addr("10.0.0.1", 80)) == 0);
    // Port 0: an ephemeral port, in Linux's range, and a different one each time.
    CHECK(app.svc().bind_addr(app.owner, d, addr("10.0.0.1", 0)) == 0);
    const uint16_t p1 = app.query(d).src.port;
    CHECK(p1 >= 32768);
    CHECK(p1 <= 60999);
    const uint32_t e = app.create();
    CHECK(app.svc().bind_addr(app.owner, e, addr("0.0.0.0", 0)) == 0);
    CHECK(app.query(e).src.port != p1);
    CHECK(app.query(e).state == static_cast<uint8_t>(RdmaState::AddrBound));
    // Destroying the owner gives the port back.
    app.destroy(a, link.now);
    const uint32_t f = app.create();
    CHECK(app.svc().bind_addr(app.owner, f, addr("10.0.0.1", 9000)) == 0);
    CHECK(app.svc().bind_addr(app.owner + 5, f, addr("10.0.0.1", 9000)) == ENOENT);
}

TEST_CASE("REUSEADDR shares a port between ids that do not listen", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t a = app.create(), b = app.create(), c = app.create();
    for (uint32_t id : {a, b, c}) {
        abi::CmSetOptionRequest opt{id, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdReuseAddr, 1};
        REQUIRE(app.svc().set_option(app.owner, opt) == 0);
    }
    CHECK(app.svc().bind_addr(app.owner, a, addr("10.0.0.1", 9100)) == 0);
    CHECK(app.svc().bind_addr(app.owner, b, addr("10.0.0.1", 9100)) == 0);
    // A listener may not share with bound ids even with REUSEADDR ...
    CHECK(app.svc().listen(app.owner, b, 0) == EADDRINUSE);
    CHECK(app.query(b).state == static_cast<uint8_t>(RdmaState::AddrBound));
    // ... and nobody may join a listener's port.
    app.destroy(a, link.now);
    CHECK(app.svc().listen(app.owner, b, 0) == 0);
    CHECK(app.svc().bind_addr(app.owner, c, addr("10.0.0.1", 9100)) == EADDRINUSE);
    // Turning REUSEADDR off is allowed only before binding.
    abi::CmSetOptionRequest off{b, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdReuseAddr, 0};
    CHECK(app.svc().set_option(app.owner, off) == EINVAL);
}

TEST_CASE("AFONLY lets an IPv4 and an IPv6 wildcard share a port", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t v4 = app.create(), v6 = app.create(), v6b = app.create();
    CHECK(app.svc().bind_addr(app.owner, v4, addr("0.0.0.0", 9200)) == 0);  // IPv4: AFONLY by default
    CHECK(app.svc().bind_addr(app.owner, v6, addr("::", 9200)) == EADDRNOTAVAIL);
    abi::CmSetOptionRequest opt{v6b, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdAfOnly, 1};
    REQUIRE(app.svc().set_option(app.owner, opt) == 0);
    CHECK(app.svc().bind_addr(app.owner, v6b, addr("::", 9200)) == 0);
    opt.id = v6b;
    app.svc().listen(app.owner, v6b, 0);
    CHECK(app.svc().set_option(app.owner, opt) == EINVAL);  // not once listening
}

TEST_CASE("listen binds an idle id to the IPv4 wildcard, and refuses other states", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t l = app.create();
    REQUIRE(app.svc().listen(app.owner, l, 5) == 0);
    const auto q = app.query(l);
    CHECK(q.src.family == rnic::cm::kAfInet);
    CHECK(q.src.port >= 32768);
    CHECK(q.state == static_cast<uint8_t>(RdmaState::Listen));
    CHECK(app.svc().listen(app.owner, l, 5) == EINVAL);
    CHECK(app.svc().resolve_route(app.owner, l, 10, link.now) == EINVAL);
    CHECK(app.svc().connect(app.owner, l, conn_param(1), link.now) == EINVAL);
    CHECK(app.svc().accept(app.owner, l, conn_param(1), link.now) == EINVAL);
    // Disconnecting a listener does nothing and succeeds, as on Linux; an id without a connection
    // at all is EINVAL.
    CHECK(app.svc().disconnect(app.owner, l, link.now) == 0);
    const uint32_t idle = app.create();
    CHECK(app.svc().disconnect(app.owner, idle, link.now) == EINVAL);
    CHECK(app.svc().reject(app.owner, idle, 0, {}, link.now) == EINVAL);
    CHECK(app.svc().notify(app.owner, idle, rnic::cm::verbs::kEventCommEst, link.now) == EINVAL);
}

TEST_CASE("create_id checks the port space and QP type", "[cm]") {
    Link link;
    App app(link.a, 1);
    uint32_t id = 0;
    abi::CmCreateIdRequest r{app.channel, 0x999, 0, 0};
    CHECK(app.svc().create_id(app.owner, r, id) == EINVAL);
    r.port_space = kIb;
    r.qp_type = 9;
    CHECK(app.svc().create_id(app.owner, r, id) == EINVAL);
    r.qp_type = rnic::cm::verbs::kQptUc;
    CHECK(app.svc().create_id(app.owner, r, id) == 0);
    r.channel = 12345;
    CHECK(app.svc().create_id(app.owner, r, id) == ENOENT);
    // The owner's limit (the host server's per-user caps).
    link.a.hooks.limit = 1;
    r.channel = app.channel;
    CHECK(app.svc().create_id(app.owner, r, id) == EMFILE);
}

TEST_CASE("address resolution waits for the neighbour, times out, or fails at once", "[cm]") {
    Link link;
    App app(link.a, 1);
    // Pending, then answered: ADDR_RESOLVED on the next advance, with the source chosen.
    link.neighbours["10.0.0.7"] = rnic::cm::Resolution::Pending;
    const uint32_t a = app.create();
    REQUIRE(app.resolve(a, addr("10.0.0.7", 80), link.now, 1000) == 0);
    CHECK(app.query(a).state == static_cast<uint8_t>(RdmaState::AddrQuery));
    app.expect_none();
    CHECK(app.svc().resolve_addr(app.owner, abi::CmResolveAddrRequest{a, 10, {}, addr("10.0.0.7", 80)}, link.now) ==
          EINVAL);
    link.neighbours.erase("10.0.0.7");
    link.run_for(1);
    const auto ev = app.expect(EventType::AddrResolved);
    CHECK(addr_gid(ev.src) == gid("10.0.0.1"));
    const auto q = app.query(a);
    CHECK(q.dmac[5] == 7);
    CHECK(q.state == static_cast<uint8_t>(RdmaState::AddrResolved));
    CHECK(q.path_count == 0);
    REQUIRE(app.svc().resolve_route(app.owner, a, 10, link.now) == 0);
    app.expect(EventType::RouteResolved);
    CHECK(app.query(a).path_count == 1);
    CHECK(app.query(a).path_mtu == 3);
    CHECK(app.query(a).hop_limit == 64);

    // Never answered: ADDR_ERROR -ETIMEDOUT at the timeout, back to bound (the port kept).
    link.neighbours["10.0.0.8"] = rnic::cm::Resolution::Pending;
    const uint32_t b = app.create();
    REQUIRE(app.resolve(b, addr("10.0.0.8", 80), link.now, 500) == 0);
    const uint16_t port = app.query(b).src.port;
    link.run_for(499);
    app.expect_none();
    link.run_for(1);
    app.expect(EventType::AddrError, -ETIMEDOUT);
    CHECK(app.query(b).state == static_cast<uint8_t>(RdmaState::AddrBound));
    CHECK(app.query(b).src.port == port);
    CHECK(addr_gid(app.query(b).src) == gid("0.0.0.0"));
    // Bound now: resolving again works, and so does the route after it.
    link.neighbours.erase("10.0.0.8");
    REQUIRE(app.resolve(b, addr("10.0.0.8", 80), link.now, 500) == 0);
    app.expect(EventType::AddrResolved);

    // Unreachable (off-link): ADDR_ERROR -EHOSTUNREACH at once.
    link.neighbours["192.168.9.9"] = rnic::cm::Resolution::Unreachable;
    const uint32_t c = app.create();
    REQUIRE(app.resolve(c, addr("192.168.9.9", 80), link.now) == 0);
    app.expect(EventType::AddrError, -EHOSTUNREACH);

    // A source of another family, a wildcard destination (this host), no IPv6 route.
    const uint32_t d = app.create();
    CHECK(app.resolve(d, addr("fd00::2", 1), link.now, 10, addr("10.0.0.1", 0)) == EINVAL);
    const uint32_t e = app.create();
    REQUIRE(app.resolve(e, addr("0.0.0.0", 1), link.now) == 0);
    app.expect(EventType::AddrResolved);
    CHECK(addr_gid(app.query(e).dst) == gid("10.0.0.1"));
    const uint32_t f = app.create();
    REQUIRE(app.resolve(f, addr("2001:db8::1", 1), link.now) == 0);
    const auto ev6 = app.expect(EventType::AddrResolved);  // the first global address
    CHECK(addr_gid(ev6.src) == gid("fd00::1"));
    CHECK(app.svc().resolve_route(app.owner, app.create(), 1, link.now) == EINVAL);
}

TEST_CASE("a full channel refuses what would queue an event (ENOBUFS)", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t keep = app.create();
    for (uint32_t i = 0; i < abi::kCmEventsQueuedMax; ++i) {
        const uint32_t id = app.create();
        REQUIRE(app.resolve(id, addr("10.0.0.2", 1), link.now) == 0);
    }
    CHECK(app.resolve(keep, addr("10.0.0.2", 1), link.now) == ENOBUFS);
    app.event();
    CHECK(app.resolve(keep, addr("10.0.0.2", 1), link.now) == 0);
}
