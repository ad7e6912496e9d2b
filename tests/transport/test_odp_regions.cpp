// On-demand regions at the engine: the responder's WRITE data, its READ responses and the
// requester's gathers reach memory through the region's backend; an unreachable address is a
// remote access error (or a local protection error for a local SGE); atomics are refused.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine_fixture.hpp"

using namespace rnic::test;

namespace {

constexpr uint32_t kOnDemand = 1u << 6;

// A pretend process: [base, base + size) reachable, the rest not; counts its calls.
struct FakeOwner : rnic::mem::OdpBackend {
    uint64_t base = 0x100000000ull;
    std::vector<uint8_t> memory = std::vector<uint8_t>(64 * 1024);
    int calls = 0;
    bool in(uint64_t a, size_t n) const { return a >= base && a - base <= memory.size() && n <= memory.size() - (a - base); }
    bool read_ok(uint64_t a, std::span<uint8_t> d) noexcept {
        ++calls;
        if (!in(a, d.size())) return false;
        std::memcpy(d.data(), memory.data() + (a - base), d.size());
        return true;
    }
    bool write_ok(uint64_t a, std::span<const uint8_t> d) noexcept {
        ++calls;
        if (!in(a, d.size())) return false;
        std::memcpy(memory.data() + (a - base), d.data(), d.size());
        return true;
    }
    rnic::mem::OdpResult read(uint64_t a, std::span<uint8_t> d) noexcept override {
        return read_ok(a, d) ? rnic::mem::OdpResult::Done : rnic::mem::OdpResult::Fault;
    }
    rnic::mem::OdpResult write(uint64_t a, std::span<const uint8_t> d) noexcept override {
        return write_ok(a, d) ? rnic::mem::OdpResult::Done : rnic::mem::OdpResult::Fault;
    }
};

}  // namespace

TEST_CASE("ODP region at the engine: WRITE, READ, an unreachable address, atomics refused", "[engine][odp]") {
    TwoNodes t(31);
    t.setup(64 * 1024);
    t.connect();
    FakeOwner owner;
    // Implicit: the whole address space of the pretend process, iova = address.
    auto odp = t.b.e().reg_mr_odp(t.b.pd, 0, 0, 0, 0xF | kOnDemand, &owner, true);
    REQUIRE(odp);
    fill_pattern(t.a.buf, 5, 0, 20000);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), 20000, t.a.mr.lkey}});
    w.remote_addr = owner.base + 300;
    w.rkey = odp->rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data(), owner.memory.data() + 300, 20000) == 0);
    CHECK(owner.calls >= 20);  // one access per 1024-byte packet

    SendWr r = make_wr(WrOpcode::RdmaRead, 2, {{t.a.addr(32768), 5000, t.a.mr.lkey}});
    r.remote_addr = owner.base + 1000;
    r.rkey = odp->rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, r) == 0);
    sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data() + 32768, owner.memory.data() + 1000, 5000) == 0);

    SECTION("an address the owner has nothing at") {
        w.remote_addr = owner.base + owner.memory.size() + 4096;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
        sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::RemAccessErr);
    }
    SECTION("fetch-and-add on it") {
        SendWr f = make_wr(WrOpcode::AtomicFetchAndAdd, 3, {{t.a.addr(), 8, t.a.mr.lkey}});
        f.remote_addr = owner.base + 64;
        f.rkey = odp->rkey;
        f.compare_add = 1;
        REQUIRE(t.a.e().post_send(t.a.qpn, f) == 0);
        sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::RemAccessErr);
    }
    SECTION("as a local buffer: gathers and READ data go through it too") {
        FakeOwner local;
        // 8 KiB more than the owner has: the key covers it, the owner does not.
        auto lmr = t.a.e().reg_mr_odp(t.a.pd, local.base, local.memory.size() + 8192, local.base, 0x1 | kOnDemand,
                                      &local, false);
        REQUIRE(lmr);
        SendWr rr = make_wr(WrOpcode::RdmaRead, 4, {{local.base + 10, 3000, lmr->lkey}});
        rr.remote_addr = owner.base + 300;
        rr.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, rr) == 0);
        sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::Success);
        CHECK(std::memcmp(local.memory.data() + 10, owner.memory.data() + 300, 3000) == 0);
        SendWr bad = make_wr(WrOpcode::RdmaWrite, 5, {{local.base + local.memory.size() + 100, 8, lmr->lkey}});
        bad.remote_addr = owner.base;
        bad.rkey = odp->rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, bad) == 0);  // inside the region, so the key check passes
        sc = t.wait_cq(t.a, t.a.send_cq, 1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].status == WcStatus::LocProtErr);  // the gather found nothing there
        CHECK(t.a.e().dereg_mr(lmr->lkey) == 0);
    }
    CHECK(t.b.e().dereg_mr(odp->lkey) == 0);
}
