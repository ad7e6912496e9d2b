// Memory windows between two engines: B binds windows over its buffer (BIND_MW work requests),
// A reaches B's memory through them with WRITE, READ and atomics, data checked; what a window
// does not grant fails with a Remote Access Error NAK; LOCAL_INV, SEND_WITH_INV, type 1 windows,
// bind errors (IBV_WC_MW_BIND_ERR, QP to error) and the region's lifetime, as rxe has them.
#include <cstring>

#include "engine_fixture.hpp"
#include "rnic/memory/memory_table.hpp"

using namespace rnic::test;

namespace {

constexpr size_t kBuf = 64 * 1024;
constexpr uint32_t kMwBind = 1u << 4;      // IBV_ACCESS_MW_BIND
constexpr uint32_t kZeroBased = 1u << 5;   // IBV_ACCESS_ZERO_BASED
constexpr uint32_t kRemoteWrite = 1u << 1;
constexpr uint32_t kRemoteRead = 1u << 2;
constexpr uint32_t kRemoteAtomic = 1u << 3;

uint32_t inc_rkey(uint32_t rkey) {  // ibv_inc_rkey
    return (rkey & ~0xFFu) | ((rkey + 1) & 0xFFu);
}

// Posts a BIND_MW on `ep`'s QP and waits for its completion; returns the new rkey.
WorkCompletion bind(TwoNodes& t, Endpoint& ep, uint32_t mw_rkey, uint32_t new_rkey, uint64_t offset, uint64_t length,
                    uint32_t access, uint64_t wr_id = 77) {
    SendWr wr = make_wr(WrOpcode::BindMw, wr_id, {});
    wr.rkey = new_rkey;
    wr.bind = {mw_rkey, ep.mr.lkey, ep.addr(offset), length, access};
    REQUIRE(ep.e().post_send(ep.qpn, wr) == 0);
    auto wc = t.wait_cq(ep, ep.send_cq, 1);
    REQUIRE(wc.size() == 1);
    return wc[0];
}

WorkCompletion remote(TwoNodes& t, WrOpcode op, uint32_t rkey, uint64_t remote_addr, uint64_t local_offset,
                      uint32_t length, uint64_t compare_add = 0, uint64_t swap = 0) {
    SendWr wr = make_wr(op, 5, {{t.a.addr(local_offset), length, t.a.mr.lkey}});
    wr.rkey = rkey;
    wr.remote_addr = remote_addr;
    wr.compare_add = compare_add;
    wr.swap = swap;
    REQUIRE(t.a.e().post_send(t.a.qpn, wr) == 0);
    auto wc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wc.size() == 1);
    return wc[0];
}

}  // namespace

TEST_CASE("type 2 window: WRITE, READ and atomics inside it, outside or without the right refused", "[engine][mw]") {
    TwoNodes t(41);
    t.setup(kBuf, 0xF | kMwBind);
    t.connect();
    auto mw = t.b.e().alloc_mw(t.b.pd, 2);
    REQUIRE(mw);
    CHECK(mw->rkey >> 8 > (1u << 20));  // past every region index
    const uint32_t rkey = inc_rkey(mw->rkey);
    const WorkCompletion bc = bind(t, t.b, mw->rkey, rkey, 4096, 8192, kRemoteWrite | kRemoteRead | kRemoteAtomic);
    CHECK(bc.status == WcStatus::Success);
    CHECK(bc.opcode == WcOpcode::BindMw);

    fill_pattern(t.a.buf, 3);
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, t.b.addr(4096), 0, 8192).status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data() + 4096, 8192) == 0);
    fill_pattern(t.b.buf, 9, 4096, 8192);
    const WorkCompletion rd = remote(t, WrOpcode::RdmaRead, rkey, t.b.addr(4096 + 100), 16384, 5000);
    CHECK(rd.status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data() + 16384, t.b.buf.data() + 4096 + 100, 5000) == 0);
    uint64_t word = 40;
    std::memcpy(t.b.buf.data() + 8192, &word, 8);
    CHECK(remote(t, WrOpcode::AtomicFetchAndAdd, rkey, t.b.addr(8192), 32768, 8, 2).status == WcStatus::Success);
    std::memcpy(&word, t.b.buf.data() + 8192, 8);
    CHECK(word == 42);
    std::memcpy(&word, t.a.buf.data() + 32768, 8);
    CHECK(word == 40);

    // One byte past the window, inside the region: Remote Access Error, the requester's QP to error.
    const uint8_t before = t.b.buf[4096 + 8192];
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, t.b.addr(4096 + 8192 - 10), 0, 11).status == WcStatus::RemAccessErr);
    CHECK(t.b.buf[4096 + 8192] == before);
    CHECK(t.b.e().memory().raw_counters().remote_access_errors[size_t(rnic::mem::AccessError::OutOfBounds)] == 1);
}

TEST_CASE("type 2 window: only its QP may use it, LOCAL_INV and rebinding", "[engine][mw]") {
    TwoNodes t(42);
    t.setup(kBuf, 0xF | kMwBind);
    t.connect();
    const uint32_t a_qp1 = t.a.qpn, b_qp1 = t.b.qpn;
    QpOptions o2;
    t.connect(o2);  // a second pair; t.a.qpn/t.b.qpn now name it
    const uint32_t b_qp2 = t.b.qpn;
    auto mw = t.b.e().alloc_mw(t.b.pd, 2);
    REQUIRE(mw);
    // Bound through B's second QP, used by A's first QP (which reaches B's first): refused.
    uint32_t rkey = inc_rkey(mw->rkey);
    REQUIRE(bind(t, t.b, mw->rkey, rkey, 0, 4096, kRemoteWrite).status == WcStatus::Success);
    t.a.qpn = a_qp1;
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, t.b.addr(0), 0, 64).status == WcStatus::RemAccessErr);
    CHECK(t.b.e().memory().raw_counters().remote_access_errors[size_t(rnic::mem::AccessError::QpMismatch)] == 1);
    (void)b_qp1;

    // LOCAL_INV on B's second QP frees it; the rkey is dead; a rebind with the next key works.
    t.b.qpn = b_qp2;
    SendWr inv = make_wr(WrOpcode::LocalInv, 9, {});
    inv.invalidate_rkey = rkey;
    REQUIRE(t.b.e().post_send(t.b.qpn, inv) == 0);
    auto wc = t.wait_cq(t.b, t.b.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::Success);
    CHECK(wc[0].opcode == WcOpcode::LocalInv);
    CHECK(t.b.e().memory().window(mw->handle)->bound() == false);
    const uint32_t next = inc_rkey(rkey);
    CHECK(bind(t, t.b, rkey, next, 0, 4096, kRemoteRead).status == WcStatus::Success);
    // A dereg of the region is refused while the window is bound; dealloc unbinds.
    CHECK(t.b.e().dereg_mr(t.b.mr.lkey) == EINVAL);
    CHECK(t.b.e().dealloc_pd(t.b.pd) == EBUSY);
    CHECK(t.b.e().dealloc_mw(mw->handle) == 0);
    CHECK(t.b.e().dealloc_mw(mw->handle) == EINVAL);
    CHECK(t.b.e().dereg_mr(t.b.mr.lkey) == 0);
}

TEST_CASE("SEND_WITH_INV of a window rkey invalidates it at the receiver", "[engine][mw]") {
    TwoNodes t(43);
    t.setup(kBuf, 0xF | kMwBind);
    t.connect();
    auto mw = t.b.e().alloc_mw(t.b.pd, 2);
    REQUIRE(mw);
    const uint32_t rkey = inc_rkey(mw->rkey);
    REQUIRE(bind(t, t.b, mw->rkey, rkey, 0, 4096, kRemoteWrite).status == WcStatus::Success);
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, t.b.addr(0), 0, 64).status == WcStatus::Success);

    RecvWr rwr{3, {{t.b.addr(8192), 1024, t.b.mr.lkey}}};
    REQUIRE(t.b.e().post_recv(t.b.qpn, rwr) == 0);
    SendWr s = make_wr(WrOpcode::SendWithInv, 4, {{t.a.addr(0), 16, t.a.mr.lkey}});
    s.invalidate_rkey = rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, s) == 0);
    auto rc = t.wait_cq(t.b, t.b.recv_cq, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::Success);
    CHECK((rc[0].wc_flags & WcFlag::WithInv) != 0);
    CHECK(rc[0].imm_data == rkey);
    REQUIRE(t.wait_cq(t.a, t.a.send_cq, 1).size() == 1);
    // After the invalidation the window grants nothing.
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, t.b.addr(0), 0, 64).status == WcStatus::RemAccessErr);
}

TEST_CASE("type 1 window: bound by work request, usable by any QP of its PD, unbound by a zero-length bind",
          "[engine][mw]") {
    TwoNodes t(44);
    t.setup(kBuf, 0xF | kMwBind);
    t.connect();
    auto mw = t.b.e().alloc_mw(t.b.pd, 1);
    REQUIRE(mw);
    uint32_t rkey = inc_rkey(mw->rkey);
    REQUIRE(bind(t, t.b, mw->rkey, rkey, 256, 512, kRemoteRead).status == WcStatus::Success);
    fill_pattern(t.b.buf, 5, 256, 512);
    CHECK(remote(t, WrOpcode::RdmaRead, rkey, t.b.addr(256), 0, 512).status == WcStatus::Success);
    CHECK(std::memcmp(t.a.buf.data(), t.b.buf.data() + 256, 512) == 0);

    // LOCAL_INV of a type 1 window fails (IBV_WC_LOC_QP_OP_ERR) and takes B's QP to error.
    SendWr inv = make_wr(WrOpcode::LocalInv, 9, {});
    inv.invalidate_rkey = rkey;
    REQUIRE(t.b.e().post_send(t.b.qpn, inv) == 0);
    auto wc = t.wait_cq(t.b, t.b.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::LocQpOpErr);
    QpAttributes attr;
    REQUIRE(t.b.e().query_qp(t.b.qpn, attr) == 0);
    CHECK(attr.qp_state == QpState::Err);

    // On a fresh pair: zero-length bind unbinds; reads then fail.
    t.connect();
    const uint32_t unbound = inc_rkey(rkey);
    REQUIRE(bind(t, t.b, rkey, unbound, 0, 0, 0).status == WcStatus::Success);
    CHECK(remote(t, WrOpcode::RdmaRead, unbound, t.b.addr(256), 0, 8).status == WcStatus::RemAccessErr);
}

TEST_CASE("a refused bind completes with IBV_WC_MW_BIND_ERR and the QP goes to error", "[engine][mw]") {
    TwoNodes t(45);
    t.setup(kBuf, 0xF);  // no MW_BIND on the region
    t.connect();
    auto mw = t.b.e().alloc_mw(t.b.pd, 2);
    REQUIRE(mw);
    CHECK(t.b.e().alloc_mw(t.b.pd, 3).error() == EINVAL);
    CHECK(t.b.e().alloc_mw(999, 2).error() == EINVAL);
    const WorkCompletion bc = bind(t, t.b, mw->rkey, inc_rkey(mw->rkey), 0, 64, kRemoteRead, 12);
    CHECK(bc.status == WcStatus::MwBindErr);
    CHECK(bc.wr_id == 12);
    // The next request is flushed.
    REQUIRE(t.b.e().post_send(t.b.qpn, make_wr(WrOpcode::Send, 13, {})) == 0);
    auto wc = t.wait_cq(t.b, t.b.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::WrFlushErr);
}

TEST_CASE("zero-based type 2 window over the wire", "[engine][mw]") {
    TwoNodes t(46);
    t.setup(kBuf, 0xF | kMwBind);
    t.connect();
    auto mw = t.b.e().alloc_mw(t.b.pd, 2);
    REQUIRE(mw);
    const uint32_t rkey = inc_rkey(mw->rkey);
    REQUIRE(bind(t, t.b, mw->rkey, rkey, 1000, 100, kRemoteWrite | kZeroBased).status == WcStatus::Success);
    fill_pattern(t.a.buf, 8);
    CHECK(remote(t, WrOpcode::RdmaWrite, rkey, 10, 0, 90).status == WcStatus::Success);
    CHECK(std::memcmp(t.b.buf.data() + 1010, t.a.buf.data(), 90) == 0);
}
