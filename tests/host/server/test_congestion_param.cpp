// SetCongestionParam (rnicctl cc set) against the daemon: only its owner or root may change the
// device's DCQCN knobs; a bad name, value or combination is EINVAL and changes nothing; a good
// request changes every knob it names at once, and Stats shows it.
#include <catch2/catch.hpp>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "peer_credentials.hpp"
#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;
using nlohmann::json;

namespace {

abi::SetCongestionParamRequest request(std::initializer_list<std::pair<const char*, uint64_t>> params) {
    abi::SetCongestionParamRequest req{};
    for (const auto& [name, value] : params) {
        std::strncpy(req.params[req.count].name, name, sizeof req.params[0].name - 1);
        req.params[req.count].value = value;
        ++req.count;
    }
    return req;
}

json congestion(Rig& rig, RawClient& c) {
    Reply r = rig.call(c, Op::Stats, abi::StatsRequest{abi::kStatsDevice, 0});
    REQUIRE(r.header.status == 0);
    return json::parse(std::string(r.body.begin(), r.body.end()))["congestion"];
}

}  // namespace

TEST_CASE("SetCongestionParam: root or the owner changes knobs all at once, others get EPERM") {
    Rig rig;
    RawClient owner(rig.host->socket_path());
    REQUIRE(rig.hello(owner).header.status == 0);
    next_peer_uid = 1000;  // a user who is neither root nor the daemon's owner
    RawClient user(rig.host->socket_path());
    REQUIRE(rig.hello(user).header.status == 0);
    REQUIRE(next_peer_uid == kRealPeerUid);

    const auto set = request({{"rp_max_rate", 1000}, {"rp_min_rate", 200}, {"rp_enable/3", 0}});
    CHECK(rig.call(user, Op::SetCongestionParam, set).header.status == EPERM);
    json cc = congestion(rig, owner);
    CHECK(cc["rp_max_rate"] == 0);
    CHECK(cc["rp_min_rate"] == 1);

    const Reply ok = rig.call(owner, Op::SetCongestionParam, set);
    CHECK(ok.header.status == 0);
    CHECK(ok.body.empty());
    cc = congestion(rig, user);  // every user sees the device's knobs
    CHECK(cc["rp_max_rate"] == 1000);
    CHECK(cc["rp_min_rate"] == 200);
    CHECK(cc["rp_enable_prio_mask"] == 0xf7);
    CHECK(rig.engine.congestion_params().rp_min_rate == 200);
}

TEST_CASE("SetCongestionParam: a bad name, value, combination or shape is EINVAL and changes nothing") {
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const json before = congestion(rig, c);

    for (const auto& bad : {request({{"rp_ai_rate", 40}, {"rp_bogus", 1}}), request({{"rp_ai_rate", 40}, {"rp_gd", 3}}),
                            request({{"rp_ai_rate", 40}, {"rp_max_rate", 10}, {"rp_min_rate", 20}}),
                            request({{"np_enable/9", 0}}), request({{"ecn_ect", uint64_t{1} << 40}}), request({})}) {
        const Reply r = rig.call(c, Op::SetCongestionParam, bad);
        CHECK(r.header.status == EINVAL);
        CHECK_FALSE(r.eof);
    }
    auto unterminated = request({{"rp_ai_rate", 40}});
    std::memset(unterminated.params[0].name, 'x', sizeof unterminated.params[0].name);
    CHECK(rig.call(c, Op::SetCongestionParam, unterminated).header.status == EINVAL);
    auto reserved = request({{"rp_ai_rate", 40}});
    reserved.params[0].reserved = 1;
    CHECK(rig.call(c, Op::SetCongestionParam, reserved).header.status == EINVAL);
    auto too_many = request({{"rp_ai_rate", 40}});
    too_many.count = abi::kMaxCongestionParams + 1;
    CHECK(rig.call(c, Op::SetCongestionParam, too_many).header.status == EINVAL);

    CHECK(congestion(rig, c) == before);
    // The session goes on.
    CHECK(rig.call(c, Op::SetCongestionParam, request({{"rp_ai_rate", 40}})).header.status == 0);
    CHECK(congestion(rig, c)["rp_ai_rate"] == 40);
}
