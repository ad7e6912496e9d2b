// PFC and PAUSE received, in simulated time (docs/congestion.md): while a priority is paused the
// engine sends none of its frames (requests, and on the other side ACKs), the QP waits off the
// ready list with the pause's end as the engine's deadline, other priorities flow, and the
// traffic resumes at the end or at once on a resume; data checked. Also the live knobs: a
// rate-limited QP follows a raised rp_min_rate at once.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <vector>

#include "engine_fixture.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/opcode.hpp"

using namespace rnic::test;

namespace {

constexpr size_t kMessage = 64 * 1024;
constexpr size_t kMessages = 32;

// The sender's own port: ~10 Gb/s for 1 KiB frames, so the 2 MiB stream lasts ~1.8 ms.
EngineConfig paced(EngineConfig base = {}) {
    base.tuning.per_packet_cost_ns = 850;
    return base;
}

// A's WRITE stream to B on a 10 Gb/s link; the times at which each node put a frame on the wire.
struct Stream {
    explicit Stream(EngineConfig base = {}) : t(11, link(), paced(base)) {
        t.setup(kMessage * kMessages);
        QpOptions options;
        options.timeout = 18;  // 1 s: a pause of milliseconds must not look like a loss
        t.connect(options);
        fill_pattern(t.a.buf, 7);
        t.sim.set_trace([this](const rnic::sim::TraceEvent& ev) {
            if (ev.kind != rnic::sim::TraceKind::kSent) return;
            (ev.from == t.id_a ? sent_a : sent_b).push_back(ev.time);
        });
        for (size_t i = 0; i < kMessages; ++i) {
            SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(i * kMessage), kMessage, t.a.mr.lkey}});
            w.remote_addr = t.b.addr(i * kMessage);
            w.rkey = t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        }
    }
    static rnic::sim::LinkConfig link() {
        rnic::sim::LinkConfig l;
        l.bandwidth_bps = 10'000'000'000;
        l.latency_ns = 1'000;
        return l;
    }
    void run_to(uint64_t at) {
        REQUIRE(t.run_until([&] { return t.sim.now() >= at; }, at + 1'000'000'000ull));
    }
    static size_t between(const std::vector<uint64_t>& times, uint64_t from, uint64_t to) {
        size_t n = 0;
        for (uint64_t x : times) n += x > from && x < to;
        return n;
    }
    void finish() {
        const auto wcs = t.wait_cq(t.a, t.a.send_cq, kMessages, 2'000'000'000ull);
        REQUIRE(wcs.size() == kMessages);
        for (const auto& wc : wcs) CHECK(wc.status == WcStatus::Success);
        CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data(), t.a.buf.size()) == 0);
    }

    TwoNodes t;
    std::vector<uint64_t> sent_a, sent_b;
};

}  // namespace

TEST_CASE("PFC: a paused priority sends nothing until the pause ends, then the stream goes on", "[pause]") {
    Stream s;
    constexpr uint64_t kStart = 100'000, kPause = 500'000;
    s.run_to(kStart);
    REQUIRE(s.sent_a.size() > 10);  // the stream is running
    const uint64_t at = s.t.sim.now();
    s.t.a.e().pause_priority(0, at + kPause);
    s.t.b.e().pause_priority(0, at + kPause);  // B's ACKs are priority 0 too
    s.run_to(at + kPause / 2);
    // The engine waits for the pause's end, not spinning on a ready QP.
    CHECK(s.t.a.e().next_deadline() == at + kPause);
    CHECK(s.t.a.e().device_counters().tx_pause_holds >= 1);
    s.run_to(at + kPause + 50'000);
    CHECK(Stream::between(s.sent_a, at, at + kPause) == 0);
    CHECK(Stream::between(s.sent_b, at, at + kPause) == 0);
    CHECK(Stream::between(s.sent_a, at + kPause - 1, at + kPause + 50'000) > 10);
    s.finish();
}

TEST_CASE("PFC: a resume (quanta 0) releases at once, another priority's pause holds nothing", "[pause]") {
    Stream s;
    s.run_to(100'000);
    const uint64_t at = s.t.sim.now();
    s.t.a.e().pause_priority(3, at + 10'000'000);  // not this QP's priority (DSCP 0 -> 0)
    s.run_to(at + 100'000);
    CHECK(Stream::between(s.sent_a, at, at + 100'000) > 10);
    CHECK(s.t.a.e().device_counters().tx_pause_holds == 0);

    const uint64_t paused = s.t.sim.now();
    s.t.a.e().pause_priority(0, paused + 10'000'000);
    s.run_to(paused + 200'000);
    CHECK(Stream::between(s.sent_a, paused, paused + 200'000) == 0);
    const uint64_t resumed = s.t.sim.now();
    s.t.a.e().pause_priority(0, resumed);  // quanta 0: resume now
    s.run_to(resumed + 50'000);
    CHECK(Stream::between(s.sent_a, resumed - 1, resumed + 50'000) > 10);
    s.t.a.e().pause_priority(3, 0);
    s.finish();
}

TEST_CASE("PFC: the DSCP-to-priority map decides which pause holds a QP", "[pause]") {
    EngineConfig base;
    base.dscp_priority[0] = 5;  // DSCP 0 (the QP's traffic class) is priority 5 on this port
    Stream s(base);
    s.run_to(100'000);
    const uint64_t at = s.t.sim.now();
    s.t.a.e().pause_priority(0, at + 300'000);
    s.run_to(at + 100'000);
    CHECK(Stream::between(s.sent_a, at, at + 100'000) > 10);
    const uint64_t at5 = s.t.sim.now();
    s.t.a.e().pause_priority(5, at5 + 300'000);
    s.run_to(at5 + 300'000 + 20'000);
    CHECK(Stream::between(s.sent_a, at5, at5 + 300'000) == 0);
    CHECK(Stream::between(s.sent_a, at5 + 300'000 - 1, at5 + 320'000) > 0);
    s.finish();
}

TEST_CASE("rnicctl cc set: a rate-limited QP follows a raised rp_min_rate at once", "[congestion]") {
    Stream s;
    s.run_to(50'000);
    // Slow A's QP down as a CNP would: its reaction point starts an episode.
    REQUIRE_FALSE(s.t.a.e().set_congestion_param("rp_rate_to_set_on_first_cnp", 100));
    // A CNP from B to A's QP (the one B's NP would send).
    rnic::wire::FrameSpec spec;
    spec.src_mac = s.t.b.e().config().mac;
    spec.dst_mac = s.t.a.e().config().mac;
    spec.src_gid = s.t.b.e().gids()[0];
    spec.dst_gid = s.t.a.e().gids()[0];
    spec.bth.opcode = rnic::wire::op::kCnp;
    spec.bth.becn = true;
    spec.bth.dest_qp = s.t.a.qpn;
    std::vector<uint8_t> frame(256);
    auto built = rnic::wire::build_frame(spec, frame);
    REQUIRE(built);
    frame.resize(*built);
    s.t.a.e().receive(frame, s.t.sim.now());
    auto cc = s.t.a.e().qp_congestion(s.t.a.qpn);
    REQUIRE(cc);
    REQUIRE(cc->limited);
    CHECK(cc->rate_kbps == 100'000);
    const std::array knobs{rnic::cc::ParamAssignment{"rp_min_rate", 2000}};
    REQUIRE_FALSE(s.t.a.e().set_congestion_params(knobs));
    cc = s.t.a.e().qp_congestion(s.t.a.qpn);
    CHECK(cc->rate_kbps == 2'000'000);
    CHECK(cc->limited);
    // A bad set changes nothing.
    const std::array bad{rnic::cc::ParamAssignment{"rp_min_rate", 3000}, rnic::cc::ParamAssignment{"rp_gd", 1}};
    CHECK(s.t.a.e().set_congestion_params(bad));
    CHECK(s.t.a.e().congestion_params().rp_min_rate == 2000);
    // Back to the full rate: the ceiling comes down to the floor, the episode ends.
    const std::array ceiling{rnic::cc::ParamAssignment{"rp_max_rate", 2000}};
    REQUIRE_FALSE(s.t.a.e().set_congestion_params(ceiling));
    CHECK_FALSE(s.t.a.e().qp_congestion(s.t.a.qpn)->limited);
    s.finish();
}
