#include <catch2/catch.hpp>
#include <cerrno>
#include <set>
#include <string>

#include "rnic/memory/access_error.hpp"
#include "rnic/memory/access_flags.hpp"
#include "rnic/memory/keys.hpp"
#include "rnic/memory/mpt.hpp"

using namespace rnic::mem;

TEST_CASE("access flags have rdma-core's ibv_access_flags values", "[flags]") {
    CHECK(kAccessLocalWrite == 1);
    CHECK(kAccessRemoteWrite == 2);
    CHECK(kAccessRemoteRead == 4);
    CHECK(kAccessRemoteAtomic == 8);
    CHECK(kAccessMwBind == 16);
    CHECK(kAccessZeroBased == 32);
    CHECK(kAccessOnDemand == 64);
    CHECK(kAccessHugeTlb == 128);
    CHECK(kAccessFlushGlobal == 256);
    CHECK(kAccessFlushPersistent == 512);
    CHECK(kAccessRelaxedOrdering == (1u << 20));
    CHECK(kAccessOptionalRange == 0x3FF00000u);
}

TEST_CASE("registration flags are checked like ib_check_mr_access", "[flags]") {
    CHECK(check_mr_access_flags(0) == 0);
    CHECK(check_mr_access_flags(kAccessLocalWrite) == 0);
    CHECK(check_mr_access_flags(kAccessRemoteRead) == 0);
    CHECK(check_mr_access_flags(kAccessLocalWrite | kAccessRemoteWrite) == 0);
    CHECK(check_mr_access_flags(kAccessLocalWrite | kAccessRemoteAtomic) == 0);
    CHECK(check_mr_access_flags(kAccessLocalWrite | kAccessMwBind | kAccessZeroBased | kAccessHugeTlb) == 0);
    CHECK(check_mr_access_flags(kAccessRemoteRead | kAccessRelaxedOrdering | (1u << 29)) == 0);

    SECTION("remote write or atomic without local write is EINVAL") {
        CHECK(check_mr_access_flags(kAccessRemoteWrite) == EINVAL);
        CHECK(check_mr_access_flags(kAccessRemoteAtomic) == EINVAL);
        CHECK(check_mr_access_flags(kAccessRemoteRead | kAccessRemoteWrite) == EINVAL);
    }
    SECTION("unknown bits are EINVAL") {
        CHECK(check_mr_access_flags(1u << 10) == EINVAL);
        CHECK(check_mr_access_flags(1u << 19) == EINVAL);
        CHECK(check_mr_access_flags(1u << 30) == EINVAL);
        CHECK(check_mr_access_flags(1u << 31) == EINVAL);
    }
    SECTION("capabilities this device lacks are EOPNOTSUPP") {
        CHECK(check_mr_access_flags(kAccessOnDemand) == EOPNOTSUPP);
        CHECK(check_mr_access_flags(kAccessLocalWrite | kAccessFlushGlobal) == 0);  // FLUSH to global visibility is served
        CHECK(check_mr_access_flags(kAccessLocalWrite | kAccessFlushPersistent) == EOPNOTSUPP);
    }
}

TEST_CASE("optional flags are dropped from an MR's rights", "[flags]") {
    CHECK(effective_access_flags(kAccessRemoteRead | kAccessRelaxedOrdering) == kAccessRemoteRead);
    CHECK(effective_access_flags(kAccessLocalWrite | kAccessMwBind) == (kAccessLocalWrite | kAccessMwBind));
}

TEST_CASE("keys hold the MPT index above an 8-bit variant", "[keys]") {
    CHECK(make_key(1, 0) == 0x100u);
    CHECK(make_key(0x123456, 0xAB) == 0x123456ABu);
    CHECK(key_index(0x123456ABu) == 0x123456u);
    CHECK(key_variant(0x123456ABu) == 0xAB);
    CHECK(key_index(make_key(kMaxMptIndex, 0xFF)) == kMaxMptIndex);
    CHECK(make_key(kMaxMptIndex, 0xFF) == 0xFFFFFFFFu);
}

TEST_CASE("every access error and MR state has its own name", "[names]") {
    std::set<std::string> names;
    for (int i = 0; i < static_cast<int>(kAccessErrorKinds); ++i) {
        names.emplace(access_error_name(static_cast<AccessError>(i)));
    }
    CHECK(names.size() == kAccessErrorKinds);
    CHECK(names.count("unknown") == 0);
    CHECK(access_error_name(AccessError::InvalidKey) == "invalid_key");
    CHECK(access_error_name(AccessError::OutOfBounds) == "out_of_bounds");
    CHECK(mr_state_name(MrState::Invalid) == "invalid");
    CHECK(mr_state_name(MrState::Valid) == "valid");
}
