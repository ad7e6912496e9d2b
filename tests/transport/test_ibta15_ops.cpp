// IBTA 1.5 operations between two engines: ATOMIC WRITE (8 bytes stored as one word) and FLUSH
// (global visibility), with the errors rxe gives, their wire form, and exactly-once execution
// under loss and duplication.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::test;

namespace {

constexpr uint32_t kFlushGlobal = 1u << 8;  // IBV_ACCESS_FLUSH_GLOBAL
constexpr uint32_t kAll = 0xF | kFlushGlobal;

uint64_t word_at(const Endpoint& ep, size_t offset) {
    uint64_t v;
    std::memcpy(&v, ep.buf.data() + offset, 8);
    return v;
}

SendWr atomic_write(uint64_t wr_id, uint64_t remote, uint32_t rkey, uint64_t value) {
    SendWr w = make_wr(WrOpcode::AtomicWrite, wr_id, {});
    w.remote_addr = remote;
    w.rkey = rkey;
    std::memcpy(&w.compare_add, &value, 8);
    return w;
}

SendWr flush(uint64_t wr_id, uint64_t remote, uint32_t rkey, uint32_t length, uint8_t type = 1, uint8_t level = 0) {
    SendWr w = make_wr(WrOpcode::Flush, wr_id, {});
    w.remote_addr = remote;
    w.rkey = rkey;
    w.compare_add = length;
    w.flush_type = type;
    w.flush_level = level;
    return w;
}

}  // namespace

TEST_CASE("ATOMIC WRITE: the 8 bytes land as one word, from the WR, an SGE or inline data", "[engine][rc][ibta15]") {
    TwoNodes t(21);
    std::vector<std::vector<uint8_t>> sent;
    t.sim.set_trace([&](const rnic::sim::TraceEvent& e) {
        if (e.kind == rnic::sim::TraceKind::kSent) sent.emplace_back(e.frame.begin(), e.frame.end());
    });
    t.setup(4096);
    QpOptions o;
    o.max_rd_atomic = 4;
    t.connect(o);

    REQUIRE(t.a.e().post_send(t.a.qpn, atomic_write(1, t.b.addr(64), t.b.mr.rkey, 0x1122334455667788ull)) == 0);
    const uint64_t from_sge = 0xA5A5A5A55A5A5A5Aull;
    std::memcpy(t.a.buf.data() + 8, &from_sge, 8);
    SendWr s = make_wr(WrOpcode::AtomicWrite, 2, {{t.a.addr(8), 8, t.a.mr.lkey}});
    s.remote_addr = t.b.addr(128);
    s.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    SendWr inl = make_wr(WrOpcode::AtomicWrite, 3, {}, SendFlag::Signaled | SendFlag::Inline);
    inl.inline_data = {1, 2, 3, 4, 5, 6, 7, 8};
    inl.remote_addr = t.b.addr(4088);  // the last word of the region
    inl.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, inl) == 0);

    auto sc = t.wait_cq(t.a, t.a.send_cq, 3);
    REQUIRE(sc.size() == 3);
    for (const auto& wc : sc) {
        INFO(describe(wc));
        CHECK(wc.status == WcStatus::Success);
        CHECK(wc.opcode == WcOpcode::AtomicWrite);
        CHECK(wc.byte_len == 8);
    }
    CHECK(word_at(t.b, 64) == 0x1122334455667788ull);
    CHECK(word_at(t.b, 128) == from_sge);
    CHECK(std::memcmp(t.b.buf.data() + 4088, inl.inline_data.data(), 8) == 0);
    CHECK(word_at(t.b, 56) == 0);  // nothing around it touched
    CHECK(word_at(t.b, 72) == 0);
    CHECK(t.b.e().qp_counters(t.b.qpn)->atomic_writes_executed == 3);

    // On the wire: 0x1D with a RETH of length 8 and the bytes as they lie in memory; answered
    // by READ RESPONSE ONLY without payload, at the request's PSN.
    size_t requests = 0, responses = 0;
    uint32_t request_psn = 0;
    for (const auto& bytes : sent) {
        const auto f = rnic::wire::parse_frame(bytes);
        REQUIRE(f);
        if (f->bth.opcode == rnic::wire::op::kRcAtomicWrite) {
            if (requests++ == 0) {
                request_psn = f->bth.psn;
                REQUIRE(f->payload.size() == 8);
                uint64_t v;
                std::memcpy(&v, f->payload.data(), 8);
                CHECK(v == 0x1122334455667788ull);
                CHECK(f->ext.reth->dma_length == 8);
                CHECK(f->ext.reth->va == t.b.addr(64));
                CHECK(f->bth.ack_req);
            }
        } else if (f->bth.opcode == rnic::wire::op::kRcReadResponseOnly) {
            if (responses++ == 0) CHECK(f->bth.psn == request_psn);
            CHECK(f->payload.empty());
            REQUIRE(f->ext.aeth);
        }
    }
    CHECK(requests == 3);
    CHECK(responses == 3);
}

TEST_CASE("ATOMIC WRITE: post-time checks", "[engine][rc][ibta15]") {
    TwoNodes t(22);
    t.setup(4096);
    t.connect();
    SendWr w = make_wr(WrOpcode::AtomicWrite, 1, {{t.a.addr(), 4, t.a.mr.lkey}});
    w.remote_addr = t.b.addr();
    w.rkey = t.b.mr.rkey;
    CHECK(t.a.e().post_send(t.a.qpn, w) == EINVAL);  // 4 bytes
    w.sg_list = {{t.a.addr(), 4, t.a.mr.lkey}, {t.a.addr(8), 4, t.a.mr.lkey}};
    CHECK(t.a.e().post_send(t.a.qpn, w) == 0);  // 8 bytes from two SGEs
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);

    TwoNodes u(23);
    u.setup(4096);
    QpOptions uc;
    uc.type = QpType::Uc;
    u.connect(uc);
    CHECK(u.a.e().post_send(u.a.qpn, atomic_write(1, u.b.addr(), u.b.mr.rkey, 1)) == EINVAL);  // RC only
    CHECK(u.a.e().post_send(u.a.qpn, flush(2, u.b.addr(), u.b.mr.rkey, 8)) == EINVAL);
}

TEST_CASE("ATOMIC WRITE errors as rxe gives them", "[engine][rc][ibta15]") {
    struct Case {
        const char* name;
        uint32_t qp_access;
        uint32_t mr_access;
        size_t offset;
        bool bad_key;
        WcStatus expected;
    };
    const Case cases[] = {
        {"misaligned address: invalid request", 0xF, 0xF, 66, false, WcStatus::RemInvReqErr},
        {"QP without REMOTE_WRITE: invalid request", 0x1 | 0x4, 0xF, 64, false, WcStatus::RemInvReqErr},
        {"MR without REMOTE_WRITE: remote access error", 0xF, 0x1 | 0x4, 64, false, WcStatus::RemAccessErr},
        {"out of bounds: remote access error", 0xF, 0xF, 4092, false, WcStatus::RemAccessErr},
        {"unknown rkey: remote access error", 0xF, 0xF, 64, true, WcStatus::RemAccessErr},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            TwoNodes t(24);
            t.setup(4096, c.mr_access);
            QpOptions o;
            o.access = c.qp_access;
            t.connect(o);
            const uint32_t rkey = c.bad_key ? t.b.mr.rkey ^ 0x100 : t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, atomic_write(1, t.b.addr(c.offset), rkey, ~0ull)) == 0);
            auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(sc.size() == 1);
            CHECK(sc[0].status == c.expected);
            for (uint8_t byte : t.b.buf) REQUIRE(byte == 0);  // nothing written
            const auto* rc = t.b.e().qp_counters(t.b.qpn);
            CHECK(rc->atomic_writes_executed == 0);
        }
    }
}

TEST_CASE("ATOMIC WRITE and FLUSH run exactly once under loss and duplication", "[engine][rc][ibta15]") {
    rnic::sim::LinkConfig link;
    link.loss_probability = 0.1;
    link.duplicate_probability = 0.2;
    link.duplicate_delay_max_ns = 200'000;
    TwoNodes t(25, link);
    t.setup(4096, kAll);
    QpOptions o;
    o.access = kAll;
    o.timeout = 8;
    t.connect(o);
    // ATOMIC WRITE i then RDMA WRITE 1000 + i to the same word, fenced: a replayed ATOMIC WRITE
    // arriving after the WRITE would leave i behind.
    constexpr int kRounds = 40;
    for (int i = 0; i < kRounds; ++i) {
        REQUIRE(t.a.e().post_send(t.a.qpn, atomic_write(3 * i, t.b.addr(64), t.b.mr.rkey, i)) == 0);
        const uint64_t v = 1000 + i;
        std::memcpy(t.a.buf.data() + 8 * (i + 16), &v, 8);
        SendWr w = make_wr(WrOpcode::RdmaWrite, 3 * i + 1, {{t.a.addr(8 * (i + 16)), 8, t.a.mr.lkey}},
                           SendFlag::Signaled | SendFlag::Fence);
        w.remote_addr = t.b.addr(64);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        REQUIRE(t.a.e().post_send(t.a.qpn, flush(3 * i + 2, t.b.addr(64), t.b.mr.rkey, 8)) == 0);
    }
    auto sc = t.wait_cq(t.a, t.a.send_cq, 3 * kRounds, 60'000'000'000ull);
    REQUIRE(sc.size() == 3 * kRounds);
    for (const auto& wc : sc) REQUIRE(wc.status == WcStatus::Success);
    CHECK(word_at(t.b, 64) == 1000 + kRounds - 1);
    const auto* rc = t.b.e().qp_counters(t.b.qpn);
    CHECK(rc->atomic_writes_executed == kRounds);
    CHECK(rc->flushes_executed == kRounds);
}

TEST_CASE("FLUSH completes after the WRITEs before it, the data in place", "[engine][rc][ibta15]") {
    TwoNodes t(26);
    t.setup(64 * 1024, kAll);
    QpOptions o;
    o.access = kAll;
    t.connect(o);
    fill_pattern(t.a.buf, 7, 0, 32 * 1024);
    for (int i = 0; i < 8; ++i) {
        SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(4096 * i), 4096, t.a.mr.lkey}}, 0);
        w.remote_addr = t.b.addr(4096 * i);
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    }
    REQUIRE(t.a.e().post_send(t.a.qpn, flush(100, t.b.addr(), t.b.mr.rkey, 32 * 1024)) == 0);
    REQUIRE(t.a.e().post_send(t.a.qpn, flush(101, t.b.addr(), t.b.mr.rkey, 0, 1, 1)) == 0);  // whole MR
    auto sc = t.wait_cq(t.a, t.a.send_cq, 2);
    REQUIRE(sc.size() == 2);
    CHECK(sc[0].wr_id == 100);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(sc[0].opcode == WcOpcode::Flush);
    CHECK(sc[1].status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data(), 32 * 1024) == 0);
    CHECK(t.b.e().qp_counters(t.b.qpn)->flushes_executed == 2);
}

TEST_CASE("FLUSH errors as rxe gives them", "[engine][rc][ibta15]") {
    struct Case {
        const char* name;
        uint32_t qp_access;
        uint32_t mr_access;
        uint64_t offset;
        uint32_t length;
        uint8_t type;
        uint8_t level;
        bool bad_key;
        WcStatus expected;
    };
    const Case cases[] = {
        {"unknown rkey", kAll, kAll, 0, 64, 1, 0, true, WcStatus::RemAccessErr},
        {"MR without FLUSH_GLOBAL", kAll, 0xF, 0, 64, 1, 0, false, WcStatus::RemAccessErr},
        {"range beyond the MR", kAll, kAll, 4000, 200, 1, 0, false, WcStatus::RemAccessErr},
        {"QP without FLUSH_GLOBAL", 0xF, kAll, 0, 64, 1, 0, false, WcStatus::RemInvReqErr},
        {"persistence the QP does not grant", kAll, kAll, 0, 64, 2, 0, false, WcStatus::RemInvReqErr},
        {"persistence the MR cannot have", kAll | (1u << 9), kAll, 0, 64, 2, 0, false, WcStatus::RemAccessErr},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            TwoNodes t(27);
            t.setup(4096, c.mr_access);
            QpOptions o;
            o.access = c.qp_access;
            t.connect(o);
            const uint32_t rkey = c.bad_key ? t.b.mr.rkey ^ 0x100 : t.b.mr.rkey;
            REQUIRE(t.a.e().post_send(t.a.qpn, flush(1, t.b.addr(c.offset), rkey, c.length, c.type, c.level)) == 0);
            auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
            REQUIRE(sc.size() == 1);
            CHECK(sc[0].status == c.expected);
            CHECK(t.b.e().qp_counters(t.b.qpn)->flushes_executed == 0);
        }
    }
    SECTION("post-time: bad type or level, SGEs") {
        TwoNodes t(28);
        t.setup(4096, kAll);
        t.connect();
        CHECK(t.a.e().post_send(t.a.qpn, flush(1, t.b.addr(), t.b.mr.rkey, 8, 0, 0)) == EINVAL);
        CHECK(t.a.e().post_send(t.a.qpn, flush(1, t.b.addr(), t.b.mr.rkey, 8, 4, 0)) == EINVAL);
        CHECK(t.a.e().post_send(t.a.qpn, flush(1, t.b.addr(), t.b.mr.rkey, 8, 1, 2)) == EINVAL);
        SendWr w = flush(1, t.b.addr(), t.b.mr.rkey, 8);
        w.sg_list = {{t.a.addr(), 8, t.a.mr.lkey}};
        CHECK(t.a.e().post_send(t.a.qpn, w) == EINVAL);
    }
}
