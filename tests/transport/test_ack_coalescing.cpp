// A requester with messages queued behind the one it sends leaves the ACK request to a later
// message (EngineTuning::ack_request_coalesce), so a stream of small messages draws one ACK per
// up to 16 packets instead of one each; a message with nothing behind it always asks, and every
// message still completes, in order, with its data in place.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"

using namespace rnic::test;

namespace {

constexpr size_t kBth = 14 + 20 + 8;  // Ethernet, IPv4, UDP

struct LinkCount {
    uint64_t requests = 0;      // a -> b frames
    uint64_t ack_requests = 0;  // of them with AckReq
    uint64_t acks = 0;          // b -> a ACK frames
};

// `writes` 64-byte WRITEs a -> b, all posted before the engines run, then `reads` READs.
LinkCount run(uint32_t writes, uint32_t reads, uint32_t ack_request_coalesce) {
    EngineConfig base;
    base.tuning.ack_request_coalesce = ack_request_coalesce;
    TwoNodes t(7, {}, base);
    LinkCount count;
    t.sim.link(t.id_a, t.id_b).config().drop_filter = [&count](std::span<const uint8_t> f) {
        if (f.size() > kBth + 12) {
            ++count.requests;
            count.ack_requests += (f[kBth + 8] & 0x80) != 0;
        }
        return false;
    };
    t.sim.link(t.id_b, t.id_a).config().drop_filter = [&count](std::span<const uint8_t> f) {
        count.acks += f.size() > kBth && f[kBth] == 0x11;  // RC Acknowledge
        return false;
    };
    t.setup(1 << 20);
    t.connect();
    fill_pattern(t.a.buf, 3);
    for (uint32_t i = 0; i < writes; ++i) {
        SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(64 * i), 64, t.a.mr.lkey}});
        w.remote_addr = t.b.addr(64 * i);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    }
    for (uint32_t i = 0; i < reads; ++i) {
        SendWr r = make_wr(WrOpcode::RdmaRead, writes + i, {{t.a.addr(512 * 1024 + 64 * i), 64, t.a.mr.lkey}});
        r.remote_addr = t.b.addr(64 * i);
        r.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    }
    const auto wcs = t.wait_cq(t.a, t.a.send_cq, writes + reads);
    REQUIRE(wcs.size() == writes + reads);
    for (uint32_t i = 0; i < wcs.size(); ++i) {
        CHECK(wcs[i].status == WcStatus::Success);
        CHECK(wcs[i].wr_id == i);  // in order
    }
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data(), 64 * writes) == 0);
    // The READs fetched what the WRITEs before them wrote.
    CHECK(std::memcmp(t.a.buf.data() + 512 * 1024, t.a.buf.data(), 64 * reads) == 0);
    CHECK(t.a.e().qp_counters(t.a.qpn)->retransmitted_packets == 0);
    return count;
}

}  // namespace

TEST_CASE("ACK requests: a burst of 40 WRITEs asks three times (every 16th and the last), at most one ACK each", "[engine][rc]") {
    const LinkCount c = run(40, 0, 16);
    CHECK(c.requests == 40);
    CHECK(c.ack_requests == 3);
    CHECK(c.acks >= 1);  // the responder may cover several requests with one ACK
    CHECK(c.acks <= 3);
}

TEST_CASE("ACK requests: with ack_request_coalesce 1 every message asks, as rxe's requester does", "[engine][rc]") {
    const LinkCount c = run(40, 0, 1);
    CHECK(c.ack_requests == 40);
    CHECK(c.acks >= 1);
    CHECK(c.acks <= 40);  // the responder still coalesces what arrives in one turn
}

TEST_CASE("ACK requests: one WRITE alone asks, and a WRITE followed by a READ asks before it", "[engine][rc]") {
    CHECK(run(1, 0, 16).ack_requests == 1);
    // The READ may wait for max_rd_atomic; the WRITEs before it must not wait for an ACK timeout.
    const LinkCount c = run(3, 1, 16);
    CHECK(c.requests == 4);
    CHECK(c.ack_requests == 2);  // the third WRITE (a READ behind it) and the READ
}

TEST_CASE("ACK requests: a QP moved to SQD with its last packet unasked sends that packet again with the request", "[engine][rc]") {
    EngineConfig base;
    base.tuning.tx_burst = 2;  // two packets per turn, so the move to SQD falls inside the burst
    TwoNodes t(9, {}, base);
    uint64_t requests = 0, asked = 0;
    std::vector<uint8_t> last_asked;
    t.sim.link(t.id_a, t.id_b).config().drop_filter = [&](std::span<const uint8_t> f) {
        if (f.size() > kBth + 12) {
            ++requests;
            asked += (f[kBth + 8] & 0x80) != 0;
        }
        return false;
    };
    t.setup(1 << 16);
    QpOptions o;
    o.timeout = 14;  // 67 ms: a drain that waited for the ACK timeout would show
    t.connect(o);
    for (uint32_t i = 0; i < 40; ++i) {
        SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(64 * i), 64, t.a.mr.lkey}});
        w.remote_addr = t.b.addr(64 * i);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    }
    REQUIRE(t.run_until([&] { return requests >= 4; }));
    REQUIRE(asked == 0);  // four sent, 36 queued behind: none asked yet
    const uint64_t start = t.sim.now();
    QpAttributes attr;
    attr.qp_state = QpState::Sqd;
    attr.en_sqd_async_notify = 1;
    REQUIRE(t.a.e().modify_qp(t.a.qpn, attr, QpAttr::State | QpAttr::EnSqdAsyncNotify) == 0);
    AsyncEvent ev{};
    REQUIRE(t.run_until([&] { return t.a.e().poll_async_event(ev); }, 10'000'000));
    CHECK(ev.type == EventType::SqDrained);
    CHECK(t.sim.now() - start < 1'000'000);  // well before the 67 ms ACK timeout
    CHECK(asked == 1);  // the last packet again, with AckReq
    CHECK(t.a.e().qp_counters(t.a.qpn)->retransmitted_packets == 1);
    const auto sc = t.wait_cq(t.a, t.a.send_cq, requests - 1);  // the started WRITEs complete
    CHECK(sc.size() == requests - 1);
    attr.qp_state = QpState::Rts;
    REQUIRE(t.a.e().modify_qp(t.a.qpn, attr, QpAttr::State) == 0);
    const auto rest = t.wait_cq(t.a, t.a.send_cq, 40 - sc.size());
    CHECK(rest.size() == 40 - sc.size());
}
