// RC under loss, duplication and reordering; RNR; a dead peer; protection errors; PSN wrap.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "engine_fixture.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

namespace {

struct Faults {
    double loss = 0, dup = 0, reorder = 0;
};

sim::LinkConfig faulty(Faults f) {
    sim::LinkConfig l;
    l.latency_ns = 2000;
    l.loss_probability = f.loss;
    l.duplicate_probability = f.dup;
    l.duplicate_delay_max_ns = 50'000;
    l.reorder_probability = f.reorder;
    l.reorder_delay_min_ns = 1000;
    l.reorder_delay_max_ns = 20'000;
    return l;
}

// Sends `count` messages of mixed sizes a -> b (SEND) and checks each arrives once, in order,
// byte for byte; then WRITEs and READs; then atomics applied exactly once.
void exercise(uint64_t seed, Faults f, uint32_t count) {
    INFO("seed=" << seed << " loss=" << f.loss << " dup=" << f.dup << " reorder=" << f.reorder);
    TwoNodes t(seed, faulty(f));
    const size_t slot = 16384;
    t.setup(slot * count * 2 + 65536);
    QpOptions o;
    o.timeout = 8;  // ~1 ms
    o.retry_cnt = 7;
    t.connect(o);
    fill_pattern(t.a.buf, static_cast<uint32_t>(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<uint32_t> sizes(count);
    for (uint32_t i = 0; i < count; ++i) {
        sizes[i] = rng() % slot;
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{i, {{t.b.addr(i * slot), static_cast<uint32_t>(slot), t.b.mr.lkey}}}) == 0);
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, i, {{t.a.addr(i * slot), sizes[i], t.a.mr.lkey}})) == 0);
    }
    auto rc = t.wait_cq(t.b, t.b.recv_cq, count, 60'000'000'000ull);
    auto sc = t.wait_cq(t.a, t.a.send_cq, count, 60'000'000'000ull);
    REQUIRE(rc.size() == count);
    REQUIRE(sc.size() == count);
    for (uint32_t i = 0; i < count; ++i) {
        INFO("message " << i << " " << describe(rc[i]));
        REQUIRE(rc[i].status == WcStatus::Success);
        REQUIRE(rc[i].wr_id == i);
        REQUIRE(rc[i].byte_len == sizes[i]);
        REQUIRE(sc[i].status == WcStatus::Success);
        REQUIRE(sc[i].wr_id == i);
        REQUIRE(std::memcmp(t.a.buf.data() + i * slot, t.b.buf.data() + i * slot, sizes[i]) == 0);
    }
    // READ back what b received into a fresh area of a, and WRITE it to the upper half of b.
    const size_t half = slot * count;
    SendWr r = make_wr(WrOpcode::RdmaRead, 1000, {{t.a.addr(half), static_cast<uint32_t>(half), t.a.mr.lkey}});
    r.remote_addr = t.b.addr();
    r.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 1001, {{t.a.addr(), static_cast<uint32_t>(half), t.a.mr.lkey}});
    w.remote_addr = t.b.addr(half);
    w.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    // Atomics: 50 fetch-and-adds of 1 must leave exactly +50, each seeing a distinct value.
    const size_t counter_off = 2 * half;
    std::memset(t.b.buf.data() + counter_off, 0, 8);
    for (uint32_t i = 0; i < 50; ++i) {
        SendWr faa = make_wr(WrOpcode::AtomicFetchAndAdd, 2000 + i, {{t.a.addr(counter_off + 8 + i * 8), 8, t.a.mr.lkey}});
        faa.remote_addr = t.b.addr(counter_off);
        faa.rkey = t.b.mr.rkey;
        faa.compare_add = 1;
        REQUIRE(t.a.e().post_send(t.a.qpn, faa) == 0);
    }
    sc = t.wait_cq(t.a, t.a.send_cq, 52, 60'000'000'000ull);
    REQUIRE(sc.size() == 52);
    for (const auto& wc : sc) {
        INFO(describe(wc));
        REQUIRE(wc.status == WcStatus::Success);
    }
    REQUIRE(std::memcmp(t.a.buf.data() + half, t.b.buf.data(), half) == 0);
    REQUIRE(std::memcmp(t.a.buf.data(), t.b.buf.data() + half, half) == 0);
    uint64_t counter;
    std::memcpy(&counter, t.b.buf.data() + counter_off, 8);
    REQUIRE(counter == 50);
    std::vector<bool> seen(50);
    for (uint32_t i = 0; i < 50; ++i) {
        uint64_t v;
        std::memcpy(&v, t.a.buf.data() + counter_off + 8 + i * 8, 8);
        REQUIRE(v == i);  // in order, each applied once
    }
    const QpCounters* ca = t.a.e().qp_counters(t.a.qpn);
    if (f.loss > 0) CHECK(ca->retransmits > 0);
}

}  // namespace

TEST_CASE("RC delivers exactly once and in order under loss", "[engine][faults]") {
    exercise(101, {0.01, 0, 0}, 60);
    exercise(102, {0.05, 0, 0}, 60);
    exercise(103, {0.20, 0, 0}, 40);
}

TEST_CASE("RC under duplication and reordering", "[engine][faults]") {
    exercise(104, {0, 0.05, 0}, 60);
    exercise(105, {0, 0, 0.05}, 60);
    exercise(106, {0.02, 0.02, 0.02}, 60);
}

TEST_CASE("PSN wrap: start just below 2^24", "[engine][rc]") {
    TwoNodes t(20, faulty({0.02, 0, 0}));
    t.setup(1 << 20);
    QpOptions o;
    o.sq_psn = 0xFFFFF0;
    o.rq_psn = 0xFFFFFA;
    o.mtu = Mtu::Mtu256;
    o.timeout = 8;
    t.connect(o);
    fill_pattern(t.a.buf, 3);
    for (uint32_t i = 0; i < 8; ++i)
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{i, {{t.b.addr(i * 8192), 8192, t.b.mr.lkey}}}) == 0);
    for (uint32_t i = 0; i < 8; ++i)
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, i, {{t.a.addr(i * 8192), 5000, t.a.mr.lkey}})) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 8);
    REQUIRE(rc.size() == 8);
    for (uint32_t i = 0; i < 8; ++i) {
        REQUIRE(rc[i].status == WcStatus::Success);
        REQUIRE(std::memcmp(t.a.buf.data() + i * 8192, t.b.buf.data() + i * 8192, 5000) == 0);
    }
    // And back the other way, across b's wrap.
    SendWr r = make_wr(WrOpcode::RdmaRead, 99, {{t.a.addr(1 << 19), 100000, t.a.mr.lkey}});
    r.remote_addr = t.b.addr();
    r.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 9);
    REQUIRE(sc.size() == 9);
    CHECK(sc[8].status == WcStatus::Success);
    REQUIRE(std::memcmp(t.a.buf.data() + (1 << 19), t.b.buf.data(), 100000) == 0);
}

TEST_CASE("RNR: a SEND waits for a receive, then succeeds", "[engine][rnr]") {
    TwoNodes t(30);
    t.setup(4096);
    QpOptions o;
    o.rnr_retry = 7;  // infinite
    o.min_rnr_timer = 1;
    t.connect(o);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 64, t.a.mr.lkey}})) == 0);
    t.run_until([] { return false; }, 200'000);  // 200 us: several RNR rounds
    CHECK(t.b.e().qp_counters(t.b.qpn)->rnr_naks_sent >= 2);
    CHECK(t.a.e().qp_counters(t.a.qpn)->rnr_naks_received >= 2);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{5, {{t.b.addr(), 64, t.b.mr.lkey}}}) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
}

TEST_CASE("RNR retries exhausted: RNR retry-exceeded error, QP in error, the rest flushed", "[engine][rnr]") {
    TwoNodes t(31);
    t.setup(4096);
    QpOptions o;
    o.rnr_retry = 2;
    t.connect(o);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 64, t.a.mr.lkey}})) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 2, {{t.a.addr(), 64, t.a.mr.lkey}})) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 2);
    REQUIRE(sc.size() == 2);
    CHECK(sc[0].status == WcStatus::RnrRetryExcErr);
    CHECK(sc[1].status == WcStatus::WrFlushErr);
    CHECK(t.a.e().qp_counters(t.a.qpn)->rnr_naks_received == 3);
    QpAttributes attr;
    REQUIRE(t.a.e().query_qp(t.a.qpn, attr) == 0);
    CHECK(attr.qp_state == QpState::Err);
}

TEST_CASE("dead link: retry-exceeded error, QP in error, outstanding work flushed", "[engine][faults]") {
    sim::LinkConfig link;
    link.down = true;
    TwoNodes t(32, link);
    t.setup(65536);
    QpOptions o;
    o.timeout = 5;  // 131 us
    o.retry_cnt = 3;
    t.connect(o);
    REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{1, {{t.b.addr(), 4096, t.b.mr.lkey}}}) == 0);
    for (uint64_t i = 0; i < 4; ++i)
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, i, {{t.a.addr(), 4096, t.a.mr.lkey}})) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 4);
    REQUIRE(sc.size() == 4);
    CHECK(sc[0].status == WcStatus::RetryExcErr);
    for (int i = 1; i < 4; ++i) CHECK(sc[i].status == WcStatus::WrFlushErr);
    CHECK(t.a.e().qp_counters(t.a.qpn)->local_ack_timeout_err == 4);  // the first try and 3 retries
    // Posting now completes at once with a flush error; the daemon never hangs on a dead QP.
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 9, {{t.a.addr(), 1, t.a.mr.lkey}})) == 0);
    WorkCompletion wc[1];
    REQUIRE(t.a.e().poll_cq(t.a.send_cq, wc) == 1);
    CHECK(wc[0].status == WcStatus::WrFlushErr);
}

TEST_CASE("protection: wrong rkey, out of bounds, missing right, wrong PD", "[engine][protection]") {
    enum class Fault { Rkey, Bounds, Right, Pd };
    for (Fault fault : {Fault::Rkey, Fault::Bounds, Fault::Right, Fault::Pd}) {
        for (WrOpcode op : {WrOpcode::RdmaWrite, WrOpcode::RdmaRead, WrOpcode::AtomicFetchAndAdd}) {
            INFO("fault " << static_cast<int>(fault) << " op " << wr_opcode_name(op));
            TwoNodes t(40);
            t.setup(8192);
            t.connect();
            std::vector<uint8_t> target(4096, 0xAB);
            const uint32_t other_pd = *t.b.e().alloc_pd();
            const uint32_t access = fault == Fault::Right ? 0x1 /* local write only */ : 0xF;
            auto mr = t.b.e().reg_mr(fault == Fault::Pd ? other_pd : t.b.pd, target.data(), target.size(),
                                     reinterpret_cast<uint64_t>(target.data()), access);
            REQUIRE(mr);
            SendWr w = make_wr(op, 1, {{t.a.addr(), op == WrOpcode::AtomicFetchAndAdd ? 8u : 1024u, t.a.mr.lkey}});
            // Out of bounds: a 1024-byte access at offset 4000, or an 8-byte atomic just past the end.
            const uint64_t offset = fault != Fault::Bounds ? 0 : op == WrOpcode::AtomicFetchAndAdd ? 4096 : 4000;
            w.remote_addr = reinterpret_cast<uint64_t>(target.data()) + offset;
            w.rkey = fault == Fault::Rkey ? mr->rkey + 1 : mr->rkey;
            w.compare_add = 1;
            fill_pattern(t.a.buf, 1);
            REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
            auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(sc.size() == 1);
            CHECK(sc[0].status == WcStatus::RemAccessErr);
            CHECK(std::all_of(target.begin(), target.end(), [](uint8_t v) { return v == 0xAB; }));
            CHECK(t.b.e().qp_counters(t.b.qpn)->remote_access_errors == 1);
        }
    }
}
