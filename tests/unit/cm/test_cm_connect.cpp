// A connection from its first REQ to TIMEWAIT_EXIT on both sides: events and their parameters,
// the MADs and their fields as Linux fills them for RoCE, and the QP attributes for INIT, RTR, RTS.
#include "cm_fixture.hpp"

using namespace cmtest;
using rnic::wire::CmAttr;

namespace {

template <class T>
T as(const Sent& s) {
    const auto m = s.msg();
    REQUIRE(m.has_value());
    REQUIRE(std::holds_alternative<T>(*m));
    return std::get<T>(*m);
}

}  // namespace

TEST_CASE("RC connection, events and MADs as Linux makes them", "[cm]") {
    Link link;
    App client(link.a, 100), server(link.b, 200);
    const uint32_t listener = listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(0x11, "hello", 4, 2));

    // The REQ.
    REQUIRE(link.count('A', CmAttr::Req) == 1);
    const Sent req_mad = link.sent('A', CmAttr::Req)[0];
    const auto req = as<rnic::wire::CmReq>(req_mad);
    CHECK(req_mad.mad.mad.header.transaction_id ==
          ((uint64_t{1} << 32) | __builtin_bswap32(req.local_comm_id)));  // cm_form_tid
    CHECK(req.service_id == 0x0000000001061C06ull);
    CHECK(req.local_ca_guid == 0x020000FFFE000001ull);
    CHECK(req.local_qpn == 0x11);
    CHECK(req.responder_resources == 4);
    CHECK(req.initiator_depth == 2);
    CHECK(req.remote_cm_response_timeout == 20);
    CHECK(req.local_cm_response_timeout == 20);
    CHECK(req.max_cm_retries == 15);
    CHECK(req.retry_count == 7);
    CHECK(req.rnr_retry_count == 7);
    CHECK(req.path_mtu == 3);
    CHECK(req.pkey == 0xFFFF);
    CHECK(req.transport == rnic::wire::CmTransport::Rc);
    CHECK(req.primary_path.local_lid == 0xFFFF);
    CHECK(req.primary_path.remote_lid == 0xFFFF);
    CHECK(req.primary_path.local_gid == gid("10.0.0.1"));
    CHECK(req.primary_path.remote_gid == gid("10.0.0.2"));
    CHECK(req.primary_path.hop_limit == 64);
    CHECK(!req.primary_path.subnet_local);
    CHECK(req.primary_path.local_ack_timeout == 19);  // cm_ack_timeout(15, 18)
    CHECK(!req.has_alternate_path());
    const auto q = client.query(cid);
    CHECK(req.primary_path.flow_label == ((uint32_t{q.src.port} * 31 + 7174) & 0xFFFFF));
    CHECK(q.src.port >= 32768);
    CHECK(q.src.port <= 60999);
    const auto hdr = rnic::wire::parse_rdma_cm_ip_header(req.private_data);
    REQUIRE(hdr);
    CHECK(hdr->ip_version == 4);
    CHECK(hdr->src_port == q.src.port);
    CHECK(hdr->src_addr == gid("10.0.0.1"));
    CHECK(hdr->dst_addr == gid("10.0.0.2"));
    CHECK(std::memcmp(req.private_data.data() + 36, "hello", 5) == 0);

    // CONNECT_REQUEST: the new id, its addresses from the header, the user's private data only.
    const auto creq = server.expect(EventType::ConnectRequest);
    CHECK(creq.listen_id == listener);
    CHECK(creq.id != listener);
    CHECK(creq.param.private_data_len == 56);
    CHECK(std::memcmp(creq.param.private_data, "hello", 5) == 0);
    CHECK(creq.param.responder_resources == 2);  // the peer's initiator depth
    CHECK(creq.param.initiator_depth == 4);
    CHECK(creq.param.qp_num == 0x11);
    CHECK(creq.param.retry_count == 7);
    CHECK(creq.src.family == rnic::cm::kAfInet);
    CHECK(creq.src.port == 7174);
    CHECK(addr_gid(creq.src) == gid("10.0.0.2"));
    CHECK(creq.dst.port == q.src.port);
    CHECK(addr_gid(creq.dst) == gid("10.0.0.1"));
    const uint32_t sid = creq.id;
    CHECK(server.query(sid).state == static_cast<uint8_t>(RdmaState::Connect));

    // The passive side's QP before accepting: INIT and RTR from the REQ.
    const auto s_init = server.qp_attr(sid, rnic::cm::verbs::kQpsInit);
    CHECK(s_init.attr_mask == (rnic::cm::verbs::kQpState | rnic::cm::verbs::kQpAccessFlags |
                               rnic::cm::verbs::kQpPkeyIndex | rnic::cm::verbs::kQpPort));
    CHECK(s_init.attr.qp_access_flags == 0xE);  // remote write, read, atomic (responder resources)

    REQUIRE(server.svc().accept(server.owner, sid, conn_param(0x22, "welcome", 3, 5), link.now) == 0);
    link.pump();
    REQUIRE(link.count('B', CmAttr::Rep) == 1);
    const Sent rep_mad = link.sent('B', CmAttr::Rep)[0];
    const auto rep = as<rnic::wire::CmRep>(rep_mad);
    CHECK(rep_mad.mad.mad.header.transaction_id == req_mad.mad.mad.header.transaction_id);
    CHECK(rep.remote_comm_id == req.local_comm_id);
    CHECK(rep.local_qpn == 0x22);
    CHECK(rep.target_ack_delay == 15);
    CHECK(rep.local_ca_guid == 0x020000FFFE000002ull);
    CHECK(rep.responder_resources == 3);
    CHECK(rep.initiator_depth == 5);
    CHECK(std::memcmp(rep.private_data.data(), "welcome", 7) == 0);
    CHECK(rep_mad.mad.route.remote_gid == gid("10.0.0.1"));

    const auto cresp = client.expect(EventType::ConnectResponse);
    CHECK(cresp.param.private_data_len == 196);
    CHECK(std::memcmp(cresp.param.private_data, "welcome", 7) == 0);
    CHECK(cresp.param.qp_num == 0x22);
    CHECK(cresp.param.responder_resources == 5);
    CHECK(cresp.param.initiator_depth == 3);

    // Both QPs' attributes: each receives from the PSN it announced and sends from the other's.
    const auto c_rtr = client.qp_attr(cid, rnic::cm::verbs::kQpsRtr);
    const auto c_rts = client.qp_attr(cid, rnic::cm::verbs::kQpsRts);
    const auto s_rtr = server.qp_attr(sid, rnic::cm::verbs::kQpsRtr);
    const auto s_rts = server.qp_attr(sid, rnic::cm::verbs::kQpsRts);
    CHECK(c_rtr.attr.rq_psn == req.starting_psn);
    CHECK(c_rts.attr.sq_psn == rep.starting_psn);
    CHECK(s_rtr.attr.rq_psn == rep.starting_psn);
    CHECK(s_rts.attr.sq_psn == req.starting_psn);
    CHECK(c_rtr.attr.dest_qp_num == 0x22);
    CHECK(s_rtr.attr.dest_qp_num == 0x11);
    CHECK(c_rtr.attr.path_mtu == 3);
    CHECK(s_rtr.attr.path_mtu == 3);
    CHECK(c_rtr.attr.max_dest_rd_atomic == 5);  // the REP's initiator depth
    CHECK(c_rts.attr.max_rd_atomic == 3);       // the REP's responder resources
    CHECK(s_rtr.attr.max_dest_rd_atomic == 3);
    CHECK(s_rts.attr.max_rd_atomic == 5);
    CHECK(c_rtr.attr.min_rnr_timer == 0);
    CHECK(c_rts.attr.timeout == 19);
    CHECK(s_rts.attr.timeout == 19);
    CHECK(c_rts.attr.retry_cnt == 7);
    CHECK(c_rts.attr.rnr_retry == 7);
    CHECK(s_rts.attr.retry_cnt == 7);
    CHECK(addr_gid(abi::CmAddress{0, 0, 0, {}}) == Gid{});
    Gid dg;
    std::memcpy(dg.raw.data(), c_rtr.attr.ah_attr.dgid, 16);
    CHECK(dg == gid("10.0.0.2"));
    std::memcpy(dg.raw.data(), s_rtr.attr.ah_attr.dgid, 16);
    CHECK(dg == gid("10.0.0.1"));
    CHECK(c_rtr.attr.ah_attr.flow_label == req.primary_path.flow_label);
    CHECK(s_rtr.attr.ah_attr.flow_label == req.primary_path.flow_label);
    CHECK(c_rtr.attr.ah_attr.hop_limit == 64);
    CHECK(c_rtr.attr.ah_attr.is_global == 1);
    CHECK(c_rtr.attr.ah_attr.sgid_index == 0);
    CHECK(c_rtr.attr_mask == (rnic::cm::verbs::kQpState | rnic::cm::verbs::kQpAv | rnic::cm::verbs::kQpPathMtu |
                              rnic::cm::verbs::kQpDestQpn | rnic::cm::verbs::kQpRqPsn |
                              rnic::cm::verbs::kQpMaxDestRdAtomic | rnic::cm::verbs::kQpMinRnrTimer));
    CHECK(c_rts.attr_mask ==
          (rnic::cm::verbs::kQpState | rnic::cm::verbs::kQpSqPsn | rnic::cm::verbs::kQpRetryCnt |
           rnic::cm::verbs::kQpRnrRetry | rnic::cm::verbs::kQpMaxQpRdAtomic | rnic::cm::verbs::kQpTimeout));

    // RTU, ESTABLISHED on the passive side (the active side's is librdmacm's own).
    REQUIRE(client.svc().accept(client.owner, cid, conn_param(0), link.now) == 0);
    link.pump();
    REQUIRE(link.count('A', CmAttr::Rtu) == 1);
    CHECK(link.sent('A', CmAttr::Rtu)[0].mad.mad.header.transaction_id == req_mad.mad.mad.header.transaction_id);
    server.expect(EventType::Established);
    client.expect_none();

    // DREQ from the client, DREP, both DISCONNECTED, TIMEWAIT_EXIT about 2 s later.
    REQUIRE(client.svc().disconnect(client.owner, cid, link.now) == 0);
    link.pump();
    REQUIRE(link.count('A', CmAttr::Dreq) == 1);
    const auto dreq = as<rnic::wire::CmDreq>(link.sent('A', CmAttr::Dreq)[0]);
    CHECK(dreq.remote_qpn_eecn == 0x22);
    CHECK(link.sent('A', CmAttr::Dreq)[0].mad.mad.header.transaction_id == req_mad.mad.mad.header.transaction_id);
    server.expect(EventType::Disconnected);
    REQUIRE(server.svc().disconnect(server.owner, sid, link.now) == 0);
    link.pump();
    REQUIRE(link.count('B', CmAttr::Drep) == 1);
    client.expect(EventType::Disconnected);
    CHECK(client.query(cid).state == static_cast<uint8_t>(RdmaState::Disconnect));
    link.run_for(2047);
    client.expect_none();
    server.expect_none();
    link.run_for(2);
    client.expect(EventType::TimewaitExit);
    server.expect(EventType::TimewaitExit);
    CHECK(link.misaddressed == 0);
    CHECK(link.a.svc->counters().established == 1);
    CHECK(link.b.svc->counters().established == 1);
    CHECK(link.a.svc->counters().mads_resent == 0);

    // Events handed out are counted per id for the library's destroy (CONNECT_REQUEST: listener).
    CHECK(client.destroy(cid, link.now) == 5);
    CHECK(server.destroy(sid, link.now) == 3);
    CHECK(server.destroy(listener, link.now) == 1);
    link.pump();
    CHECK(link.a.svc->id_count() == 0);
    CHECK(link.b.svc->id_count() == 0);
    CHECK(link.a.hooks.ids[100] == 0);
    CHECK(link.b.hooks.ids[200] == 0);
}

TEST_CASE("a wake-up per queued event, and EAGAIN when none waits", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const auto c = connect_pair(link, client, server);
    CHECK(link.a.hooks.wakeups[client.channel] == 3);  // ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_RESPONSE
    CHECK(link.b.hooks.wakeups[server.channel] == 2);  // CONNECT_REQUEST, ESTABLISHED
    abi::CmEvent ev{};
    CHECK(client.svc().get_event(client.owner, client.channel, ev) == EAGAIN);
    CHECK(client.svc().get_event(client.owner + 1, client.channel, ev) == ENOENT);
    (void)c;
}

TEST_CASE("IPv6 connection, link-local and global", "[cm]") {
    for (const char* ip : {"fd00::2", "fe80::2"}) {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const bool ll = ip[1] == 'e';
        const uint32_t l = server.create();
        REQUIRE(server.svc().bind_addr(server.owner, l, addr("::", 4791)) == 0);
        REQUIRE(server.svc().listen(server.owner, l, 0) == 0);
        const uint32_t cid = client.create();
        REQUIRE(client.resolve(cid, addr(ip, 4791, ll ? 3 : 0), link.now) == 0);
        client.expect(EventType::AddrResolved);
        CHECK(addr_gid(client.query(cid).src) == gid(ll ? "fe80::1" : "fd00::1"));
        CHECK(client.query(cid).sgid_index == (ll ? 1 : 2));
        REQUIRE(client.svc().resolve_route(client.owner, cid, 100, link.now) == 0);
        client.expect(EventType::RouteResolved);
        REQUIRE(client.svc().connect(client.owner, cid, conn_param(7), link.now) == 0);
        link.pump();
        const auto creq = server.expect(EventType::ConnectRequest);
        CHECK(creq.src.family == rnic::cm::kAfInet6);
        CHECK(addr_gid(creq.dst) == gid(ll ? "fe80::1" : "fd00::1"));
        const auto hdr = rnic::wire::parse_rdma_cm_ip_header(
            std::get<rnic::wire::CmReq>(*link.sent('A', CmAttr::Req)[0].msg()).private_data);
        CHECK(hdr->ip_version == 6);
        REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(8), link.now) == 0);
        link.pump();
        client.expect(EventType::ConnectResponse);
        const auto rtr = server.qp_attr(creq.id, rnic::cm::verbs::kQpsRtr);
        CHECK(rtr.attr.ah_attr.sgid_index == (ll ? 1 : 2));
    }
}

TEST_CASE("an IPv4 request reaches an IPv6 wildcard listener unless it is AFONLY", "[cm]") {
    for (const bool afonly : {false, true}) {
        Link link;
        App client(link.a, 1), server(link.b, 2);
        const uint32_t l = server.create();
        abi::CmSetOptionRequest opt{l, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdAfOnly, afonly};
        REQUIRE(server.svc().set_option(server.owner, opt) == 0);
        REQUIRE(server.svc().bind_addr(server.owner, l, addr("::", 5000)) == 0);
        REQUIRE(server.svc().listen(server.owner, l, 0) == 0);
        start_connect(link, client, addr("10.0.0.2", 5000), conn_param(1));
        if (!afonly) {
            const auto creq = server.expect(EventType::ConnectRequest);
            CHECK(creq.src.family == rnic::cm::kAfInet);
        } else {
            server.expect_none();
            client.expect(EventType::Rejected, 28);
        }
    }
}

TEST_CASE("TOS and ACK timeout options shape the route, the REQ and the QP", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 6000));
    const uint32_t cid = client.create();
    abi::CmSetOptionRequest tos{cid, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdTos, 0x68};
    abi::CmSetOptionRequest ack{cid, rnic::cm::verbs::kOptionId, rnic::cm::verbs::kOptionIdAckTimeout, 14};
    REQUIRE(client.svc().set_option(client.owner, tos) == 0);
    REQUIRE(client.svc().set_option(client.owner, ack) == 0);
    tos.value = 256;
    CHECK(client.svc().set_option(client.owner, tos) == EINVAL);
    abi::CmSetOptionRequest bad{cid, 7, 0, 0};
    CHECK(client.svc().set_option(client.owner, bad) == ENOSYS);
    REQUIRE(client.resolve(cid, addr("10.0.0.2", 6000), link.now) == 0);
    client.expect(EventType::AddrResolved);
    REQUIRE(client.svc().resolve_route(client.owner, cid, 100, link.now) == 0);
    client.expect(EventType::RouteResolved);
    const auto q = client.query(cid);
    CHECK(q.traffic_class == 0x68);
    CHECK(q.packet_life_time == 13);
    REQUIRE(client.svc().connect(client.owner, cid, conn_param(3), link.now) == 0);
    link.pump();
    const auto req = std::get<rnic::wire::CmReq>(*link.sent('A', CmAttr::Req)[0].msg());
    CHECK(req.primary_path.traffic_class == 0x68);
    CHECK(req.primary_path.local_ack_timeout == 16);  // cm_ack_timeout(15, 13): 15, rounded up
    CHECK(link.sent('A', CmAttr::Req)[0].mad.route.traffic_class == 0x68);
    const auto creq = server.expect(EventType::ConnectRequest);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(4), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    CHECK(client.qp_attr(cid, rnic::cm::verbs::kQpsRts).attr.timeout == 14);
    CHECK(client.qp_attr(cid, rnic::cm::verbs::kQpsRtr).attr.ah_attr.traffic_class == 0x68);
    CHECK(server.qp_attr(creq.id, rnic::cm::verbs::kQpsRtr).attr.ah_attr.traffic_class == 0x68);
    // The ACK timeout is for RC ids only.
    const uint32_t ud = client.create(kUdp);
    ack.id = ud;
    CHECK(client.svc().set_option(client.owner, ack) == EINVAL);
}

TEST_CASE("QP attributes before a connection, and for UD", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t rc = app.create();
    for (uint32_t state : {rnic::cm::verbs::kQpsInit, rnic::cm::verbs::kQpsRtr}) {
        const auto r = app.qp_attr(rc, state);
        CHECK(r.attr_mask == (rnic::cm::verbs::kQpState | rnic::cm::verbs::kQpPkeyIndex | rnic::cm::verbs::kQpPort |
                              rnic::cm::verbs::kQpAccessFlags));
        CHECK(r.attr.qp_access_flags == 0);
        CHECK(r.attr.port_num == 1);
        CHECK(r.attr.qp_state == state);
    }
    const uint32_t ud = app.create(kUdp);
    const auto r = app.qp_attr(ud, rnic::cm::verbs::kQpsInit);
    CHECK(r.attr_mask == (rnic::cm::verbs::kQpState | rnic::cm::verbs::kQpPkeyIndex | rnic::cm::verbs::kQpPort |
                          rnic::cm::verbs::kQpQkey));
    CHECK(r.attr.qkey == 0x01234567);
    abi::CmInitQpAttrReply out{};
    CHECK(app.svc().init_qp_attr(app.owner, rc + 1000, 1, out) == ENOENT);
}

TEST_CASE("COMM_EST on the passive side establishes without the RTU", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7000));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7000), conn_param(5));
    const auto creq = server.expect(EventType::ConnectRequest);
    CHECK(server.svc().notify(server.owner, creq.id, rnic::cm::verbs::kEventCommEst, link.now) == EINVAL);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(6), link.now) == 0);
    link.drop_all = true;
    link.pump();
    // The first data packet made the QP's COMM_EST: ESTABLISHED, and the REP is no longer resent.
    REQUIRE(server.svc().notify(server.owner, creq.id, rnic::cm::verbs::kEventCommEst, link.now) == 0);
    server.expect(EventType::Established);
    CHECK(server.svc().notify(server.owner, creq.id, rnic::cm::verbs::kEventCommEst, link.now) == EISCONN);
    CHECK(server.svc().notify(server.owner, creq.id, 99, link.now) == EINVAL);
    link.drop_all = false;
    link.run_for(60'000);
    CHECK(link.count('B', CmAttr::Rep) == 1);
    (void)cid;
}

TEST_CASE("rdma_establish sends the RTU like the active side's accept", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    listen_on(server, addr("10.0.0.2", 7001));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7001), conn_param(5));
    CHECK(client.svc().establish(client.owner, cid, link.now) == EINVAL);  // no REP yet
    const auto creq = server.expect(EventType::ConnectRequest);
    REQUIRE(server.svc().accept(server.owner, creq.id, conn_param(6), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    REQUIRE(client.svc().establish(client.owner, cid, link.now) == 0);
    link.pump();
    server.expect(EventType::Established);
    CHECK(client.svc().establish(client.owner, cid, link.now) == EINVAL);
}

TEST_CASE("migrating an id moves its queued events to the new channel", "[cm]") {
    Link link;
    App app(link.a, 1);
    const uint32_t id = app.create();
    REQUIRE(app.resolve(id, addr("10.0.0.2", 1), link.now) == 0);
    uint32_t other = 0;
    REQUIRE(app.svc().create_channel(app.owner, other) == 0);
    uint32_t reported = 99;
    REQUIRE(app.svc().migrate_id(app.owner, id, other, reported) == 0);
    CHECK(reported == 0);
    app.expect_none();
    CHECK(app.svc().destroy_channel(app.owner, other) == EBUSY);
    abi::CmEvent ev{};
    REQUIRE(app.svc().get_event(app.owner, other, ev) == 0);
    CHECK(ev.event == static_cast<uint32_t>(EventType::AddrResolved));
    CHECK(link.a.hooks.wakeups[other] == 1);
    CHECK(app.svc().destroy_channel(app.owner, app.channel) == 0);
    app.destroy(id, link.now);
    CHECK(app.svc().destroy_channel(app.owner, other) == 0);
}

// A connection request the application has not taken can have events of its own behind its
// CONNECT_REQUEST (here the requester gave up: REJ "timeout"). Moving the listener moves the
// request to the new channel, and its events with it: left behind, they were handed out on a
// channel the request no longer reported to, before its CONNECT_REQUEST, and after the request
// was destroyed with its listener, naming an id that no longer existed.
TEST_CASE("migrating a listener takes its untaken requests' own events along", "[cm]") {
    Link link;
    App client(link.a, 1), server(link.b, 2);
    const uint32_t listener = listen_on(server, addr("10.0.0.2", 7174));
    const uint32_t cid = start_connect(link, client, addr("10.0.0.2", 7174), conn_param(1));
    client.destroy(cid, link.now);
    link.pump();
    uint32_t other = 0;
    REQUIRE(server.svc().create_channel(server.owner, other) == 0);
    uint32_t reported = 99;
    REQUIRE(server.svc().migrate_id(server.owner, listener, other, reported) == 0);
    CHECK(reported == 0);
    server.expect_none();
    CHECK(server.svc().destroy_channel(server.owner, server.channel) == 0);

    SECTION("taken from the new channel, in order") {
        abi::CmEvent req{}, rej{};
        REQUIRE(server.svc().get_event(server.owner, other, req) == 0);
        CHECK(req.event == static_cast<uint32_t>(EventType::ConnectRequest));
        CHECK(req.listen_id == listener);
        REQUIRE(server.svc().get_event(server.owner, other, rej) == 0);
        CHECK(rej.event == static_cast<uint32_t>(EventType::Rejected));
        CHECK(rej.status == 4);
        CHECK(rej.id == req.id);
        CHECK(link.b.hooks.wakeups[other] == 2);
        CHECK(server.destroy(req.id, link.now) == 1);
        CHECK(server.destroy(listener, link.now) == 1);
    }
    SECTION("destroyed with the listener: no event is left for an id that is gone") {
        server.destroy(listener, link.now);
        abi::CmEvent ev{};
        CHECK(server.svc().get_event(server.owner, other, ev) == EAGAIN);
        CHECK(server.svc().id_count() == 0);
    }
    CHECK(server.svc().destroy_channel(server.owner, other) == 0);
}
