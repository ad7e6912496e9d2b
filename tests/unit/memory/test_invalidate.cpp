#include <catch2/catch.hpp>
#include <vector>

#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

TEST_CASE("an invalidated region refuses every access until deregistered", "[invalidate]") {
    MemoryTable table(small_config());
    PageBuffer buf(1);
    const RegResult r = table.register_mr(kPd, buf.data(), 256, 0x2000, kAllRights);
    REQUIRE(r.ok());
    std::vector<uint8_t> data(16, 0xAB);

    CHECK(table.invalidate(r.keys.rkey, kPd + 1) == AccessError::PdMismatch);
    CHECK(table.query(r.keys.rkey)->state == MrState::Valid);
    CHECK(table.invalidate(r.keys.rkey ^ 1u, kPd) == AccessError::InvalidKey);
    CHECK(table.invalidate(0, kPd) == AccessError::InvalidKey);

    REQUIRE(table.invalidate(r.keys.rkey, kPd) == AccessError::None);
    CHECK(table.query(r.keys.rkey)->state == MrState::Invalid);
    CHECK(table.check_access(r.keys.rkey, kPd, 0x2000, 16, kAccessRemoteRead, true) == AccessError::InvalidKey);
    CHECK(table.check_access(r.keys.lkey, kPd, 0x2000, 16, 0, false) == AccessError::InvalidKey);
    CHECK(table.copy_in(r.keys.rkey, kPd, 0x2000, data, true) == AccessError::InvalidKey);
    CHECK(table.copy_out(r.keys.lkey, kPd, 0x2000, data, false) == AccessError::InvalidKey);
    CHECK(table.fetch_and_add(r.keys.rkey, kPd, 0x2000, 1).error == AccessError::InvalidKey);
    CHECK(buf.data()[0] == 0);

    CHECK(table.invalidate(r.keys.rkey, kPd) == AccessError::None);  // again: no effect, no error
    CHECK(table.raw_counters().mr_invalidations == 1);

    CHECK(table.deregister_mr(r.keys.lkey) == 0);
    CHECK(table.invalidate(r.keys.rkey, kPd) == AccessError::InvalidKey);
}
