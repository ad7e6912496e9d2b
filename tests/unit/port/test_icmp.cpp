#include <catch2/catch.hpp>

#include "frames.hpp"
#include "rnic/port/icmp_echo.hpp"

using namespace rnic::port;
using namespace rnic::port::test;

TEST_CASE("icmp: an echo request is answered with the same id, sequence and data", "[icmp]") {
    for (size_t len : {0, 1, 18, 56, 1400}) {
        VectorSink out;
        IcmpCounters c;
        const auto req = echo_request(len);
        REQUIRE(answer_echo(req, kSelf, out, c) == IcmpResult::Replied);
        REQUIRE(out.frames.size() == 1);
        const auto& r = out.frames[0];
        CHECK(r.size() == std::max<size_t>(req.size(), 60));
        CHECK(std::equal(kPeerMac.begin(), kPeerMac.end(), r.begin()));
        CHECK(std::equal(kSelf.mac.begin(), kSelf.mac.end(), r.begin() + 6));
        const uint8_t* ip = &r[14];
        CHECK(rnic::wire::load_be32(ip + 12) == kSelf.ipv4);
        CHECK(rnic::wire::load_be32(ip + 16) == kPeerIp);
        CHECK(rnic::wire::inet_fold(rnic::wire::inet_sum(ip, 20)) == 0xffff);
        const uint8_t* icmp = ip + 20;
        CHECK(icmp[0] == 0);
        CHECK(rnic::wire::inet_fold(rnic::wire::inet_sum(icmp, 8 + len)) == 0xffff);
        CHECK(std::equal(req.begin() + 34 + 4, req.end(), r.begin() + 34 + 4));
        CHECK(c.echo_replies == 1);
    }
}

TEST_CASE("icmp: bad checksums, other types and truncation are counted, not answered", "[icmp]") {
    VectorSink out;
    IcmpCounters c;
    auto bad = echo_request(8);
    bad.back() ^= 1;
    CHECK(answer_echo(bad, kSelf, out, c) == IcmpResult::BadChecksum);
    auto reply = echo_request(8);
    reply[34] = 0;
    CHECK(answer_echo(reply, kSelf, out, c) == IcmpResult::NotEchoRequest);
    const auto req = echo_request(8);
    CHECK(answer_echo(std::span(req.data(), req.size() - 1), kSelf, out, c) == IcmpResult::Malformed);
    CHECK(answer_echo(std::span(req.data(), 20), kSelf, out, c) == IcmpResult::Malformed);
    CHECK(out.frames.empty());
    CHECK(c.bad_checksum == 1);
    CHECK(c.other_types == 1);
    CHECK(c.malformed == 2);
    out.room = 0;
    CHECK(answer_echo(req, kSelf, out, c) == IcmpResult::NoBuffer);
}
