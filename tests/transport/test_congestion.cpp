// DCQCN in the engine, in simulated time (docs/congestion.md): a 1 Gb/s bottleneck link behind a
// 10 Gb/s sender, with RED ECN marking on the link's queue. The same transfer runs with DCQCN on
// (ECT frames, CNPs, rate cuts, pacing) and off (no ECT: the link cannot mark), data checked.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/opcode.hpp"

using namespace rnic::test;

namespace {

struct Outcome {
    bool data_ok = false;
    uint64_t peak_queue = 0;
    uint64_t marked = 0;
    uint64_t cnps_sent = 0;
    uint64_t cnps_handled = 0;
    uint64_t cnps_ignored = 0;
    uint64_t cuts = 0;
    uint64_t finished_ns = 0;
};

Outcome run_transfer(bool dcqcn) {
    rnic::sim::LinkConfig link;
    link.bandwidth_bps = 1'000'000'000;
    link.latency_ns = 2'000;
    link.ecn = {5'000, 40'000, 1.0};
    EngineConfig base;
    base.port_rate_mbps = 10'000;
    // The sender's own port: ~10 Gb/s for 1 KiB frames. The link is the switch's 1 Gb/s egress,
    // where the queue builds and RED marks.
    base.tuning.per_packet_cost_ns = 850;
    // The SIGCOMM'15 paper's parameters (K = 55 us, g = 1/256, N = 50 us, T = 55 us, B = 10 MB,
    // F = 5, R_AI = 40 Mb/s): NVIDIA's 1-us alpha period needs a CNP every microsecond to keep
    // alpha up, which a 1 Gb/s bottleneck delivering one frame per 8 us cannot give
    // (docs/congestion.md, "Dynamics").
    auto& cc = base.congestion;
    cc.rp_dce_tcp_rtt = 55;
    cc.rp_dce_tcp_g = 1020;
    cc.rp_rate_reduce_monitor_period = 50;
    cc.np_min_time_between_cnps = 50;
    cc.rp_time_reset = 55;
    cc.rp_byte_reset = 10'000'000;
    cc.rp_threshold = 5;
    cc.rp_ai_rate = 40;
    cc.rp_clamp_tgt_rate = 1;
    if (!dcqcn) cc.rp_enable_prio_mask = 0;
    TwoNodes t(7, link, base);
    constexpr size_t kMessage = 64 * 1024;
    constexpr size_t kMessages = 32;
    t.setup(kMessage * kMessages);
    QpOptions options;
    options.timeout = 16;  // 268 ms: the unthrottled burst queues for ~17 ms, no spurious retries
    t.connect(options);
    fill_pattern(t.a.buf, 42);
    for (size_t i = 0; i < kMessages; ++i) {
        SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(i * kMessage), kMessage, t.a.mr.lkey}});
        w.remote_addr = t.b.addr(i * kMessage);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    }
    const auto wcs = t.wait_cq(t.a, t.a.send_cq, kMessages, 2'000'000'000ull);
    Outcome o;
    REQUIRE(wcs.size() == kMessages);
    for (const auto& wc : wcs) CHECK(wc.status == WcStatus::Success);
    o.finished_ns = t.sim.now();
    o.data_ok = std::memcmp(t.a.buf.data(), t.b.buf.data(), t.a.buf.size()) == 0;
    const auto& forward = t.sim.link(t.id_a, t.id_b).counters();
    o.peak_queue = forward.peak_queue_bytes;
    o.marked = forward.ce_marked;
    o.cnps_sent = t.b.e().device_counters().np_cnp_sent;
    o.cnps_handled = t.a.e().device_counters().rp_cnp_handled;
    o.cnps_ignored = t.a.e().device_counters().rp_cnp_ignored;
    o.cuts = t.a.e().qp_congestion(t.a.qpn)->cuts;
    return o;
}

}  // namespace

TEST_CASE("DCQCN: CE marks bring CNPs, the sender slows down and the queue stays short", "[congestion]") {
    const Outcome off = run_transfer(false);
    const Outcome on = run_transfer(true);
    WARN("peak queue without DCQCN " << off.peak_queue << " B, with " << on.peak_queue << " B; marked "
                                     << on.marked << ", CNPs " << on.cnps_sent << ", cuts " << on.cuts
                                     << "; finished at " << off.finished_ns << " / " << on.finished_ns << " ns");
    CHECK(off.data_ok);
    CHECK(on.data_ok);
    CHECK(off.marked == 0);  // not ECN-capable: nothing to mark
    CHECK(off.cnps_sent == 0);
    CHECK(on.marked > 0);
    CHECK(on.cnps_sent > 0);
    CHECK(on.cnps_handled == on.cnps_sent);  // none lost on the uncongested way back
    CHECK(on.cnps_ignored == 0);
    CHECK(on.cuts > 0);
    CHECK(on.peak_queue * 2 < off.peak_queue);
    // Marking on enqueue behind a slow queue overshoots: CE marks keep arriving for a queue's
    // worth of time after the cut, so the first episode falls to rp_min_rate and recovers by
    // additive steps (measured: 20.7 ms against 17.7 ms unthrottled, docs/congestion.md; 32.4 ms
    // while the pacer kept the gap of a frame sent at rp_min_rate after the rate recovered).
    CHECK(on.finished_ns < off.finished_ns * 2);
}

TEST_CASE("DCQCN: a CNP for an unknown QP or from a stranger is counted and ignored", "[congestion]") {
    TwoNodes t(3);
    t.setup(4096);
    t.connect();
    const auto before = t.a.e().device_counters().rp_cnp_ignored;
    // B's engine sends a CNP on A's behalf only for CE-marked frames; build one by hand instead.
    rnic::wire::FrameSpec spec;
    spec.src_mac = t.b.e().config().mac;
    spec.dst_mac = t.a.e().config().mac;
    spec.src_gid = t.b.e().gids()[0];
    spec.dst_gid = t.a.e().gids()[0];
    spec.bth.opcode = rnic::wire::op::kCnp;
    spec.bth.becn = true;
    spec.bth.dest_qp = 0xABCDE;  // no such QP
    std::vector<uint8_t> frame(256);
    auto built = rnic::wire::build_frame(spec, frame);
    REQUIRE(built);
    frame.resize(*built);
    CHECK(t.a.e().receive(frame, 1).verdict == RxVerdict::Accepted);
    CHECK(t.a.e().device_counters().rp_cnp_ignored == before + 1);
    spec.bth.dest_qp = t.a.qpn;
    spec.src_gid = t.a.e().gids()[0];  // not the QP's peer
    frame.assign(256, 0);
    built = rnic::wire::build_frame(spec, frame);
    REQUIRE(built);
    frame.resize(*built);
    t.a.e().receive(frame, 2);
    CHECK(t.a.e().device_counters().rp_cnp_ignored == before + 2);
    CHECK_FALSE(t.a.e().qp_congestion(t.a.qpn)->limited);
    // From the peer it counts: the QP is rate-limited.
    spec.src_gid = t.b.e().gids()[0];
    frame.assign(256, 0);
    built = rnic::wire::build_frame(spec, frame);
    REQUIRE(built);
    frame.resize(*built);
    t.a.e().receive(frame, 3);
    CHECK(t.a.e().device_counters().rp_cnp_handled == 1);
    CHECK(t.a.e().qp_congestion(t.a.qpn)->limited);
    CHECK(t.a.e().qp_congestion(t.a.qpn)->rate_kbps < 10'000'000);
}
