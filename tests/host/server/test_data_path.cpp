// The data path through the rings: WQEs in, CQEs out over the datapath's loopback, completion
// channels, corrupt rings, address resolution that waits for ARP, the sleeping protocol and
// shutdown.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "client_session.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

TEST_CASE("a SEND and an RDMA WRITE through the rings, between two QPs of this daemon (loopback)") {
    // Over the IPv4 GID and over our IPv6 GID fd77::1 (resolved to our own MAC, no ND).
    const uint8_t sgid = GENERATE(uint8_t{0}, uint8_t{2});
    INFO("sgid_index " << int{sgid});
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    CHECK(a.reply.sq_stride == abi::send_stride(2, 64));
    s.connect_pair(a, b, sgid ? kOwnGid6 : kOwnGid, sgid);

    // Arm the CQ: the first completion signals the channel.
    s.cq.ring.header().arm.store(abi::kArmNext);
    const uint64_t base = reinterpret_cast<uint64_t>(s.buf.data);
    std::memcpy(s.buf.data, "hello over the rings", 21);
    s.post_recv(b, 0xB0B, base + 4096, 4096);
    s.post_send(a, 0xA11CE, /*IBV_WR_SEND*/ 2, base, 21, /*SIGNALED*/ 2);
    auto cqes = s.wait_cqes(2);
    REQUIRE(cqes.size() == 2);
    const abi::Cqe* send = cqes[0].opcode == 0 ? &cqes[0] : &cqes[1];
    const abi::Cqe* recv = cqes[0].opcode == 0 ? &cqes[1] : &cqes[0];
    CHECK(send->wr_id == 0xA11CE);
    CHECK(send->status == 0);
    CHECK(send->qp_num == a.qpn);
    CHECK(send->wqe_index == 0);
    CHECK(recv->wr_id == 0xB0B);
    CHECK(recv->status == 0);
    CHECK(recv->opcode == 128);
    CHECK(recv->byte_len == 21);
    CHECK(recv->qp_num == b.qpn);
    CHECK(recv->src_qp == a.qpn);
    CHECK(std::memcmp(s.buf.data + 4096, "hello over the rings", 21) == 0);
    CHECK(a.sq.header().consumer.load() == 1);
    CHECK(b.rq.header().consumer.load() == 1);
    // Armed once: one event, the arm consumed, a byte on the channel's socket.
    CHECK(s.cq.ring.header().arm.load() == abi::kArmNone);
    CHECK(s.cq.ring.header().events.load() == 1);
    CHECK(ClientSession::drain(s.channel_fd) == 1);
    CHECK((fcntl(s.channel_fd, F_GETFL) & O_NONBLOCK) == 0);  // blocking, until the application says

    // An unsignaled WRITE then a signaled one: one CQE, at the second WQE's index.
    std::memcpy(s.buf.data + 100, "written", 7);
    s.post_send(a, 1, /*IBV_WR_RDMA_WRITE*/ 0, base + 100, 7, 0, base + 8192);
    s.post_send(a, 2, 0, base + 100, 7, 2, base + 8200);
    cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 2);
    CHECK(cqes[0].wqe_index == 2);
    CHECK(cqes[0].opcode == 1);
    CHECK(std::memcmp(s.buf.data + 8192, "written", 7) == 0);
    CHECK(std::memcmp(s.buf.data + 8200, "written", 7) == 0);
    CHECK(rig.dp.counters().loopback_frames > 0);
    CHECK(rig.port.sent().empty());  // nothing of it went to the wire

    // Three packets from A since both sides set PSN 100: Stats and QueryQp report where the
    // requester and the responder are now, not the PSNs ModifyQp set.
    const auto stats = nlohmann::json::parse(rig.host->stats_json());
    std::map<uint32_t, nlohmann::json> by_qpn;
    for (const auto& q : stats["qps"]) by_qpn[q["qpn"].get<uint32_t>()] = q;
    REQUIRE(by_qpn.size() == 2);
    CHECK(by_qpn[a.qpn]["sq_psn"] == 103);
    CHECK(by_qpn[a.qpn]["sq_una_psn"] == 103);
    CHECK(by_qpn[a.qpn]["rq_psn"] == 100);
    CHECK(by_qpn[b.qpn]["sq_psn"] == 100);  // its ACKs take no PSN
    CHECK(by_qpn[b.qpn]["rq_psn"] == 103);
    for (const auto& [qpn, sq, rq] : {std::tuple{a.qpn, 103u, 100u}, std::tuple{b.qpn, 100u, 103u}}) {
        Reply q = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{qpn, 0});
        REQUIRE(q.header.status == 0);
        CHECK(q.as<abi::QueryQpReply>().attr.sq_psn == sq);
        CHECK(q.as<abi::QueryQpReply>().attr.rq_psn == rq);
    }
}

TEST_CASE("a WQE the engine refuses completes with IBV_WC_LOC_QP_OP_ERR") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    // An RC QP cannot post IBV_WR_TSO (10) through this engine.
    s.post_send(a, 77, 10, reinterpret_cast<uint64_t>(s.buf.data), 8, 2);
    auto cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 77);
    CHECK(cqes[0].status == 2);
    CHECK(cqes[0].wqe_index == 0);
    // num_sge above the QP's cap is refused before the engine sees it.
    auto* slot = static_cast<uint8_t*>(a.sq.entry(a.sq_produced));
    abi::SendWqe w{};
    w.wr_id = 78;
    w.opcode = 2;
    w.send_flags = 2;
    w.num_sge = 200;
    std::memcpy(slot, &w, sizeof w);
    a.sq.publish(++a.sq_produced);
    s.ring(a);
    cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 78);
    CHECK(cqes[0].status == 2);
}

TEST_CASE("WQEs waiting in the ring for room in the engine go in once unsignaled WQEs before them are acknowledged") {
    // The engine holds up to max_send_wr of a QP's WQEs, more wait in the ring until some leave.
    // Unsignaled WQEs leave without a completion: the waiting queue must be tried again all the
    // same, or what waits behind an engine full of unsignaled WRITEs stays in the ring until the
    // next doorbell, which an application waiting for the signaled WQE among them never rings.
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect_pair(a, b, kOwnGid);
    const uint64_t base = reinterpret_cast<uint64_t>(s.buf.data);
    std::memcpy(s.buf.data, "unsignal", 8);
    const uint32_t depth = a.sq.size();
    const auto write = [&](uint32_t i, uint32_t flags) {
        s.post_send(a, i, /*IBV_WR_RDMA_WRITE*/ 0, base, 8, flags, base + 8192 + 8 * i);
    };
    for (uint32_t i = 0; i < depth; ++i) write(i, 0);
    rig.turn();  // into the engine, which is full now
    REQUIRE(a.sq.header().consumer.load() == depth);
    for (uint32_t i = depth; i < 2 * depth - 1; ++i) write(i, 0);
    write(2 * depth - 1, /*SIGNALED*/ 2);
    const auto cqes = s.wait_cqes(1);
    CHECK(rig.host->stats_json().find("\"host_wqes_engine_full\":0,") == std::string::npos);  // it did wait
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 2 * depth - 1);
    CHECK(cqes[0].status == 0);
    CHECK(a.sq.header().consumer.load() == 2 * depth);
    for (uint32_t i = 0; i < 2 * depth; ++i) CHECK(std::memcmp(s.buf.data + 8192 + 8 * i, "unsignal", 8) == 0);
}

TEST_CASE("a corrupt ring moves the QP to error and raises IBV_EVENT_QP_FATAL") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    s.post_recv(a, 5, reinterpret_cast<uint64_t>(s.buf.data), 64);
    rig.turn();
    a.sq.header().producer.store(a.reply.sq_size + 3);  // more than the ring holds
    // Unannounced, the daemon never looks at the ring; rung, it finds the ring corrupt.
    for (int i = 0; i < 5; ++i) rig.turn();
    CHECK(a.sq.header().error.load() == 0);
    s.ring(a);
    uint32_t consumed = 0;
    std::vector<abi::AsyncEventEntry> events;
    for (int i = 0; i < 20 && events.empty(); ++i) {
        rig.turn();
        events = s.async_events(consumed);
    }
    REQUIRE(events.size() == 1);
    CHECK(events[0].event_type == 1);
    CHECK(events[0].object == a.qpn);
    CHECK(ClientSession::drain(s.async_fd) == 1);
    CHECK(a.sq.header().error.load() == 1);
    // The posted receive is flushed to the CQ.
    auto cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 5);
    CHECK(cqes[0].status == 5);
    abi::QueryQpRequest q{a.qpn, 0};
    CHECK(rig.call(s.c, Op::QueryQp, q).as<abi::QueryQpReply>().attr.qp_state == 6);

    // RESET starts the rings over: both indices 0, the error flag cleared.
    abi::QpAttr reset{};
    reset.qp_state = 0;
    REQUIRE(s.modify(a.qpn, 1, reset) == 0);
    CHECK(a.sq.header().producer.load() == 0);
    CHECK(a.sq.header().consumer.load() == 0);
    CHECK(a.sq.header().error.load() == 0);
    CHECK(a.rq.header().consumer.load() == 0);
}

TEST_CASE("ModifyQp with a path waits for ARP, then completes with the resolved MAC") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    const wire::Gid peer = wire::Gid::from_ipv4(port::test::kPeerIp);
    abi::ModifyQpRequest m = s.rtr_request(a.qpn, peer, 0);
    m.attr.ah_attr.hop_limit = 1;  // what ibv_rc_pingpong asks for; Linux sends 64 anyway

    SECTION("the peer answers") {
        const uint32_t seq = s.c.send(Op::ModifyQp, &m, sizeof m);
        for (int i = 0; i < 20; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());  // deferred
        REQUIRE(rig.port.sent().size() == 1);
        const auto req = port::parse_arp(rig.port.sent()[0]);
        REQUIRE(req);
        CHECK(req->op == 1);
        CHECK(req->target_ip == port::test::kPeerIp);
        rig.port.inject(port::test::arp_frame(2, port::test::kPeerMac, port::test::kPeerIp, port::test::kSelf.ipv4,
                                              port::test::kSelf.mac, port::test::kSelf.mac));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        Reply q = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0});
        const auto qr = q.as<abi::QueryQpReply>();
        CHECK(qr.attr.qp_state == 2);
        CHECK(std::memcmp(qr.attr.ah_attr.dmac, port::test::kPeerMac.data(), 6) == 0);
        CHECK(std::memcmp(qr.attr.ah_attr.dgid, peer.raw.data(), 16) == 0);
        CHECK(qr.attr.ah_attr.hop_limit == 64);  // the route's hop limit, as Linux resolves it
    }
    SECTION("nobody answers: EHOSTUNREACH after ARP gives up") {
        s.c.send(Op::ModifyQp, &m, sizeof m);
        std::optional<Reply> r;
        for (int i = 0; i < 100 && !r; ++i) {
            rig.turn(100'000'000);  // 100 ms per turn: ARP retries every second, three times
            r = s.c.try_receive();
        }
        REQUIRE(r);
        CHECK(r->header.status == EHOSTUNREACH);
        CHECK(rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0}).as<abi::QueryQpReply>().attr.qp_state == 1);
    }
    SECTION("a destination of the other IP version than the source GID, or no such GID: EINVAL") {
        abi::ModifyQpRequest v6 = m;
        std::memcpy(v6.attr.ah_attr.dgid, wire::Gid::from_ipv6(port::test::kPeerIp6).raw.data(), 16);
        CHECK(rig.call(s.c, Op::ModifyQp, v6).header.status == EINVAL);  // sgid 0 is IPv4
        abi::ModifyQpRequest v4 = m;
        v4.attr.ah_attr.sgid_index = 2;  // fd77::1 towards 10.77.0.2
        CHECK(rig.call(s.c, Op::ModifyQp, v4).header.status == EINVAL);
        v4.attr.ah_attr.sgid_index = 3;
        CHECK(rig.call(s.c, Op::ModifyQp, v4).header.status == EINVAL);
        CHECK(rig.port.sent().empty());  // no neighbour was asked
    }
}

TEST_CASE("ModifyQp and CreateAh towards an IPv6 peer wait for neighbour discovery") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    const wire::Gid peer = wire::Gid::from_ipv6(port::test::kPeerIp6);
    const abi::ModifyQpRequest m = s.rtr_request(a.qpn, peer, 2);  // from fd77::1

    SECTION("the peer answers the solicitation") {
        const uint32_t seq = s.c.send(Op::ModifyQp, &m, sizeof m);
        for (int i = 0; i < 20; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());  // deferred
        REQUIRE(rig.port.sent().size() == 1);
        const auto ns = port::parse_icmp6(rig.port.sent()[0]);
        REQUIRE(ns);
        CHECK(ns->type == 135);
        CHECK(ns->dst == port::solicited_node(port::test::kPeerIp6));
        CHECK(ns->src == port::test::kSelfIp6);
        rig.port.inject(port::test::advertisement(port::test::kPeerIp6, 0x60));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        const auto qr = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0}).as<abi::QueryQpReply>();
        CHECK(qr.attr.qp_state == 2);
        CHECK(std::memcmp(qr.attr.ah_attr.dmac, port::test::kPeerMac.data(), 6) == 0);
        CHECK(std::memcmp(qr.attr.ah_attr.dgid, peer.raw.data(), 16) == 0);
        CHECK(qr.attr.ah_attr.sgid_index == 2);

        // An AH for the same peer is answered at once: the neighbour is known now.
        abi::CreateAhRequest ah{};
        ah.pd = s.pd;
        std::memcpy(ah.av.dgid, peer.raw.data(), 16);
        ah.av.sgid_index = 2;
        CHECK(rig.call(s.c, Op::CreateAh, ah).header.status == 0);
        // Our own link-local address resolves to our MAC without asking anyone.
        std::memcpy(ah.av.dgid, port::test::kSelf.ipv6[0].addr.data(), 16);
        ah.av.sgid_index = 1;
        CHECK(rig.call(s.c, Op::CreateAh, ah).header.status == 0);
        CHECK(rig.port.sent().size() == 1);
    }
    SECTION("nobody answers: EHOSTUNREACH after the solicitations; off-link at once") {
        s.c.send(Op::ModifyQp, &m, sizeof m);
        std::optional<Reply> r;
        for (int i = 0; i < 100 && !r; ++i) {
            rig.turn(100'000'000);
            r = s.c.try_receive();
        }
        REQUIRE(r);
        CHECK(r->header.status == EHOSTUNREACH);
        CHECK(rig.dp.nd().counters().solicitations_sent == 3);
        abi::ModifyQpRequest far = m;
        std::memcpy(far.attr.ah_attr.dgid, wire::Gid::parse("2001:db8::2")->raw.data(), 16);
        CHECK(rig.call(s.c, Op::ModifyQp, far).header.status == EHOSTUNREACH);
    }
    SECTION("CreateAh for an unknown IPv6 peer is deferred the same way") {
        abi::CreateAhRequest ah{};
        ah.pd = s.pd;
        std::memcpy(ah.av.dgid, peer.raw.data(), 16);
        ah.av.sgid_index = 2;
        const uint32_t seq = s.c.send(Op::CreateAh, &ah, sizeof ah);
        for (int i = 0; i < 5; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());
        rig.port.inject(port::test::advertisement(port::test::kPeerIp6, 0x60));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        CHECK(rig.engine.ah_count() == 1);
    }
}

TEST_CASE("the sleeping protocol: a pending doorbell or a kick ends a nap at once") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    rig.turn();
    using Clock = std::chrono::steady_clock;

    // A doorbell rung before the fence is seen by the last scan: no sleep at all.
    s.post_recv(a, 1, reinterpret_cast<uint64_t>(s.buf.data), 64);
    auto t0 = Clock::now();
    rig.host->sleep(2'000'000'000);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(rig.host->status().sleeping.load() == 0);
    rig.turn();

    // Nothing pending: the nap lasts its length.
    t0 = Clock::now();
    rig.host->sleep(20'000'000);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(15));

    // A client that saw `sleeping` writes its session's kick eventfd: the daemon wakes.
    RawClient other(rig.host->socket_path());
    Reply again = rig.hello(other);
    REQUIRE(again.fds.size() == 5);
    // Each session has its own kick eventfd: one client cannot read (and swallow) another's kicks.
    const uint64_t one = 1;
    uint64_t got = 0;
    RawClient third(rig.host->socket_path());
    Reply third_hello = rig.hello(third);
    REQUIRE(third_hello.fds.size() == 5);
    REQUIRE(write(again.fds[1], &one, sizeof one) == sizeof one);
    CHECK(read(third_hello.fds[1], &got, sizeof got) == -1);
    CHECK(errno == EAGAIN);
    for (int i = 0; i < 5; ++i) rig.turn();  // the daemon consumed it
    REQUIRE(write(again.fds[1], &one, sizeof one) == sizeof one);
    t0 = Clock::now();
    rig.host->sleep(2'000'000'000);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(nlohmann::json::parse(rig.host->stats_json())["counters"]["host_kicks"] == 2);
}

TEST_CASE("shutdown: DEVICE_FATAL to every session, QPs flushed into the rings, socket removed") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    s.post_recv(a, 9, reinterpret_cast<uint64_t>(s.buf.data), 64);
    rig.turn();
    const std::string path = rig.host->socket_path();
    rig.host->shutdown(rig.now);
    CHECK(rig.host->status().shutting_down.load() == 1);
    uint32_t consumed = 0;
    const auto events = s.async_events(consumed);
    REQUIRE(events.size() == 1);
    CHECK(events[0].event_type == 8);
    const auto cqes = s.cq.poll();
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 9);
    CHECK(cqes[0].status == 5);
    CHECK(rig.engine.qp_count() == 0);
    CHECK_FALSE(std::filesystem::exists(path));
    auto r = s.c.try_receive();
    REQUIRE(r);
    CHECK(r->eof);
}
