// Every RC operation between two engines over a clean simulated link, data checked byte for
// byte, across sizes and MTUs.
#include <catch2/catch.hpp>

#include <endian.h>

#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::test;

namespace {

constexpr size_t kBuf = (1u << 20) + 8192;

}  // namespace

TEST_CASE("RC SEND/RECV of every size class at every MTU", "[engine][rc]") {
    for (Mtu mtu : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096}) {
        for (uint32_t size : {0u, 1u, 255u, 256u, 257u, 1024u, 4095u, 4096u, 4097u, 65536u, 1u << 20}) {
            INFO("mtu " << mtu_bytes(mtu) << " size " << size);
            TwoNodes t(1);
            t.setup(kBuf);
            QpOptions o;
            o.mtu = mtu;
            t.connect(o);
            fill_pattern(t.a.buf, size);
            RecvWr rwr{7, {{t.b.addr(), static_cast<uint32_t>(kBuf), t.b.mr.lkey}}};
            REQUIRE(t.b.e().post_recv(t.b.qpn, rwr) == 0);
            REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), size, t.a.mr.lkey}})) == 0);
            auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
            auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(rc.size() == 1);
            REQUIRE(sc.size() == 1);
            CHECK(rc[0].status == WcStatus::Success);
            CHECK(rc[0].opcode == WcOpcode::Recv);
            CHECK(rc[0].byte_len == size);
            CHECK(rc[0].wr_id == 7);
            CHECK(sc[0].status == WcStatus::Success);
            CHECK(sc[0].opcode == WcOpcode::Send);
            REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data(), size) == 0);
        }
    }
}

TEST_CASE("RC RDMA WRITE, WRITE with immediate and READ at every MTU", "[engine][rc]") {
    for (Mtu mtu : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096})
    for (uint32_t size : {0u, 1u, 1000u, 1024u, 5000u, 65536u, 1u << 20}) {
        INFO("mtu " << mtu_bytes(mtu) << " size " << size);
        TwoNodes t(2);
        t.setup(kBuf);
        QpOptions o;
        o.mtu = mtu;
        t.connect(o);
        fill_pattern(t.a.buf, size + 1);
        // WRITE a -> b
        SendWr w = make_wr(WrOpcode::RdmaWrite, 11, {{t.a.addr(), size, t.a.mr.lkey}});
        w.remote_addr = t.b.addr(16);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(sc[0].opcode == WcOpcode::RdmaWrite);
        REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data() + 16, size) == 0);

        // WRITE with immediate consumes a receive and reports the immediate and length.
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{99, {}}) == 0);
        SendWr wi = w;
        wi.opcode = WrOpcode::RdmaWriteWithImm;
        wi.imm_data = 0xDEADBEEF;
        wi.remote_addr = t.b.addr(32);
        REQUIRE(t.a.e().post_send(t.a.qpn, wi) == 0);
        auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
        REQUIRE(rc.size() == 1);
        CHECK(rc[0].status == WcStatus::Success);
        CHECK(rc[0].opcode == WcOpcode::RecvRdmaWithImm);
        CHECK(rc[0].imm_data == 0xDEADBEEF);
        CHECK((rc[0].wc_flags & WcFlag::WithImm) != 0);
        CHECK(rc[0].byte_len == size);
        REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data() + 32, size) == 0);
        t.wait_cq(t.a, t.a.send_cq, 1);

        // READ b -> a's buffer at offset
        fill_pattern(t.b.buf, size + 2, 0, size);
        SendWr r = make_wr(WrOpcode::RdmaRead, 12, {{t.a.addr(8), size, t.a.mr.lkey}});
        r.remote_addr = t.b.addr();
        r.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
        sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(sc[0].opcode == WcOpcode::RdmaRead);
        CHECK(sc[0].byte_len == size);
        REQUIRE(std::memcmp(t.a.buf.data() + 8, t.b.buf.data(), size) == 0);
    }
}

// ibv_send_wr.imm_data and ibv_wc.imm_data are __be32: the bytes the application stores are the
// bytes on the wire (rdma-core's rsockets put an op code in the top bits; rxe's capture of
// rstream shows 0x80000180 for its first credits message).
TEST_CASE("RC WRITE with immediate: the immediate's bytes go on the wire as the WR holds them", "[engine][rc]") {
    TwoNodes t(4);
    std::vector<std::vector<uint8_t>> sent;
    t.sim.set_trace([&](const rnic::sim::TraceEvent& e) {
        if (e.kind == rnic::sim::TraceKind::kSent) sent.emplace_back(e.frame.begin(), e.frame.end());
    });
    t.setup(4096);
    t.connect();
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{5, {}}) == 0);
    SendWr w = make_wr(WrOpcode::RdmaWriteWithImm, 9, {});
    w.imm_data = htobe32(0x80000180);
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].imm_data == htobe32(0x80000180));
    size_t seen = 0;
    for (const auto& bytes : sent) {
        const auto f = rnic::wire::parse_frame(bytes);
        REQUIRE(f);
        if (!f->ext.immdt) continue;
        ++seen;
        CHECK(f->ext.immdt->value == 0x80000180);
        const uint8_t expected[4] = {0x80, 0x00, 0x01, 0x80};
        CHECK(std::memcmp(bytes.data() + (bytes.size() - f->payload.size() - f->pad.size() - 4 - 4), expected, 4) == 0);
    }
    CHECK(seen == 1);
}

TEST_CASE("RC atomics: compare-and-swap and fetch-and-add return the original value", "[engine][rc]") {
    TwoNodes t(3);
    t.setup(4096);
    t.connect();
    uint64_t initial = 100;
    std::memcpy(t.b.buf.data() + 64, &initial, 8);

    SendWr faa = make_wr(WrOpcode::AtomicFetchAndAdd, 1, {{t.a.addr(), 8, t.a.mr.lkey}});
    faa.remote_addr = t.b.addr(64);
    faa.rkey = t.b.mr.rkey;
    faa.compare_add = 5;
    REQUIRE(t.a.e().post_send(t.a.qpn, faa) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(sc[0].opcode == WcOpcode::FetchAdd);
    uint64_t v;
    std::memcpy(&v, t.a.buf.data(), 8);
    CHECK(v == 100);
    std::memcpy(&v, t.b.buf.data() + 64, 8);
    CHECK(v == 105);

    SendWr cas = make_wr(WrOpcode::AtomicCmpAndSwp, 2, {{t.a.addr(8), 8, t.a.mr.lkey}});
    cas.remote_addr = t.b.addr(64);
    cas.rkey = t.b.mr.rkey;
    cas.compare_add = 105;
    cas.swap = 7;
    REQUIRE(t.a.e().post_send(t.a.qpn, cas) == 0);
    cas.wr_id = 3;  // compare fails now: 7 != 105
    cas.sg_list[0].addr = t.a.addr(16);
    REQUIRE(t.a.e().post_send(t.a.qpn, cas) == 0);
    sc = t.wait_cq(t.a, t.a.send_cq, 2);
    REQUIRE(sc.size() == 2);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(sc[0].opcode == WcOpcode::CompSwap);
    std::memcpy(&v, t.a.buf.data() + 8, 8);
    CHECK(v == 105);
    std::memcpy(&v, t.a.buf.data() + 16, 8);
    CHECK(v == 7);
    std::memcpy(&v, t.b.buf.data() + 64, 8);
    CHECK(v == 7);
}

TEST_CASE("RC SEND with immediate and with invalidate", "[engine][rc]") {
    TwoNodes t(4);
    t.setup(8192);
    t.connect();
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(), 4096, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{2, {{t.b.addr(), 4096, t.b.mr.lkey}}}) == 0);
    SendWr s = make_wr(WrOpcode::SendWithImm, 1, {{t.a.addr(), 100, t.a.mr.lkey}});
    s.imm_data = 0x01020304;
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    // b registers a second region and has a invalidate it remotely.
    std::vector<uint8_t> extra(4096);
    auto mr2 = t.b.e().reg_mr(t.b.pd, extra.data(), extra.size(), reinterpret_cast<uint64_t>(extra.data()), 0xF);
    REQUIRE(mr2);
    SendWr inv = make_wr(WrOpcode::SendWithInv, 2, {{t.a.addr(), 10, t.a.mr.lkey}});
    inv.invalidate_rkey = mr2->rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, inv) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 2);
    REQUIRE(rc.size() == 2);
    CHECK(rc[0].imm_data == 0x01020304);
    CHECK((rc[0].wc_flags & WcFlag::WithImm) != 0);
    CHECK((rc[1].wc_flags & WcFlag::WithInv) != 0);
    CHECK(rc[1].imm_data == mr2->rkey);
    // The invalidated rkey no longer works: a WRITE to it fails with a remote access error.
    t.wait_cq(t.a, t.a.send_cq, 2);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 3, {{t.a.addr(), 8, t.a.mr.lkey}});
    w.remote_addr = reinterpret_cast<uint64_t>(extra.data());
    w.rkey = mr2->rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::RemAccessErr);
}

TEST_CASE("scatter/gather lists, inline data and unsignaled completions", "[engine][rc]") {
    TwoNodes t(5);
    t.setup(65536);
    t.connect();
    fill_pattern(t.a.buf, 21);
    // Gather from three pieces into one SEND, scatter into three receive pieces of other sizes.
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(0), 1000, t.b.mr.lkey},
                                                   {t.b.addr(5000), 3000, t.b.mr.lkey},
                                                   {t.b.addr(20000), 8000, t.b.mr.lkey}}}) == 0);
    SendWr s = make_wr(WrOpcode::Send, 1, {{t.a.addr(100), 2500, t.a.mr.lkey},
                                           {t.a.addr(9000), 1, t.a.mr.lkey},
                                           {t.a.addr(30000), 4000, t.a.mr.lkey}},
                       0 /* unsignaled */);
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    // Inline: the bytes are copied at post time; changing the buffer afterwards must not matter.
    SendWr inl = make_wr(WrOpcode::RdmaWrite, 2, {}, SendFlag::Signaled | SendFlag::Inline);
    inl.inline_data.assign(t.a.buf.begin(), t.a.buf.begin() + 100);
    inl.remote_addr = t.b.addr(40000);
    inl.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, inl) == 0);
    const std::vector<uint8_t> inline_copy(t.a.buf.begin(), t.a.buf.begin() + 100);
    std::fill(t.a.buf.begin(), t.a.buf.begin() + 100, 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);  // only the signaled WRITE completes
    CHECK(sc[0].wr_id == 2);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].byte_len == 6501);
    std::vector<uint8_t> sent, got;
    sent.insert(sent.end(), t.a.buf.begin() + 100, t.a.buf.begin() + 2600);
    sent.push_back(t.a.buf[9000]);
    sent.insert(sent.end(), t.a.buf.begin() + 30000, t.a.buf.begin() + 34000);
    got.insert(got.end(), t.b.buf.begin(), t.b.buf.begin() + 1000);
    got.insert(got.end(), t.b.buf.begin() + 5000, t.b.buf.begin() + 8000);
    got.insert(got.end(), t.b.buf.begin() + 20000, t.b.buf.begin() + 22501);
    CHECK(got == sent);
    CHECK(std::equal(inline_copy.begin(), inline_copy.end(), t.b.buf.begin() + 40000));
    // A receive too small for the message: local length error at the responder, the sender
    // sees the invalid request NAK (IBA class B error).
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{3, {{t.b.addr(0), 10, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 4, {{t.a.addr(0), 100, t.a.mr.lkey}})) == 0);
    rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::LocLenErr);
    sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::RemInvReqErr);
}

TEST_CASE("LOCAL_INV and local protection errors", "[engine][rc]") {
    TwoNodes t(6);
    t.setup(8192);
    t.connect();
    std::vector<uint8_t> extra(4096);
    auto mr = t.a.e().reg_mr(t.a.pd, extra.data(), extra.size(), reinterpret_cast<uint64_t>(extra.data()), 0xF);
    REQUIRE(mr);
    SendWr inv = make_wr(WrOpcode::LocalInv, 1, {});
    inv.invalidate_rkey = mr->lkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, inv) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(sc[0].opcode == WcOpcode::LocalInv);
    // The invalidated lkey no longer works locally: local protection error, QP to error.
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 2, {{reinterpret_cast<uint64_t>(extra.data()), 8, mr->lkey}})) == 0);
    sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::LocProtErr);
    QpAttributes attr;
    REQUIRE(t.a.e().query_qp(t.a.qpn, attr) == 0);
    CHECK(attr.qp_state == QpState::Err);
}

TEST_CASE("device and port attributes", "[engine]") {
    TwoNodes t(7);
    const DeviceAttributes d = t.a.e().query_device();
    CHECK(d.atomic_cap == AtomicCap::Hca);
    CHECK(d.limits.max_qp_rd_atom > 0);
    CHECK(d.limits.max_sge > 1);
    const PortAttributes p = t.a.e().query_port();
    CHECK(p.active);
    CHECK(p.active_mtu == Mtu::Mtu4096);
    CHECK(p.gid_tbl_len == 3);
    CHECK(t.a.e().gids()[0].to_string() == "::ffff:10.0.0.1");
}

TEST_CASE("SQD: new work waits, the drain is announced, RTS resumes", "[engine][rc]") {
    TwoNodes t(8);
    t.setup(8192);
    t.connect();
    QpAttributes attr;
    attr.qp_state = QpState::Sqd;
    attr.en_sqd_async_notify = 1;
    REQUIRE(t.a.e().modify_qp(t.a.qpn, attr, QpAttr::State | QpAttr::EnSqdAsyncNotify) == 0);
    AsyncEvent ev;
    REQUIRE(t.a.e().poll_async_event(ev));
    CHECK(ev.type == EventType::SqDrained);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), 64, t.a.mr.lkey}});
    w.remote_addr = t.b.addr();
    w.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    CHECK(t.wait_cq(t.a, t.a.send_cq, 1, 1'000'000).empty());  // not started while drained
    attr.qp_state = QpState::Rts;
    REQUIRE(t.a.e().modify_qp(t.a.qpn, attr, QpAttr::State) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
}

TEST_CASE("query_qp reports the live PSNs, not the ones ModifyQp set", "[engine][rc]") {
    // The PSNs start just below the wrap, so the values read back must wrap as the wire does.
    TwoNodes t(8);
    t.setup(kBuf);
    QpOptions o;
    o.mtu = Mtu::Mtu1024;
    o.sq_psn = 0xFFFFFE;  // A sends from here, B expects it
    o.rq_psn = 0x345;     // and the other way round
    t.connect(o);
    auto psns = [](Endpoint& ep) {
        QpAttributes a;
        REQUIRE(ep.e().query_qp(ep.qpn, a) == 0);
        return std::pair{a.sq_psn, a.rq_psn};
    };
    CHECK(psns(t.a) == std::pair<uint32_t, uint32_t>{0xFFFFFE, 0x345});
    CHECK(psns(t.b) == std::pair<uint32_t, uint32_t>{0x345, 0xFFFFFE});

    // A 3-packet SEND, a 1-packet WRITE and a 2-packet READ from A: six PSNs.
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(), 4096, t.b.mr.lkey}}}) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 2500, t.a.mr.lkey}})) == 0);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 2, {{t.a.addr(), 100, t.a.mr.lkey}});
    w.remote_addr = t.b.addr(8192);
    w.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    SendWr r = make_wr(WrOpcode::RdmaRead, 3, {{t.a.addr(16384), 2048, t.a.mr.lkey}});
    r.remote_addr = t.b.addr();
    r.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    REQUIRE(t.wait_cq(t.a, t.a.send_cq, 3).size() == 3);
    REQUIRE(t.wait_cq(t.b, t.b.recv_cq, 1).size() == 1);

    CHECK(psns(t.a) == std::pair<uint32_t, uint32_t>{0x000004, 0x345});
    CHECK(psns(t.b) == std::pair<uint32_t, uint32_t>{0x345, 0x000004});  // ACKs take no PSN of B's
    const auto seq = t.a.e().qp_sequence(t.a.qpn);
    REQUIRE(seq);
    CHECK(seq->next_psn == 0x000004);
    CHECK(seq->unacked_psn == 0x000004);  // everything acknowledged
    CHECK(seq->expected_psn == 0x345);
    CHECK_FALSE(t.a.e().qp_sequence(0xABCDEF));
}

TEST_CASE("the oldest unacknowledged PSN stays behind while the peer is silent", "[engine][rc]") {
    rnic::sim::LinkConfig link;
    link.down = true;
    TwoNodes t(9, link);
    t.setup(65536);
    QpOptions o;
    o.timeout = 14;  // 67 ms: no retry inside the test's window
    t.connect(o);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 3000, t.a.mr.lkey}})) == 0);
    t.run_until([] { return false; }, 1'000'000);
    const auto seq = t.a.e().qp_sequence(t.a.qpn);
    REQUIRE(seq);
    CHECK(seq->next_psn == o.sq_psn + 3);
    CHECK(seq->unacked_psn == o.sq_psn);
    QpAttributes b;
    REQUIRE(t.b.e().query_qp(t.b.qpn, b) == 0);
    CHECK(b.rq_psn == o.sq_psn);  // nothing arrived
}
