// ibv_rereg_mr in the memory table: one step from the old region to the new one under the same
// keys, the caches forgetting the old entry, and nothing changed by a refused request.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

constexpr uint32_t kOtherPd = 9;

std::vector<uintptr_t> pages_of(const PageBuffer& b, std::size_t first, std::size_t count) {
    std::vector<uintptr_t> pages;
    for (std::size_t i = 0; i < count; ++i) pages.push_back(reinterpret_cast<uintptr_t>(b.page(first + i)));
    return pages;
}

MrRereg translation(std::span<const uintptr_t> pages, uint32_t offset, uint64_t length, uint64_t iova) {
    MrRereg c;
    c.change_translation = true;
    c.pages = pages;
    c.first_page_offset = offset;
    c.length = length;
    c.iova = iova;
    return c;
}

uint64_t counter(const MemoryTable& table, std::string_view name) {
    for (const auto& [n, value] : table.counters())
        if (n == name) return value;
    FAIL("no counter " << name);
    return 0;
}

struct Backend : OdpBackend {
    std::vector<uint8_t> memory = std::vector<uint8_t>(2 * kPageSize);
    uint64_t base = 0x7f0000000000ull;
    bool read_ok(uint64_t a, std::span<uint8_t> d) noexcept {
        if (a < base || a + d.size() > base + memory.size()) return false;
        std::memcpy(d.data(), memory.data() + (a - base), d.size());
        return true;
    }
    bool write_ok(uint64_t a, std::span<const uint8_t> d) noexcept {
        if (a < base || a + d.size() > base + memory.size()) return false;
        std::memcpy(memory.data() + (a - base), d.data(), d.size());
        return true;
    }
    OdpResult read(uint64_t a, std::span<uint8_t> d) noexcept override {
        return read_ok(a, d) ? OdpResult::Done : OdpResult::Fault;
    }
    OdpResult write(uint64_t a, std::span<const uint8_t> d) noexcept override {
        return write_ok(a, d) ? OdpResult::Done : OdpResult::Fault;
    }
};

}  // namespace

TEST_CASE("rereg translation: same keys, accesses reach the new pages, old MTT range freed", "[rereg]") {
    MemoryConfig config = small_config();
    config.mpt_cache = CacheConfig{4, 1, 100};
    config.mtt_cache = CacheConfig{8, 2, 10};
    MemoryTable table(config);
    PageBuffer old_buf(2), new_buf(3);
    const RegResult r = table.register_mr(kPd, old_buf.data(), 2 * kPageSize, 0x10000, kAllRights);
    REQUIRE(r.ok());
    const std::vector<uint8_t> data(300, 0xAB);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, 0x10000, data, true) == AccessError::None);
    const uint64_t misses_before = table.mpt_cache().misses();
    CHECK(table.mtt_cache().misses() > 0);

    const auto pages = pages_of(new_buf, 0, 3);
    REQUIRE(table.reregister_mr(r.keys.lkey, translation(pages, 100, 3 * kPageSize - 200, 0x40064)) == 0);
    CHECK(table.raw_counters().mr_reregistrations == 1);
    CHECK(table.mr_count() == 1);
    const auto e = table.query(r.keys.rkey);  // the keys did not change
    REQUIRE(e);
    CHECK(e->iova == 0x40064);
    CHECK(e->mtt_pages == 3);
    // Old range gone, new one reachable; the first access after is an MPT cache miss again.
    CHECK(table.check_access(r.keys.rkey, kPd, 0x10000, 8, kAccessRemoteWrite, true) == AccessError::OutOfBounds);
    CHECK(table.mpt_cache().misses() == misses_before + 1);
    const std::vector<uint8_t> fresh(5000, 0x5C);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, 0x40064 + 10, fresh, true) == AccessError::None);
    CHECK(new_buf.data()[100 + 10] == 0x5C);
    CHECK(new_buf.data()[100 + 10 + 4999] == 0x5C);
    CHECK(old_buf.data()[0] == 0xAB);
    CHECK(old_buf.data()[300] == 0);  // nothing of the later access went to the old pages
    // Only the new region's pages are in the MTT now.
    CHECK(counter(table, "mtt_entries_in_use") == 3);
    CHECK(table.deregister_mr(r.keys.lkey) == 0);
}

TEST_CASE("rereg PD and access: checks use the new values, an invalidated region is valid again", "[rereg]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    const RegResult r = table.register_mr(kPd, buf.data(), kPageSize, 0x1000, kAllRights);
    REQUIRE(r.ok());
    REQUIRE(table.invalidate(r.keys.rkey, kPd) == AccessError::None);
    MrRereg c;
    c.change_pd = true;
    c.pd = kOtherPd;
    c.change_access = true;
    c.access = kAccessLocalWrite | kAccessRemoteRead;
    REQUIRE(table.reregister_mr(r.keys.lkey, c) == 0);
    CHECK(table.check_access(r.keys.rkey, kPd, 0x1000, 8, kAccessRemoteRead, true) == AccessError::PdMismatch);
    CHECK(table.check_access(r.keys.rkey, kOtherPd, 0x1000, 8, kAccessRemoteRead, true) == AccessError::None);
    CHECK(table.check_access(r.keys.rkey, kOtherPd, 0x1000, 8, kAccessRemoteWrite, true) ==
          AccessError::AccessDenied);
    CHECK(table.check_access(r.keys.lkey, kOtherPd, 0x1000, 8, kAccessLocalWrite, false) == AccessError::None);
}

TEST_CASE("rereg refusals leave the region exactly as it was", "[rereg]") {
    MemoryConfig config = small_config();
    config.max_mws = 4;
    MemoryTable table(config);
    PageBuffer buf(2), other(2);
    const RegResult r = table.register_mr(kPd, buf.data(), kPageSize, 0x1000, kAllRights | kAccessMwBind);
    REQUIRE(r.ok());
    const MptEntry before = *table.query(r.keys.lkey);
    const auto same = [&] {
        const auto now = table.query(r.keys.lkey);
        REQUIRE(now);
        CHECK(now->pd == before.pd);
        CHECK(now->access == before.access);
        CHECK(now->iova == before.iova);
        CHECK(now->length == before.length);
        CHECK(now->mtt_first == before.mtt_first);
        CHECK(table.check_access(r.keys.rkey, kPd, 0x1000, 8, kAccessRemoteWrite, true) == AccessError::None);
    };
    MrRereg c;
    c.change_access = true;
    c.access = kAccessRemoteWrite;  // without LOCAL_WRITE
    CHECK(table.reregister_mr(r.keys.lkey, c) == EINVAL);
    c.access = kAccessLocalWrite | (1u << 15);  // unknown bit
    CHECK(table.reregister_mr(r.keys.lkey, c) == EINVAL);
    c.access = kAccessLocalWrite | kAccessFlushPersistent;
    CHECK(table.reregister_mr(r.keys.lkey, c) == EOPNOTSUPP);
    c.access = kAccessLocalWrite | kAccessOnDemand;  // ON_DEMAND without a translation
    CHECK(table.reregister_mr(r.keys.lkey, c) == EINVAL);
    same();

    const auto pages = pages_of(other, 0, 2);
    CHECK(table.reregister_mr(r.keys.lkey, translation(pages, 0, 0, 0x2000)) == EINVAL);              // length 0
    CHECK(table.reregister_mr(r.keys.lkey, translation(pages, 0, kPageSize, 0x2000)) == EINVAL);      // page count
    CHECK(table.reregister_mr(r.keys.lkey, translation(pages, 0, 2 * kPageSize, ~0ull - 10)) == EINVAL);  // wraps
    CHECK(table.reregister_mr(r.keys.lkey, translation(pages, 4096, kPageSize, 0x2000)) == EINVAL);  // offset
    const std::vector<uintptr_t> unaligned = {pages[0] + 8, pages[1]};
    CHECK(table.reregister_mr(r.keys.lkey, translation(unaligned, 0, 2 * kPageSize, 0x2000)) == EINVAL);
    same();

    // Stale and window keys, unknown regions.
    CHECK(table.reregister_mr(r.keys.lkey + 1, MrRereg{}) == EINVAL);
    CHECK(table.reregister_mr(0, MrRereg{}) == EINVAL);
    // A bound window holds the region.
    const MwAllocResult mw = table.alloc_mw(kPd, 1);
    REQUIRE(mw.ok());
    CHECK(table.reregister_mr(mw.rkey, MrRereg{}) == EINVAL);
    MwBind bind;
    bind.mw_rkey = mw.rkey;
    bind.new_rkey = 0x11;
    bind.mr_lkey = r.keys.lkey;
    bind.addr = 0x1000;
    bind.length = 100;
    bind.access = kAccessRemoteRead;
    REQUIRE(table.bind_mw(bind, kPd, 1) == 0);
    MrRereg pd_only;
    pd_only.change_pd = true;
    pd_only.pd = kOtherPd;
    CHECK(table.reregister_mr(r.keys.lkey, pd_only) == EBUSY);
    same();
    REQUIRE(table.dealloc_mw(mw.index) == 0);
    CHECK(table.reregister_mr(r.keys.lkey, pd_only) == 0);

    // The MTT is full: the new range cannot be had, the old one stays.
    MemoryConfig tiny = small_config();
    tiny.max_mtt_entries = 3;
    MemoryTable small(tiny);
    const RegResult s = small.register_mr(kPd, buf.data(), 2 * kPageSize, 0x1000, kAllRights);
    REQUIRE(s.ok());
    CHECK(small.reregister_mr(s.keys.lkey, translation(pages, 0, 2 * kPageSize, 0x2000)) == ENOMEM);
    CHECK(small.check_access(s.keys.rkey, kPd, 0x1000, 2 * kPageSize, kAccessRemoteWrite, true) ==
          AccessError::None);
    CHECK(small.raw_counters().mr_reregistrations == 0);
}

TEST_CASE("rereg between pinned and on-demand translations", "[rereg][odp]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    Backend process;
    const RegResult r = table.register_mr(kPd, buf.data(), kPageSize, 0x1000, kAllRights);
    REQUIRE(r.ok());
    MrRereg c;
    c.change_access = true;
    c.access = kAccessLocalWrite | kAccessRemoteWrite | kAccessOnDemand;
    c.change_translation = true;
    c.length = 2 * kPageSize;
    c.iova = process.base;
    c.odp = &process;
    c.odp_address = process.base;
    REQUIRE(table.reregister_mr(r.keys.lkey, c) == 0);
    CHECK(counter(table, "mtt_entries_in_use") == 0);  // an ODP region has none
    const std::vector<uint8_t> data(6000, 0x42);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, process.base + 100, data, true) == AccessError::None);
    CHECK(process.memory[100] == 0x42);
    CHECK(process.memory[6099] == 0x42);
    CHECK(buf.data()[0] == 0);

    // And back: pinned pages again, ON_DEMAND gone.
    const auto pages = pages_of(buf, 0, 1);
    MrRereg back = translation(pages, 0, kPageSize, 0x1000);
    back.change_access = true;
    back.access = kAllRights;
    REQUIRE(table.reregister_mr(r.keys.lkey, back) == 0);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, 0x1000, std::span(data).first(64), true) == AccessError::None);
    CHECK(buf.data()[63] == 0x42);
    CHECK(table.query(r.keys.lkey)->odp == nullptr);
}
