// The RNIC cache model seen through the engine, CQ overflow, and verbs-level errno values.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

namespace {

uint64_t counter(const std::vector<std::pair<std::string_view, uint64_t>>& list, std::string_view name) {
    for (const auto& [n, v] : list)
        if (n == name) return v;
    FAIL("no counter " << name);
    return 0;
}

// `qps` connected pairs; in each of `rounds` rounds every QP sends one 64-byte WRITE and the
// round completes before the next starts (a closed loop, as many clients doing small requests
// behave). Returns the virtual time the whole run took.
uint64_t run_qps(uint32_t qps, uint32_t rounds, EngineConfig base, TwoNodes** out = nullptr) {
    static std::unique_ptr<TwoNodes> keep;
    keep = std::make_unique<TwoNodes>(7, sim::LinkConfig{}, base);
    TwoNodes& t = *keep;
    t.setup(1 << 16);
    std::vector<uint32_t> senders;
    for (uint32_t i = 0; i < qps; ++i) {
        t.connect();
        senders.push_back(t.a.qpn);
    }
    const uint64_t start = t.sim.now();
    for (uint32_t r = 0; r < rounds; ++r) {
        for (uint32_t qa : senders) {
            SendWr w = make_wr(WrOpcode::RdmaWrite, r, {{t.a.addr(), 64, t.a.mr.lkey}});
            w.remote_addr = t.b.addr(64);
            w.rkey = t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(qa, w) == 0);
        }
        REQUIRE(t.wait_cq(t.a, t.a.send_cq, qps, 10'000'000'000ull).size() == qps);
    }
    if (out) *out = &t;
    return t.sim.now() - start;
}

}  // namespace

TEST_CASE("QPC cache: misses equal the QPs touched while the working set fits, every access misses once it does not",
          "[engine][cache]") {
    EngineConfig base;
    base.caches.qpc = {16, 4, 0};
    TwoNodes* t = nullptr;
    run_qps(8, 20, base, &t);
    // b touches each of its 8 QPs: 8 compulsory misses, everything else hits.
    auto c = t->b.e().cache_counters();
    CHECK(counter(c, "qpc_cache_misses") == 8);
    CHECK(counter(c, "qpc_cache_hits") > 100);
    CHECK(counter(c, "qpc_cache_evictions") == 0);

    run_qps(64, 5, base, &t);  // 64 QPs cycling through 16 lines: LRU keeps none of them
    c = t->b.e().cache_counters();
    const double misses = static_cast<double>(counter(c, "qpc_cache_misses"));
    const double hits = static_cast<double>(counter(c, "qpc_cache_hits"));
    CHECK(misses / (misses + hits) > 0.9);
    CHECK(counter(c, "qpc_cache_evictions") > 0);
}

TEST_CASE("with a miss cost, throughput falls once the QPs outgrow the QPC cache", "[engine][cache]") {
    EngineConfig base;
    base.caches.qpc = {32, 4, 2000};   // 2 us per QPC miss
    base.tuning.per_packet_cost_ns = 200;
    const uint32_t total = 2048;
    const double t_fit = static_cast<double>(run_qps(16, total / 16, base));
    const double t_over = static_cast<double>(run_qps(256, total / 256, base));
    INFO("16 QPs: " << total / (t_fit / 1e9) << " ops/s, 256 QPs: " << total / (t_over / 1e9)
                    << " ops/s (virtual time)");
    CHECK(t_over > 2.0 * t_fit);  // more than halved
    // With the model off the QP count alone costs far less: the drop above is the cache's.
    base.caches.qpc = {};
    const double off_fit = static_cast<double>(run_qps(16, total / 16, base));
    const double off_over = static_cast<double>(run_qps(256, total / 256, base));
    INFO("cache off: 16 QPs " << off_fit << " ns, 256 QPs " << off_over << " ns");
    CHECK(t_over / t_fit > 2.0 * (off_over / off_fit));
}

TEST_CASE("MTT cache: misses follow the pages a transfer touches", "[engine][cache]") {
    EngineConfig base;
    base.caches.mtt = {16, 4, 0};
    base.caches.mpt = {8, 2, 0};
    TwoNodes t(8, {}, base);
    t.setup(64 * 4096);
    t.connect();
    auto write_pages = [&](uint32_t pages) {
        for (int rep = 0; rep < 3; ++rep) {
            SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), pages * 4096, t.a.mr.lkey}});
            w.remote_addr = t.b.addr();
            w.rkey = t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
            REQUIRE(t.wait_cq(t.a, t.a.send_cq, 1).size() == 1);
        }
    };
    const auto before = t.b.e().cache_counters();
    write_pages(8);  // 8 pages of data fit in 16 MTT lines: only the first pass misses
    const auto mid = t.b.e().cache_counters();
    const uint64_t spanned = (t.b.addr() % 4096 == 0) ? 8 : 9;  // the buffer need not be page aligned
    CHECK(counter(mid, "mtt_cache_misses") - counter(before, "mtt_cache_misses") == spanned);
    write_pages(64);  // 64 pages cycling through 16 lines: every page misses every pass
    const auto after = t.b.e().cache_counters();
    CHECK(counter(after, "mtt_cache_misses") - counter(mid, "mtt_cache_misses") >= 3 * 64 - 8);
}

TEST_CASE("CQ overflow is reported as an async CQ error, not lost silently", "[engine][limits]") {
    TwoNodes t(9);
    t.setup(4096);
    t.connect();
    Engine& e = t.a.e();
    const uint32_t small_cq = *e.create_cq(2);
    QpInitAttr init;
    init.pd = t.a.pd;
    init.send_cq = small_cq;
    init.recv_cq = small_cq;
    init.cap = {16, 16, 1, 1, 0};
    const uint32_t qpn = e.create_qp(init)->qpn;
    QpAttributes attr;
    attr.qp_state = QpState::Init;
    REQUIRE(e.modify_qp(qpn, attr, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) == 0);
    for (uint64_t i = 0; i < 3; ++i) REQUIRE(e.post_recv(qpn, RecvWr{i, {}}) == 0);
    attr.qp_state = QpState::Err;  // flushes three receives into a CQ of two
    REQUIRE(e.modify_qp(qpn, attr, QpAttr::State) == 0);
    AsyncEvent ev;
    REQUIRE(e.poll_async_event(ev));
    CHECK(ev.type == EventType::CqErr);
    CHECK(ev.object == small_cq);
    CHECK(e.device_counters().cq_overflows == 1);
    WorkCompletion wc[4];
    CHECK(e.poll_cq(small_cq, wc) == 2);
}

TEST_CASE("verbs errors return the errno rdma-core returns", "[engine][limits]") {
    TwoNodes t(10);
    t.setup(4096);
    Engine& e = t.a.e();
    CHECK(e.create_cq(0).error() == EINVAL);
    CHECK(e.reg_mr(9999, t.a.buf.data(), 16, 0, 1).error() == EINVAL);  // no such PD
    CHECK(e.reg_mr(t.a.pd, t.a.buf.data(), 16, 0, AccessFlag::RemoteWrite).error() == EINVAL);  // needs local write
    QpInitAttr init;
    init.pd = t.a.pd;
    init.send_cq = t.a.send_cq;
    init.recv_cq = t.a.recv_cq;
    init.cap = {16, 16, 1, 1, 0};
    init.qp_type = QpType::RawPacket;
    CHECK(e.create_qp(init).error() == EOPNOTSUPP);
    init.qp_type = QpType::Rc;
    init.cap.max_send_sge = 1000;
    CHECK(e.create_qp(init).error() == EINVAL);
    init.cap.max_send_sge = 1;
    const uint32_t qpn = e.create_qp(init)->qpn;
    QpAttributes attr;
    // RESET -> RTR skips INIT; RESET -> INIT without its required attributes; both EINVAL.
    attr.qp_state = QpState::Rtr;
    CHECK(e.modify_qp(qpn, attr, QpAttr::State) == EINVAL);
    attr.qp_state = QpState::Init;
    CHECK(e.modify_qp(qpn, attr, QpAttr::State) == EINVAL);
    CHECK(e.modify_qp(qpn, attr, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) == 0);
    // Posting a send before RTS fails; so does a receive with too many SGEs.
    CHECK(e.post_send(qpn, make_wr(WrOpcode::Send, 1, {})) == EINVAL);
    CHECK(e.post_recv(qpn, RecvWr{1, {{0, 0, 0}, {0, 0, 0}}}) == EINVAL);
    attr.qp_state = QpState::Rtr;
    attr.path_mtu = Mtu::Mtu4096;
    attr.ah_attr.sgid_index = 5;  // no such GID
    CHECK(e.modify_qp(qpn, attr, QpAttr::State | QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn |
                                     QpAttr::MaxDestRdAtomic | QpAttr::MinRnrTimer) == EINVAL);
    CHECK(e.destroy_cq(t.a.send_cq) == EBUSY);
    CHECK(e.dealloc_pd(t.a.pd) == EBUSY);
    CHECK(e.destroy_qp(qpn) == 0);
    CHECK(e.destroy_qp(qpn) == EINVAL);
}
