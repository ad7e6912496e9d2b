// Memory windows in the protection table: key ranges, the bind rules (rxe_mw.c's, plus our PD
// checks), accesses through a window (its range, rights, PD and, for type 2, its QP),
// invalidation and the region's lifetime while windows are bound to it.
#include <catch2/catch.hpp>
#include <cerrno>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

constexpr uint32_t kQpn = 0x11;
constexpr uint64_t kIova = 0x10000;
constexpr AccessFlags kBindable = kAllRights | kAccessMwBind;

struct Fixture {
    MemoryTable table{small_config()};
    PageBuffer buf{2};
    RegResult mr = table.register_mr(kPd, buf.data(), 2 * kPageSize, kIova, kBindable);

    MwBind bind(uint32_t mw_rkey, uint64_t addr, uint64_t length, AccessFlags access) const {
        MwBind b;
        b.mw_rkey = mw_rkey;
        b.new_rkey = (mw_rkey & ~0xFFu) | ((mw_rkey + 1) & 0xFFu);  // ibv_inc_rkey
        b.mr_lkey = mr.keys.lkey;
        b.addr = addr;
        b.length = length;
        b.access = access;
        return b;
    }
};

}  // namespace

TEST_CASE("window keys never collide with region keys", "[mw]") {
    Fixture f;
    REQUIRE(f.mr.ok());
    const MwAllocResult w1 = f.table.alloc_mw(kPd, 1);
    const MwAllocResult w2 = f.table.alloc_mw(kPd, 2);
    REQUIRE(w1.ok());
    REQUIRE(w2.ok());
    // small_config: 8 regions, so windows start at index 9.
    CHECK(key_index(w1.rkey) == 9);
    CHECK(key_index(w2.rkey) == 10);
    CHECK(f.table.is_window_key(w1.rkey));
    CHECK_FALSE(f.table.is_window_key(f.mr.keys.rkey));
    // A region's key never reaches the window table and vice versa.
    CHECK_FALSE(f.table.query(w1.rkey).has_value());
    CHECK(f.table.deregister_mr(w1.rkey) == EINVAL);
    CHECK(f.table.dealloc_mw(key_index(f.mr.keys.lkey)) == EINVAL);
    CHECK(f.table.alloc_mw(kPd, 3).error == EINVAL);
    CHECK(f.table.alloc_mw(kPd, 0).error == EINVAL);
}

TEST_CASE("window table full is ENOMEM", "[mw]") {
    MemoryConfig config = small_config();
    config.max_mws = 2;
    MemoryTable table(config);
    REQUIRE(table.alloc_mw(kPd, 1).ok());
    const MwAllocResult second = table.alloc_mw(kPd, 2);
    REQUIRE(second.ok());
    CHECK(table.alloc_mw(kPd, 1).error == ENOMEM);
    REQUIRE(table.dealloc_mw(second.index) == 0);
    CHECK(table.alloc_mw(kPd, 1).ok());
    config.max_mws = kMaxMptIndex;
    CHECK_THROWS_AS(MemoryTable(config), std::invalid_argument);
}

TEST_CASE("a type 2 window grants exactly its range, rights and QP", "[mw]") {
    Fixture f;
    const MwAllocResult w = f.table.alloc_mw(kPd, 2);
    REQUIRE(w.ok());
    std::vector<uint8_t> data(64, 0x5A);
    // Free: nothing reaches memory through it.
    CHECK(f.table.copy_in(w.rkey, kPd, kIova, data, true, kQpn) == AccessError::InvalidKey);

    const MwBind b = f.bind(w.rkey, kIova + 256, 1024, kAccessRemoteWrite | kAccessRemoteRead);
    REQUIRE(f.table.bind_mw(b, kPd, kQpn) == 0);
    const uint32_t rkey = b.new_rkey;
    CHECK(f.table.window(w.index)->mw_qpn == kQpn);
    CHECK(f.table.query(f.mr.keys.lkey)->bound_windows == 1);
    // The old key byte is another window now.
    CHECK(f.table.copy_in(w.rkey, kPd, kIova + 256, data, true, kQpn) == AccessError::InvalidKey);

    REQUIRE(f.table.copy_in(rkey, kPd, kIova + 256, data, true, kQpn) == AccessError::None);
    CHECK(f.buf.data()[256] == 0x5A);
    CHECK(f.buf.data()[255] == 0);
    std::vector<uint8_t> back(64);
    REQUIRE(f.table.copy_out(rkey, kPd, kIova + 256 + 1024 - 64, back, true, kQpn) == AccessError::None);

    // Inside the region but outside the window.
    CHECK(f.table.copy_in(rkey, kPd, kIova + 255, data, true, kQpn) == AccessError::OutOfBounds);
    CHECK(f.table.copy_in(rkey, kPd, kIova + 256 + 1024 - 63, data, true, kQpn) == AccessError::OutOfBounds);
    // Rights the window lacks, though the region has them.
    CHECK(f.table.fetch_and_add(rkey, kPd, kIova + 256, 1, kQpn).error == AccessError::AccessDenied);
    // Another QP, another PD.
    CHECK(f.table.copy_in(rkey, kPd, kIova + 256, data, true, kQpn + 1) == AccessError::QpMismatch);
    CHECK(f.table.copy_in(rkey, kPd + 1, kIova + 256, data, true, kQpn) == AccessError::PdMismatch);
    // Never an lkey.
    CHECK(f.table.check_access(rkey, kPd, kIova + 256, 8, 0, false, kQpn) == AccessError::InvalidKey);
    CHECK(f.table.raw_counters().remote_access_errors[static_cast<std::size_t>(AccessError::QpMismatch)] == 1);

    // Bound already: a second bind is refused until it is invalidated.
    CHECK(f.table.bind_mw(f.bind(rkey, kIova, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    // The region cannot go, nor be invalidated, while the window is on it.
    CHECK(f.table.deregister_mr(f.mr.keys.lkey) == EINVAL);
    CHECK(f.table.invalidate(f.mr.keys.rkey, kPd) == AccessError::AccessDenied);

    CHECK(f.table.invalidate(rkey, kPd + 1) == AccessError::PdMismatch);
    REQUIRE(f.table.invalidate(rkey, kPd) == AccessError::None);
    CHECK(f.table.copy_in(rkey, kPd, kIova + 256, data, true, kQpn) == AccessError::InvalidKey);
    CHECK(f.table.invalidate(rkey, kPd) == AccessError::InvalidKey);  // free: nothing to invalidate
    CHECK(f.table.query(f.mr.keys.lkey)->bound_windows == 0);
    CHECK(f.table.raw_counters().mw_invalidations == 1);

    // Free again: bindable, through another QP this time.
    const MwBind again = f.bind(rkey, kIova, 8, kAccessRemoteAtomic);
    REQUIRE(f.table.bind_mw(again, kPd, kQpn + 1) == 0);
    CHECK(f.table.fetch_and_add(again.new_rkey, kPd, kIova, 5, kQpn + 1).error == AccessError::None);
    CHECK(f.table.fetch_and_add(again.new_rkey, kPd, kIova, 5, kQpn).error == AccessError::QpMismatch);
    // The QP goes: nobody may use the window any more.
    f.table.forget_qp(kQpn + 1);
    CHECK(f.table.fetch_and_add(again.new_rkey, kPd, kIova, 5, kQpn + 1).error == AccessError::QpMismatch);
    // Deallocation unbinds; then the region may go.
    REQUIRE(f.table.dealloc_mw(w.index) == 0);
    CHECK(f.table.dealloc_mw(w.index) == EINVAL);
    CHECK(f.table.deregister_mr(f.mr.keys.lkey) == 0);
}

TEST_CASE("type 1 windows: rebind, zero-length unbind, no invalidation", "[mw]") {
    Fixture f;
    const MwAllocResult w = f.table.alloc_mw(kPd, 1);
    REQUIRE(w.ok());
    std::vector<uint8_t> data(8, 1);
    const MwBind b = f.bind(w.rkey, kIova, 4096, kAccessRemoteRead);
    REQUIRE(f.table.bind_mw(b, kPd, kQpn) == 0);
    // Any QP of the PD may use a type 1 window.
    CHECK(f.table.copy_out(b.new_rkey, kPd, kIova, data, true, kQpn + 7) == AccessError::None);
    CHECK(f.table.copy_in(b.new_rkey, kPd, kIova, data, true, kQpn) == AccessError::AccessDenied);
    // Rebinding a bound type 1 window moves it.
    const MwBind moved = f.bind(b.new_rkey, kIova + 4096, 4096, kAccessRemoteRead | kAccessRemoteWrite);
    REQUIRE(f.table.bind_mw(moved, kPd, kQpn) == 0);
    CHECK(f.table.query(f.mr.keys.lkey)->bound_windows == 1);
    CHECK(f.table.copy_in(moved.new_rkey, kPd, kIova + 4096, data, true, kQpn) == AccessError::None);
    CHECK(f.table.copy_in(moved.new_rkey, kPd, kIova, data, true, kQpn) == AccessError::OutOfBounds);
    // o10-37.2.26: a type 1 window is not invalidated by LOCAL_INV or SEND_WITH_INV.
    CHECK(f.table.invalidate(moved.new_rkey, kPd) == AccessError::AccessDenied);
    // A zero-length bind unbinds it (no region needed).
    MwBind unbind = f.bind(moved.new_rkey, 0, 0, 0);
    unbind.mr_lkey = 0;
    REQUIRE(f.table.bind_mw(unbind, kPd, kQpn) == 0);
    CHECK(f.table.query(f.mr.keys.lkey)->bound_windows == 0);
    CHECK(f.table.copy_out(unbind.new_rkey, kPd, kIova, data, true, kQpn) == AccessError::InvalidKey);
    CHECK(f.table.deregister_mr(f.mr.keys.lkey) == 0);
}

TEST_CASE("bind refusals are rxe's", "[mw]") {
    Fixture f;
    MemoryTable& t = f.table;
    const MwAllocResult w1 = t.alloc_mw(kPd, 1);
    const MwAllocResult w2 = t.alloc_mw(kPd, 2);
    const MwAllocResult other_pd = t.alloc_mw(kPd + 1, 2);
    REQUIRE((w1.ok() && w2.ok() && other_pd.ok()));
    PageBuffer plain_buf(1);
    const RegResult plain = t.register_mr(kPd, plain_buf.data(), kPageSize, 0x900000, kAllRights);  // no MW_BIND
    PageBuffer ro_buf(1);
    const RegResult read_only = t.register_mr(kPd, ro_buf.data(), kPageSize, 0xA00000, kAccessRemoteRead | kAccessMwBind);
    REQUIRE((plain.ok() && read_only.ok()));

    // Unknown window key, stale key byte, unknown region.
    CHECK(t.bind_mw(f.bind(0, kIova, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    CHECK(t.bind_mw(f.bind(w2.rkey ^ 0x01, kIova, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    MwBind b = f.bind(w2.rkey, kIova, 64, kAccessRemoteRead);
    b.mr_lkey ^= 0x01;
    CHECK(t.bind_mw(b, kPd, kQpn) == EINVAL);
    // C10-72: PD of the window (and ours: of the region) must be the QP's.
    CHECK(t.bind_mw(f.bind(other_pd.rkey, kIova, 64, kAccessRemoteRead), kPd + 1, kQpn) == EINVAL);
    CHECK(t.bind_mw(f.bind(w2.rkey, kIova, 64, kAccessRemoteRead), kPd + 1, kQpn) == EINVAL);
    // o10-37.2.40: type 2 never binds zero bytes.
    CHECK(t.bind_mw(f.bind(w2.rkey, kIova, 0, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    // o10-36.2.2: type 1 never zero based.
    CHECK(t.bind_mw(f.bind(w1.rkey, kIova, 64, kAccessRemoteRead | kAccessZeroBased), kPd, kQpn) == EINVAL);
    // C10-73: region without MW_BIND.
    MwBind nb = f.bind(w2.rkey, 0x900000, 64, kAccessRemoteRead);
    nb.mr_lkey = plain.keys.lkey;
    CHECK(t.bind_mw(nb, kPd, kQpn) == EINVAL);
    // C10-74: writable or atomic window over a region without LOCAL_WRITE; readable is fine.
    MwBind ro = f.bind(w2.rkey, 0xA00000, 64, kAccessRemoteWrite);
    ro.mr_lkey = read_only.keys.lkey;
    CHECK(t.bind_mw(ro, kPd, kQpn) == EINVAL);
    ro.access = kAccessRemoteAtomic;
    CHECK(t.bind_mw(ro, kPd, kQpn) == EINVAL);
    ro.access = kAccessRemoteRead;
    CHECK(t.bind_mw(ro, kPd, kQpn) == 0);
    REQUIRE(t.invalidate(ro.new_rkey, kPd) == AccessError::None);
    // C10-75: the window lies inside the region.
    CHECK(t.bind_mw(f.bind(ro.new_rkey, kIova - 1, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    CHECK(t.bind_mw(f.bind(ro.new_rkey, kIova + 2 * kPageSize - 63, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    CHECK(t.bind_mw(f.bind(ro.new_rkey, ~uint64_t{0} - 8, 64, kAccessRemoteRead), kPd, kQpn) == EINVAL);
    // Access bits a window cannot have.
    CHECK(t.bind_mw(f.bind(ro.new_rkey, kIova, 64, kAccessOnDemand), kPd, kQpn) == EINVAL);
    CHECK(t.raw_counters().mw_bind_errors == 14);
    CHECK(t.raw_counters().mw_binds == 1);
}

TEST_CASE("a zero-based type 2 window is addressed from 0", "[mw]") {
    Fixture f;
    const MwAllocResult w = f.table.alloc_mw(kPd, 2);
    const MwBind b = f.bind(w.rkey, kIova + 4096, 128, kAccessRemoteWrite | kAccessZeroBased);
    REQUIRE(f.table.bind_mw(b, kPd, kQpn) == 0);
    std::vector<uint8_t> data(8, 0x77);
    REQUIRE(f.table.copy_in(b.new_rkey, kPd, 120, data, true, kQpn) == AccessError::None);
    CHECK(f.buf.data()[4096 + 120] == 0x77);
    CHECK(f.table.copy_in(b.new_rkey, kPd, 121, data, true, kQpn) == AccessError::OutOfBounds);
    CHECK(f.table.copy_in(b.new_rkey, kPd, kIova + 4096, data, true, kQpn) == AccessError::OutOfBounds);
}
