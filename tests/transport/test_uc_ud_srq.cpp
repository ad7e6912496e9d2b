// UC, UD and SRQ semantics between two engines.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

TEST_CASE("UC SEND and WRITE at every MTU, no ACKs on the wire", "[engine][uc]") {
    for (Mtu mtu : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096}) {
        for (uint32_t size : {0u, 1u, 4096u, 10000u, 1u << 20}) {
            INFO("mtu " << mtu_bytes(mtu) << " size " << size);
            TwoNodes t(10);
            t.setup((1u << 20) + 4096);
            QpOptions o;
            o.type = QpType::Uc;
            o.mtu = mtu;
            t.connect(o);
            fill_pattern(t.a.buf, size + 3);
            REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{5, {{t.b.addr(), static_cast<uint32_t>(t.b.buf.size()), t.b.mr.lkey}}}) == 0);
            REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), size, t.a.mr.lkey}})) == 0);
            auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
            REQUIRE(rc.size() == 1);
            CHECK(rc[0].status == WcStatus::Success);
            CHECK(rc[0].byte_len == size);
            REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data(), size) == 0);
            auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(sc.size() == 1);
            CHECK(sc[0].status == WcStatus::Success);

            std::fill(t.b.buf.begin(), t.b.buf.end(), 0);
            SendWr w = make_wr(WrOpcode::RdmaWrite, 2, {{t.a.addr(), size, t.a.mr.lkey}});
            w.remote_addr = t.b.addr();
            w.rkey = t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
            sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(sc.size() == 1);
            t.run_until([] { return false; }, 1'000'000);
            REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data(), size) == 0);
            CHECK(t.b.e().qp_counters(t.b.qpn)->acks_sent == 0);
        }
    }
}

TEST_CASE("UC: a lost packet loses its message, the next message arrives intact", "[engine][uc]") {
    sim::LinkConfig link;
    int dropped = 0;
    link.drop_filter = [&](std::span<const uint8_t> f) {
        // Drop the second packet of the first message a sends (the UC_SEND_MIDDLE).
        return f.size() > 60 && f[6 + 5] == 1 && f[42] == 0x21 && dropped++ == 0;
    };
    TwoNodes t(11, link);
    t.setup(65536);
    QpOptions o;
    o.type = QpType::Uc;
    o.mtu = Mtu::Mtu1024;
    t.connect(o);
    fill_pattern(t.a.buf, 77);
    for (uint64_t i = 0; i < 2; ++i)
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{i, {{t.b.addr(i * 8192), 8192, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 3000, t.a.mr.lkey}})) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 2, {{t.a.addr(4096), 2000, t.a.mr.lkey}})) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(dropped == 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].wr_id == 0);  // the first receive WQE is reused by the second message
    CHECK(rc[0].byte_len == 2000);
    REQUIRE(std::memcmp(t.a.buf.data() + 4096, t.b.buf.data(), 2000) == 0);
    CHECK(t.b.e().qp_counters(t.b.qpn)->uc_dropped_messages >= 1);
}

TEST_CASE("The immediate: ibv_send_wr's bytes on the wire, the wire's in ibv_wc", "[engine][ud]") {
    // imm_data is __be32 in ibv_send_wr and ibv_wc: its bytes in memory are the wire's. rxe
    // sends udaddy's QPN 0x11 (htobe32) as 00 00 00 11, and udaddy reads it back with be32toh.
    const std::vector<uint8_t> bytes{0x00, 0x01, 0x00, 0x15};
    std::vector<uint8_t> on_wire;
    sim::LinkConfig link;
    link.drop_filter = [&](std::span<const uint8_t> f) {
        if (auto p = rnic::wire::parse_frame(f); p && p->ext.immdt) {
            on_wire.resize(4);
            rnic::wire::store_be32(on_wire.data(), p->ext.immdt->value);
        }
        return false;
    };
    TwoNodes t(13, link);
    t.setup(8192);
    QpOptions o;
    o.type = QpType::Ud;
    t.connect(o);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(), 40 + 64, t.b.mr.lkey}}}) == 0);
    SendWr s = make_wr(WrOpcode::SendWithImm, 9, {{t.a.addr(), 64, t.a.mr.lkey}});
    s.ah = t.ah_a_to_b;
    s.remote_qpn = t.b.qpn;
    s.remote_qkey = o.qkey;
    std::memcpy(&s.imm_data, bytes.data(), 4);
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK((rc[0].wc_flags & WcFlag::WithImm) != 0);
    CHECK(on_wire == bytes);
    std::vector<uint8_t> completed(4);
    std::memcpy(completed.data(), &rc[0].imm_data, 4);
    CHECK(completed == bytes);
}

TEST_CASE("UD SEND: Q_Key, GRH in the receive buffer, source QP", "[engine][ud]") {
    TwoNodes t(12);
    t.setup(8192);
    QpOptions o;
    o.type = QpType::Ud;
    t.connect(o);
    fill_pattern(t.a.buf, 5);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(), 40 + 1024, t.b.mr.lkey}}}) == 0);
    SendWr s = make_wr(WrOpcode::SendWithImm, 9, {{t.a.addr(), 1024, t.a.mr.lkey}});
    s.ah = t.ah_a_to_b;
    s.remote_qpn = t.b.qpn;
    s.remote_qkey = o.qkey;
    s.imm_data = 42;
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
    CHECK(rc[0].byte_len == 40 + 1024);
    CHECK(rc[0].src_qp == t.a.qpn);
    CHECK((rc[0].wc_flags & WcFlag::Grh) != 0);
    CHECK(rc[0].imm_data == 42);
    // IPv4 RoCEv2 GRH: 20 zero bytes, then the IPv4 header (version 4, source 10.0.0.1).
    CHECK(t.b.buf[20] == 0x45);
    CHECK(t.b.buf[20 + 12] == 10);
    CHECK(t.b.buf[20 + 15] == 1);
    REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data() + 40, 1024) == 0);

    // A wrong Q_Key is dropped silently and counted; larger than the port MTU is refused at post.
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{2, {{t.b.addr(), 40 + 1024, t.b.mr.lkey}}}) == 0);
    s.remote_qkey = 0x1234;
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    t.run_until([] { return false; }, 1'000'000);
    CHECK(t.b.e().qp_counters(t.b.qpn)->ud_qkey_violations == 1);
    WorkCompletion wc[1];
    CHECK(t.b.e().poll_cq(t.b.recv_cq, wc) == 0);
    SendWr big = s;  // UD messages end at the port MTU (4096 here)
    big.sg_list[0].length = 4097;
    CHECK(t.a.e().post_send(t.a.qpn, big) == EINVAL);
}

TEST_CASE("SRQ: receives shared by two QPs, limit event", "[engine][srq]") {
    TwoNodes t(13);
    t.setup(65536);
    const uint32_t srq = *t.b.e().create_srq(t.b.pd, SrqAttributes{64, 1, 0});
    QpOptions o;
    o.srq_b = srq;
    t.connect(o);
    for (uint64_t i = 0; i < 8; ++i)
        REQUIRE(t.b.e().post_srq_recv(srq, RecvWr{100 + i, {{t.b.addr(i * 1024), 1024, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.b.e().modify_srq(srq, 4) == 0);
    CHECK(t.b.e().post_recv(t.b.qpn, RecvWr{1, {}}) == EINVAL);  // a QP with an SRQ has no RQ
    fill_pattern(t.a.buf, 9);
    for (uint64_t i = 0; i < 6; ++i)
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, i, {{t.a.addr(i * 100), 100, t.a.mr.lkey}})) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 6);
    REQUIRE(rc.size() == 6);
    for (size_t i = 0; i < 6; ++i) {
        CHECK(rc[i].wr_id == 100 + i);
        REQUIRE(std::memcmp(t.a.buf.data() + i * 100, t.b.buf.data() + i * 1024, 100) == 0);
    }
    AsyncEvent ev;
    REQUIRE(t.b.e().poll_async_event(ev));
    CHECK(ev.type == EventType::SrqLimitReached);
    CHECK(ev.object == srq);
    CHECK_FALSE(t.b.e().poll_async_event(ev));  // fires once until re-armed
}

TEST_CASE("UD at every MTU: sizes up to the MTU, a send-side error moves UD to SQE, receiving goes on", "[engine][ud]") {
    for (Mtu mtu : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096}) {
        const uint32_t m = mtu_bytes(mtu);
        TwoNodes t(14);
        t.setup(3 * 8192);
        QpOptions o;
        o.type = QpType::Ud;
        o.mtu = mtu;
        t.connect(o);
        fill_pattern(t.a.buf, m);
        for (uint32_t size : {0u, 1u, m}) {
            INFO("mtu " << m << " size " << size);
            REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{size, {{t.b.addr(), 40 + 4096, t.b.mr.lkey}}}) == 0);
            SendWr s = make_wr(WrOpcode::Send, size, {{t.a.addr(), size, t.a.mr.lkey}});
            s.ah = t.ah_a_to_b;
            s.remote_qpn = t.b.qpn;
            s.remote_qkey = o.qkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
            auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
            REQUIRE(rc.size() == 1);
            CHECK(rc[0].byte_len == 40 + size);
            REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data() + 40, size) == 0);
            REQUIRE(t.wait_cq(t.a, t.a.send_cq, 1).size() == 1);
        }
    }
    TwoNodes t(15);
    t.setup(8192);
    QpOptions o;
    o.type = QpType::Ud;
    t.connect(o);
    SendWr bad = make_wr(WrOpcode::Send, 1, {{t.a.addr(), 8, t.a.mr.lkey + 1}});
    bad.ah = t.ah_a_to_b;
    bad.remote_qpn = t.b.qpn;
    bad.remote_qkey = o.qkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, bad) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::LocProtErr);
    QpAttributes attr;
    REQUIRE(t.a.e().query_qp(t.a.qpn, attr) == 0);
    CHECK(attr.qp_state == QpState::Sqe);
    // Still receives.
    REQUIRE(t.a.e().post_recv(t.a.qpn, RecvWr{9, {{t.a.addr(), 40 + 64, t.a.mr.lkey}}}) == 0);
    SendWr back = make_wr(WrOpcode::Send, 2, {{t.b.addr(), 64, t.b.mr.lkey}});
    back.ah = t.ah_b_to_a;
    back.remote_qpn = t.a.qpn;
    back.remote_qkey = o.qkey;
    REQUIRE(t.b.e().post_send(t.b.qpn, back) == 0);
    auto rc = t.wait_cq(t.a, t.a.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
}

TEST_CASE("SRQ with multi-packet SENDs up to 1 MiB", "[engine][srq]") {
    TwoNodes t(16);
    t.setup(3u << 20);
    const uint32_t srq = *t.b.e().create_srq(t.b.pd, SrqAttributes{16, 1, 0});
    QpOptions o;
    o.srq_b = srq;
    o.mtu = Mtu::Mtu4096;
    t.connect(o);
    fill_pattern(t.a.buf, 33);
    const uint32_t sizes[] = {0, 4096, 4097, 1u << 20};
    for (uint64_t i = 0; i < 4; ++i)
        REQUIRE(t.b.e().post_srq_recv(srq, RecvWr{i, {{t.b.addr(), 1u << 20, t.b.mr.lkey}}}) == 0);
    for (uint64_t i = 0; i < 4; ++i) {
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, i, {{t.a.addr(i * 1000), sizes[i], t.a.mr.lkey}})) == 0);
        auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
        REQUIRE(rc.size() == 1);
        CHECK(rc[0].byte_len == sizes[i]);
        REQUIRE(std::memcmp(t.a.buf.data() + i * 1000, t.b.buf.data(), sizes[i]) == 0);
    }
}

TEST_CASE("UD sends posted through an AH go out to its address after the AH is destroyed and its slot reused",
          "[engine][ud]") {
    // Providers copy the address vector into the WQE at post time, so destroying an AH with sends
    // still queued behind it is legal and they complete normally. Before the engine copied it the
    // queued sends read the destroyed AH (a crash, or the next AH's address once reused).
    TwoNodes t(21);
    t.setup(64 * 1024);
    QpOptions o;
    o.type = QpType::Ud;
    t.connect(o);
    constexpr uint32_t kSends = 100, kBytes = 256;
    fill_pattern(t.a.buf, 8);
    for (uint32_t i = 0; i < kSends; ++i)
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{i, {{t.b.addr(i * (40 + kBytes)), 40 + kBytes, t.b.mr.lkey}}}) == 0);
    for (uint32_t i = 0; i < kSends; ++i) {
        SendWr s = make_wr(WrOpcode::Send, 1000 + i, {{t.a.addr(i * kBytes), kBytes, t.a.mr.lkey}});
        s.ah = t.ah_a_to_b;
        s.remote_qpn = t.b.qpn;
        s.remote_qkey = o.qkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    }
    // Ten go out; the other ninety are still queued when the AH goes and a new one, to nowhere,
    // takes its slot.
    std::vector<std::vector<uint8_t>> first;
    VectorSink sink(first);
    REQUIRE(t.a.e().transmit(sink, t.sim.now(), 10) == 10);
    REQUIRE(t.a.e().destroy_ah(t.ah_a_to_b) == 0);
    AddressVector nowhere;
    nowhere.dgid = rnic::wire::Gid::from_ipv4(0x0A000063);
    nowhere.dmac = {0x02, 0, 0, 0, 0, 0x63};
    const auto other = t.a.e().create_ah(t.a.pd, nowhere);
    REQUIRE(other);
    for (const auto& f : first) t.sim.send(t.id_a, f);

    const auto sent = t.wait_cq(t.a, t.a.send_cq, kSends);
    const auto received = t.wait_cq(t.b, t.b.recv_cq, kSends);
    REQUIRE(sent.size() == kSends);
    REQUIRE(received.size() == kSends);
    for (uint32_t i = 0; i < kSends; ++i) {
        INFO(describe(sent[i]) << " / " << describe(received[i]));
        CHECK(sent[i].status == WcStatus::Success);
        CHECK(sent[i].wr_id == 1000 + i);
        CHECK(received[i].status == WcStatus::Success);
        CHECK(received[i].wr_id == i);
        CHECK(received[i].byte_len == 40 + kBytes);
        CHECK(std::memcmp(t.b.buf.data() + i * (40 + kBytes) + 40, t.a.buf.data() + i * kBytes, kBytes) == 0);
    }
    CHECK(t.sim.counters().unroutable == 0);
}
