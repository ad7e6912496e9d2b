// On-demand regions: nothing pinned, every access through the backend, unreachable addresses
// fail as Fault (remote access / local protection error), atomics refused, implicit regions
// cover the whole address space.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "rnic/memory/memory_table.hpp"

using namespace rnic::mem;

namespace {

constexpr uint32_t kPd = 3;
constexpr AccessFlags kRw = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

// A pretend address space: [base, base + size) readable and writable except one hole page.
struct FakeProcess : OdpBackend {
    uint64_t base = 0x7f0000000000ull;
    std::vector<uint8_t> memory = std::vector<uint8_t>(4 * 4096);
    uint64_t hole = base + 2 * 4096;  // the third page is unmapped
    int reads = 0, writes = 0;
    bool reachable(uint64_t a, size_t n) const {
        return a >= base && a + n <= base + memory.size() && (a + n <= hole || a >= hole + 4096);
    }
    bool read_ok(uint64_t a, std::span<uint8_t> d) noexcept {
        ++reads;
        if (!reachable(a, d.size())) return false;
        std::memcpy(d.data(), memory.data() + (a - base), d.size());
        return true;
    }
    bool write_ok(uint64_t a, std::span<const uint8_t> d) noexcept {
        ++writes;
        if (!reachable(a, d.size())) return false;
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

TEST_CASE("ODP region: copies go through the backend, nothing pinned", "[odp]") {
    MemoryTable table;
    FakeProcess proc;
    const RegResult r = table.register_odp(kPd, proc.base, 8192, 0x1000, kRw | kAccessOnDemand, &proc, false);
    REQUIRE(r.ok());
    const uint8_t data[5] = {1, 2, 3, 4, 5};
    CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000 + 100, data, true) == AccessError::None);
    CHECK(std::memcmp(proc.memory.data() + 100, data, 5) == 0);
    uint8_t back[5] = {};
    CHECK(table.copy_out(r.keys.rkey, kPd, 0x1000 + 100, back, true) == AccessError::None);
    CHECK(std::memcmp(back, data, 5) == 0);
    CHECK(proc.writes == 1);
    CHECK(proc.reads == 1);
    // Keys, rights and bounds are checked as for any region, before the backend is asked.
    CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000 + 8190, data, true) == AccessError::OutOfBounds);
    CHECK(table.copy_in(r.keys.rkey, kPd + 1, 0x1000, data, true) == AccessError::PdMismatch);
    CHECK(proc.writes == 1);
    // Atomics are refused: the backend cannot make them atomic against the owner's CPUs.
    CHECK(table.fetch_and_add(r.keys.rkey, kPd, 0x1000, 1).error == AccessError::AccessDenied);
    CHECK(table.atomic_write(r.keys.rkey, kPd, 0x1000, 1) == AccessError::AccessDenied);
    const auto& c = table.raw_counters();
    CHECK(c.odp_accesses == 2);
    CHECK(c.odp_bytes == 10);
    CHECK(c.odp_faults == 0);
    CHECK(table.deregister_mr(r.keys.lkey) == 0);
    CHECK(table.copy_in(r.keys.rkey, kPd, 0x1000, data, true) == AccessError::InvalidKey);
}

TEST_CASE("ODP region: an unmapped page fails the access, counted", "[odp]") {
    MemoryTable table;
    FakeProcess proc;
    const RegResult r = table.register_odp(kPd, proc.base, proc.memory.size(), proc.base, kRw | kAccessOnDemand,
                                           &proc, false);
    REQUIRE(r.ok());
    std::vector<uint8_t> page(4096, 0xAB);
    CHECK(table.copy_in(r.keys.rkey, kPd, proc.hole, page, true) == AccessError::Fault);
    CHECK(table.copy_out(r.keys.lkey, kPd, proc.hole - 8, page, false) == AccessError::Fault);
    CHECK(table.raw_counters().odp_faults == 2);
    CHECK(table.raw_counters().remote_access_errors[static_cast<size_t>(AccessError::Fault)] == 1);
    CHECK(table.raw_counters().local_access_errors[static_cast<size_t>(AccessError::Fault)] == 1);
    CHECK(table.copy_in(r.keys.rkey, kPd, proc.hole + 4096, page, true) == AccessError::None);
}

TEST_CASE("ODP registration: implicit regions and refusals", "[odp]") {
    MemoryTable table;
    FakeProcess proc;
    const RegResult all = table.register_odp(kPd, 0, 0, 0, kRw | kAccessOnDemand, &proc, true);
    REQUIRE(all.ok());
    const auto e = table.query(all.keys.lkey);
    REQUIRE(e);
    CHECK(e->iova == 0);
    CHECK(e->length == UINT64_MAX);
    const uint8_t x = 7;
    CHECK(table.copy_in(all.keys.rkey, kPd, proc.base + 5, {&x, 1}, true) == AccessError::None);
    CHECK(proc.memory[5] == 7);
    CHECK(table.copy_in(all.keys.rkey, kPd, 0x1000, {&x, 1}, true) == AccessError::Fault);  // nothing there
    // Without ON_DEMAND, without a backend, with an empty or wrapping range: EINVAL.
    CHECK(table.register_odp(kPd, proc.base, 4096, 0, kRw, &proc, false).error == EINVAL);
    CHECK(table.register_odp(kPd, proc.base, 4096, 0, kRw | kAccessOnDemand, nullptr, false).error == EINVAL);
    CHECK(table.register_odp(kPd, proc.base, 0, 0, kRw | kAccessOnDemand, &proc, false).error == EINVAL);
    CHECK(table.register_odp(kPd, proc.base, 4096, UINT64_MAX - 10, kRw | kAccessOnDemand, &proc, false).error ==
          EINVAL);
    // Remote write without local write is EINVAL as for any region; ON_DEMAND through the
    // pinned path is still EOPNOTSUPP.
    CHECK(table.register_odp(kPd, proc.base, 4096, 0, kAccessRemoteWrite | kAccessOnDemand, &proc, false).error ==
          EINVAL);
    std::vector<uint8_t> buf(64);
    CHECK(table.register_mr(kPd, buf.data(), 64, 0, kAccessOnDemand).error == EOPNOTSUPP);
}
