// The window ops as a hostile client may use them: only its own PDs and windows, only types 1
// and 2, each window counted in stats and gone with its session. (Binding through the rings is
// covered by the transport and verbs-level tests; the fuzzer posts BIND_MW WQEs with any fields.)
#include <catch2/catch.hpp>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

uint64_t counter(Rig& rig, const char* name) {
    return nlohmann::json::parse(rig.host->stats_json())["counters"][name].get<uint64_t>();
}

}  // namespace

TEST_CASE("AllocMw/DeallocMw: own PDs and windows only, types 1 and 2, reclaimed with the session") {
    Rig rig;
    RawClient a(rig.host->socket_path());
    RawClient b(rig.host->socket_path());
    REQUIRE(rig.hello(a).header.status == 0);
    REQUIRE(rig.hello(b).header.status == 0);
    const Reply pd_a = rig.call(a, Op::AllocPd, nullptr, 0);
    const Reply pd_b = rig.call(b, Op::AllocPd, nullptr, 0);
    REQUIRE((pd_a.header.status == 0 && pd_b.header.status == 0));
    const uint32_t pa = pd_a.as<abi::HandleReply>().handle, pb = pd_b.as<abi::HandleReply>().handle;

    CHECK(rig.call(a, Op::AllocMw, abi::AllocMwRequest{pb, 2}).header.status == EINVAL);  // b's PD
    CHECK(rig.call(a, Op::AllocMw, abi::AllocMwRequest{0, 2}).header.status == EINVAL);
    CHECK(rig.call(a, Op::AllocMw, abi::AllocMwRequest{pa, 0}).header.status == EINVAL);
    CHECK(rig.call(a, Op::AllocMw, abi::AllocMwRequest{pa, 3}).header.status == EINVAL);
    CHECK(rig.call(a, Op::AllocMw, abi::AllocMwRequest{pa, 0xFFFFFFFF}).header.status == EINVAL);

    const Reply w1 = rig.call(a, Op::AllocMw, abi::AllocMwRequest{pa, 1});
    const Reply w2 = rig.call(a, Op::AllocMw, abi::AllocMwRequest{pa, 2});
    REQUIRE((w1.header.status == 0 && w2.header.status == 0));
    const auto m1 = w1.as<abi::AllocMwReply>(), m2 = w2.as<abi::AllocMwReply>();
    CHECK(m1.handle != m2.handle);
    CHECK(m1.rkey >> 8 == m1.handle);  // the handle is the window's MPT index
    CHECK(counter(rig, "mw_in_use") == 2);
    // The PD is busy while windows are in it.
    CHECK(rig.call(a, Op::DeallocPd, abi::HandleRequest{pa, 0}).header.status == EBUSY);
    // Someone else's window, an unknown one, a region's lkey: refused.
    CHECK(rig.call(b, Op::DeallocMw, abi::HandleRequest{m1.handle, 0}).header.status == EINVAL);
    CHECK(rig.call(a, Op::DeallocMw, abi::HandleRequest{0, 0}).header.status == EINVAL);
    CHECK(rig.call(a, Op::DeallocMw, abi::HandleRequest{0xFFFFFFFF, 0}).header.status == EINVAL);
    REQUIRE(rig.call(a, Op::DeallocMw, abi::HandleRequest{m1.handle, 0}).header.status == 0);
    CHECK(rig.call(a, Op::DeallocMw, abi::HandleRequest{m1.handle, 0}).header.status == EINVAL);
    CHECK(counter(rig, "mw_in_use") == 1);

    // Closing the session reclaims the rest, PD included.
    a.close_now();
    for (int i = 0; i < 50 && rig.host->session_count() != 1; ++i) rig.turn();
    CHECK(rig.host->session_count() == 1);
    CHECK(counter(rig, "mw_in_use") == 0);
    CHECK(rig.call(b, Op::QueryPort, nullptr, 0).header.status == 0);
}
