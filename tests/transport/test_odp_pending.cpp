// On-demand accesses that come back Pending (an ODP page fault not resolved yet) in each path of
// the engine (odp_wait.cpp, docs/host_interface.md): the responder RNR-NAKs a WRITE or SEND and
// holds a READ response, the requester holds a packet whose gather waits and drops a READ
// response whose landing waits, asking again on resume; each completes once the backend says
// Done, and past the time bound the QP goes to error with the error a bad address gives.
#include <catch2/catch.hpp>
#include <cstring>

#include "engine_fixture.hpp"

using namespace rnic::test;
using rnic::mem::OdpResult;

namespace {

constexpr uint32_t kOnDemand = 1u << 6;
constexpr uint64_t kBound = 50'000'000;  // 50 ms of simulated time

// A pretend process whose accesses come back Pending a number of times before they are done
// (or always, `stuck`), as a page fault that takes a while (or never) resolves.
struct SlowOwner : rnic::mem::OdpBackend {
    uint64_t base = 0x200000000ull;
    std::vector<uint8_t> memory = std::vector<uint8_t>(64 * 1024);
    int pending_reads = 0, pending_writes = 0;
    int writes_before_pending = 0;  // the pending writes start after this many done ones
    bool stuck = false;
    int pendings = 0, dones = 0;
    OdpResult read(uint64_t a, std::span<uint8_t> d) noexcept override {
        if (stuck || pending_reads > 0) {
            --pending_reads;
            ++pendings;
            return OdpResult::Pending;
        }
        ++dones;
        std::memcpy(d.data(), memory.data() + (a - base), d.size());
        return OdpResult::Done;
    }
    OdpResult write(uint64_t a, std::span<const uint8_t> d) noexcept override {
        if (stuck || (pending_writes > 0 && dones >= writes_before_pending)) {
            --pending_writes;
            ++pendings;
            return OdpResult::Pending;
        }
        ++dones;
        std::memcpy(memory.data() + (a - base), d.data(), d.size());
        return OdpResult::Done;
    }
};

EngineConfig bounded() {
    EngineConfig c;
    c.tuning.odp_timeout_ns = kBound;
    return c;
}

// Runs until `count` completions on `cq`, telling `resume` (the engine whose backend was slow)
// every 100 us that its backend has news, as rnicd's worker wake-up does.
std::vector<WorkCompletion> wait_resuming(TwoNodes& t, Endpoint& ep, uint32_t cq, size_t count, Engine& resume,
                                          uint64_t max_ns = 1'000'000'000) {
    std::vector<WorkCompletion> got;
    std::vector<WorkCompletion> batch(16);
    for (uint64_t spent = 0; spent < max_ns && got.size() < count; spent += 100'000) {
        resume.odp_resume();
        t.run_until(
            [&] {
                int n;
                while ((n = ep.e().poll_cq(cq, batch)) > 0) got.insert(got.end(), batch.begin(), batch.begin() + n);
                return got.size() >= count;
            },
            100'000);
    }
    return got;
}

}  // namespace

TEST_CASE("ODP Pending at the responder: WRITE and SEND are RNR-NAKed and retried, READ data is held",
          "[engine][odp]") {
    TwoNodes t(41, {}, bounded());
    t.setup(64 * 1024);
    t.connect();
    SlowOwner owner;
    auto odp = t.b.e().reg_mr_odp(t.b.pd, owner.base, owner.memory.size(), owner.base, 0xF | kOnDemand, &owner, false);
    REQUIRE(odp);

    SECTION("WRITE") {
        owner.pending_writes = 3;
        fill_pattern(t.a.buf, 7, 0, 3000);
        SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), 3000, t.a.mr.lkey}});
        w.remote_addr = owner.base + 100;
        w.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(t.a.buf.data(), owner.memory.data() + 100, 3000) == 0);
        CHECK(owner.pendings == 3);
        CHECK(t.b.e().device_counters().odp_rnr_naks == 3);
        CHECK(t.a.e().qp_counters(t.a.qpn)->rnr_naks_received == 3);
        CHECK(t.b.e().device_counters().odp_timeouts == 0);
    }
    SECTION("a WRITE's middle packet: the RNR NAK names its PSN, the rest follows") {
        owner.writes_before_pending = 2;
        owner.pending_writes = 2;
        fill_pattern(t.a.buf, 12, 0, 5000);
        SendWr w = make_wr(WrOpcode::RdmaWrite, 4, {{t.a.addr(), 5000, t.a.mr.lkey}});
        w.remote_addr = owner.base + 8;
        w.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(t.a.buf.data(), owner.memory.data() + 8, 5000) == 0);
        CHECK(owner.pendings == 2);
        CHECK(t.b.e().device_counters().odp_rnr_naks == 2);
    }
    SECTION("SEND into an on-demand receive buffer") {
        owner.pending_writes = 2;
        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{9, {{owner.base + 64, 4096, odp->lkey}}}) == 0);
        fill_pattern(t.a.buf, 8, 0, 2500);
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 2, {{t.a.addr(), 2500, t.a.mr.lkey}})) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
        REQUIRE(rc.size() == 1);
        CHECK(rc[0].status == WcStatus::Success);
        CHECK(rc[0].wr_id == 9);
        CHECK(rc[0].byte_len == 2500);
        CHECK(std::memcmp(t.a.buf.data(), owner.memory.data() + 64, 2500) == 0);
        CHECK(t.b.e().device_counters().odp_rnr_naks == 2);
    }
    SECTION("READ: the response waits for its data, then goes out") {
        owner.pending_reads = 2;
        fill_pattern(owner.memory, 9);
        SendWr r = make_wr(WrOpcode::RdmaRead, 3, {{t.a.addr(8192), 3000, t.a.mr.lkey}});
        r.remote_addr = owner.base + 500;
        r.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
        // Nothing comes while the data waits and nobody resumes the responder.
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 1'000'000);
        CHECK(sc.empty());
        CHECK(t.b.e().qp_counters(t.b.qpn)->read_responses_sent == 0);
        CHECK(t.b.e().qp_counters(t.b.qpn)->rnr_naks_sent == 0);  // no RNR NAK for a READ
        sc = wait_resuming(t, t.a, t.a.send_cq, 1, t.b.e());
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(t.a.buf.data() + 8192, owner.memory.data() + 500, 3000) == 0);
        CHECK(t.b.e().device_counters().odp_waits >= 1);
    }
}

TEST_CASE("ODP Pending at the requester: a gather holds its packet, a READ landing is asked for again",
          "[engine][odp]") {
    TwoNodes t(42, {}, bounded());
    t.setup(64 * 1024);
    t.connect();
    SlowOwner local;
    auto lmr = t.a.e().reg_mr_odp(t.a.pd, local.base, local.memory.size(), local.base, 0x1 | kOnDemand, &local, false);
    REQUIRE(lmr);

    SECTION("gather of a WRITE's payload") {
        local.pending_reads = 2;
        fill_pattern(local.memory, 10);
        SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{local.base + 40, 3000, lmr->lkey}});
        w.remote_addr = t.b.addr(1000);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        // Parked: no packet leaves and nothing completes until the backend has news.
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 1'000'000);
        CHECK(sc.empty());
        CHECK(t.a.e().qp_counters(t.a.qpn)->tx_packets == 0);
        CHECK(local.pendings == 1);
        sc = wait_resuming(t, t.a, t.a.send_cq, 1, t.a.e());
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(local.memory.data() + 40, t.b.buf.data() + 1000, 3000) == 0);
        CHECK(local.pendings == 2);
    }
    SECTION("a SEND's payload, while another QP of the engine keeps going") {
        local.pending_reads = 1;
        // A second connected pair on the same engines, all in ordinary memory.
        QpOptions o;
        QpInitAttr qa;
        qa.pd = t.a.pd;
        qa.send_cq = t.a.send_cq;
        qa.recv_cq = t.a.recv_cq;
        qa.cap = {64, 64, 2, 2, 0};
        QpInitAttr qb = qa;
        qb.pd = t.b.pd;
        qb.send_cq = t.b.send_cq;
        qb.recv_cq = t.b.recv_cq;
        auto qa2 = t.a.e().create_qp(qa);
        auto qb2 = t.b.e().create_qp(qb);
        REQUIRE(qa2);
        REQUIRE(qb2);
        AddressVector to_b, to_a;
        to_b.dgid = t.b.e().config().gids.at(0);
        to_b.dmac = t.b.e().config().mac;
        to_a.dgid = t.a.e().config().gids.at(0);
        to_a.dmac = t.a.e().config().mac;
        bring_up(t.a.e(), qa2->qpn, o, qb2->qpn, o.rq_psn, o.sq_psn, to_b);
        bring_up(t.b.e(), qb2->qpn, o, qa2->qpn, o.sq_psn, o.rq_psn, to_a);

        REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{5, {{t.b.addr(), 4096, t.b.mr.lkey}}}) == 0);
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{local.base, 2000, lmr->lkey}})) == 0);
        SendWr other = make_wr(WrOpcode::RdmaWrite, 2, {{t.a.addr(), 4000, t.a.mr.lkey}});
        other.remote_addr = t.b.addr(8192);
        other.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(qa2->qpn, other) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 2'000'000);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].wr_id == 2);  // the other QP's WRITE, while the SEND waits
        CHECK(sc[0].status == WcStatus::Success);
        sc = wait_resuming(t, t.a, t.a.send_cq, 1, t.a.e());
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].wr_id == 1);
        CHECK(sc[0].status == WcStatus::Success);
    }
    SECTION("READ response landing in an on-demand buffer") {
        local.pending_writes = 2;
        fill_pattern(t.b.buf, 11, 0, 5000);
        SendWr r = make_wr(WrOpcode::RdmaRead, 3, {{local.base + 8, 5000, lmr->lkey}});
        r.remote_addr = t.b.addr();
        r.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
        auto sc = wait_resuming(t, t.a, t.a.send_cq, 1, t.a.e());
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(local.memory.data() + 8, t.b.buf.data(), 5000) == 0);
        CHECK(local.pendings == 2);
        // Asked again (from the dropped response's PSN), not charged as a lost packet.
        CHECK(t.a.e().qp_counters(t.a.qpn)->retransmits >= 1);
        CHECK(t.a.e().qp_counters(t.a.qpn)->local_ack_timeout_err == 0);
    }
}

TEST_CASE("ODP Pending past the time bound: the QP goes to error", "[engine][odp]") {
    TwoNodes t(43, {}, bounded());
    t.setup(64 * 1024);
    // ACK timeout 67 ms x 7 retries: the requester outlasts the responder's bound (a held READ
    // response would otherwise end in the requester's retry exceeded first, as it may on mlx5).
    QpOptions o;
    o.timeout = 14;
    t.connect(o);
    SlowOwner owner;
    owner.stuck = true;
    std::vector<uint32_t> timed_out;

    SECTION("responder WRITE: remote access error") {
        auto odp =
            t.b.e().reg_mr_odp(t.b.pd, owner.base, owner.memory.size(), owner.base, 0xF | kOnDemand, &owner, false);
        REQUIRE(odp);
        SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), 100, t.a.mr.lkey}});
        w.remote_addr = owner.base;
        w.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 2 * kBound);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::RemAccessErr);
        CHECK(t.b.e().device_counters().odp_timeouts == 1);
        QpAttributes qa;
        REQUIRE(t.b.e().query_qp(t.b.qpn, qa) == 0);
        CHECK(qa.qp_state == QpState::Err);
        t.b.e().take_odp_timeouts(timed_out);
        CHECK(timed_out == std::vector<uint32_t>{t.b.qpn});
    }
    SECTION("responder READ: remote access error") {
        auto odp =
            t.b.e().reg_mr_odp(t.b.pd, owner.base, owner.memory.size(), owner.base, 0xF | kOnDemand, &owner, false);
        REQUIRE(odp);
        SendWr r = make_wr(WrOpcode::RdmaRead, 2, {{t.a.addr(), 100, t.a.mr.lkey}});
        r.remote_addr = owner.base;
        r.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
        auto sc = wait_resuming(t, t.a, t.a.send_cq, 1, t.b.e(), 4 * kBound);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::RemAccessErr);
        CHECK(t.b.e().device_counters().odp_timeouts == 1);
    }
    SECTION("requester gather: local protection error") {
        auto lmr =
            t.a.e().reg_mr_odp(t.a.pd, owner.base, owner.memory.size(), owner.base, 0x1 | kOnDemand, &owner, false);
        REQUIRE(lmr);
        REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 3, {{owner.base, 64, lmr->lkey}})) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 2 * kBound);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::LocProtErr);
        CHECK(t.a.e().device_counters().odp_timeouts == 1);
        t.a.e().take_odp_timeouts(timed_out);
        CHECK(timed_out == std::vector<uint32_t>{t.a.qpn});
        QpAttributes qa;
        REQUIRE(t.a.e().query_qp(t.a.qpn, qa) == 0);
        CHECK(qa.qp_state == QpState::Err);
    }
    SECTION("a stuck gather behind a sent message: that one is acknowledged, the stuck one fails") {
        auto lmr =
            t.a.e().reg_mr_odp(t.a.pd, owner.base, owner.memory.size(), owner.base, 0x1 | kOnDemand, &owner, false);
        REQUIRE(lmr);
        SendWr first = make_wr(WrOpcode::RdmaWrite, 5, {{t.a.addr(), 100, t.a.mr.lkey}});
        first.remote_addr = t.b.addr();
        first.rkey = t.b.mr.rkey;
        SendWr second = make_wr(WrOpcode::RdmaWrite, 6, {{owner.base, 100, lmr->lkey}});
        second.remote_addr = t.b.addr(4096);
        second.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, first) == 0);
        REQUIRE(t.a.e().post_send(t.a.qpn, second) == 0);
        // The first completes before the bound (its ACK is asked for although the second was
        // queued behind it), the second at the bound.
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, kBound / 2);
        const auto* qc = t.a.e().qp_counters(t.a.qpn);
        INFO("tx " << qc->tx_packets << " acks " << qc->acks_received << " retransmits " << qc->retransmits
                   << " b acks sent " << t.b.e().qp_counters(t.b.qpn)->acks_sent << " dup "
                   << t.b.e().qp_counters(t.b.qpn)->duplicate_requests);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].wr_id == 5);
        CHECK(sc[0].status == WcStatus::Success);
        sc = t.wait_cq(t.a, t.a.send_cq, 1, 2 * kBound);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].wr_id == 6);
        CHECK(sc[0].status == WcStatus::LocProtErr);
        CHECK(t.a.e().qp_counters(t.a.qpn)->local_ack_timeout_err == 0);
    }
    SECTION("READ landing: local protection error") {
        auto lmr =
            t.a.e().reg_mr_odp(t.a.pd, owner.base, owner.memory.size(), owner.base, 0x1 | kOnDemand, &owner, false);
        REQUIRE(lmr);
        SendWr r = make_wr(WrOpcode::RdmaRead, 4, {{owner.base, 3000, lmr->lkey}});
        r.remote_addr = t.b.addr();
        r.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
        auto sc = t.wait_cq(t.a, t.a.send_cq, 1, 2 * kBound);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::LocProtErr);
        CHECK(t.a.e().device_counters().odp_timeouts == 1);
        CHECK(t.a.e().qp_counters(t.a.qpn)->local_ack_timeout_err == 0);
    }
}
