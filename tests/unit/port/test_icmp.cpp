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

namespace {
// The request's echo body (id, sequence, data) after the ICMPv6 header.
constexpr size_t kEcho6Body = 14 + 40 + 4;
}  // namespace

TEST_CASE("icmp6: an echo request is answered from the address asked, same id, sequence and data", "[icmp][ipv6]") {
    for (size_t len : {0, 1, 18, 56, 1400}) {
        for (const Ipv6Addr& to : {kSelfIp6, kSelf.ipv6[0].addr}) {
            VectorSink out;
            IcmpCounters c;
            const auto req = echo6_request(len, to);
            REQUIRE(answer_echo6(icmp6_of(req), kSelf, out, c) == IcmpResult::Replied);
            REQUIRE(out.frames.size() == 1);
            const auto& r = out.frames[0];
            CHECK(r.size() == req.size());       // 62 bytes at least: never short of the Ethernet minimum
            const Icmp6Message m = icmp6_of(r);  // the reply's checksum over the pseudo-header is right
            CHECK(m.type == 129);
            CHECK(m.code == 0);
            CHECK(m.eth_dst == kPeerMac);
            CHECK(m.eth_src == kSelf.mac);
            CHECK(m.src == to);
            CHECK(m.dst == kPeerIp6);
            CHECK(m.hop_limit == 64);
            CHECK(std::equal(req.begin() + kEcho6Body, req.end(), r.begin() + kEcho6Body));
            CHECK(c.echo_requests == 1);
            CHECK(c.echo_replies == 1);
        }
    }
}

TEST_CASE("icmp6: an echo request to all-nodes is answered from our address for the asker", "[icmp][ipv6]") {
    VectorSink out;
    IcmpCounters c;
    REQUIRE(answer_echo6(icmp6_of(echo6_request(8, kAllNodes, kPeerLinkLocal)), kSelf, out, c) == IcmpResult::Replied);
    CHECK(icmp6_of(out.frames.at(0)).src == kSelf.ipv6[0].addr);
    REQUIRE(answer_echo6(icmp6_of(echo6_request(8, kAllNodes, kPeerIp6)), kSelf, out, c) == IcmpResult::Replied);
    CHECK(icmp6_of(out.frames.at(1)).src == kSelfIp6);
}

TEST_CASE("icmp6: request and reply match an independent builder (scapy) byte for byte", "[icmp][ipv6]") {
    // scapy: Ether/IPv6(src=fd77::2, dst=fd77::1, hlim=64)/ICMPv6EchoRequest(id=0x1234, seq=7, data=0..15)
    const auto req = from_hex(
        "02000000000102000000000286dd6000000000183a40fd770000000000000000000000000002fd770000000000000000000000000001"
        "80003a3f12340007000102030405060708090a0b0c0d0e0f");
    // and the ICMPv6EchoReply with the addresses and MACs swapped
    const auto expected = from_hex(
        "02000000000202000000000186dd6000000000183a40fd770000000000000000000000000001fd770000000000000000000000000002"
        "8100393f12340007000102030405060708090a0b0c0d0e0f");
    CHECK(req == echo6_request(16));
    VectorSink out;
    IcmpCounters c;
    REQUIRE(answer_echo6(icmp6_of(req), kSelf, out, c) == IcmpResult::Replied);
    CHECK(out.frames.at(0) == expected);
}

TEST_CASE("icmp6: bad checksums, truncation, other types and bad sources are counted, not answered", "[icmp][ipv6]") {
    VectorSink out;
    IcmpCounters c;
    auto bad = echo6_request(8);
    bad.back() ^= 1;
    CHECK_FALSE(parse_icmp6(bad));
    CHECK(parse_icmp6(bad).error() == Icmp6Error::BadChecksum);
    const auto req = echo6_request(8);
    // The IPv6 payload length says more than the frame holds: malformed at every cut.
    for (size_t len = 0; len < req.size(); ++len)
        CHECK(parse_icmp6(std::span(req.data(), len)).error() == Icmp6Error::Malformed);
    // Ethernet padding after the packet is not echoed.
    auto padded = echo6_request(0);
    padded.resize(80, 0xEE);
    REQUIRE(answer_echo6(icmp6_of(padded), kSelf, out, c) == IcmpResult::Replied);
    CHECK(out.frames.back().size() == 14 + 40 + 8);
    // Too short to be an echo request (no id and sequence).
    const auto tiny = icmp6_frame(128, {}, kPeerIp6, kSelfIp6, kSelf.mac, 64);
    CHECK(answer_echo6(icmp6_of(tiny), kSelf, out, c) == IcmpResult::Malformed);
    const auto from_nowhere = echo6_request(8, kSelfIp6, Ipv6Addr{});
    CHECK(answer_echo6(icmp6_of(from_nowhere), kSelf, out, c) == IcmpResult::Malformed);
    const auto code1 = icmp6_frame(128, {0, 1, 0, 1}, kPeerIp6, kSelfIp6, kSelf.mac, 64, 1);
    CHECK(answer_echo6(icmp6_of(code1), kSelf, out, c) == IcmpResult::NotEchoRequest);
    CHECK(c.malformed == 2);
    CHECK(c.other_types == 1);
    CHECK(out.frames.size() == 1);
    out.room = 1;
    CHECK(answer_echo6(icmp6_of(req), kSelf, out, c) == IcmpResult::NoBuffer);
    CHECK(c.no_buffer == 1);
}

TEST_CASE("icmp6: a VLAN-tagged echo request is answered on the same VLAN", "[icmp][ipv6]") {
    auto req = echo6_request(8);
    req.insert(req.begin() + 12, {0x81, 0x00, 0x00, 0x05});
    VectorSink out;
    IcmpCounters c;
    const Icmp6Message m = icmp6_of(req);
    CHECK(m.l3 == 18);
    REQUIRE(answer_echo6(m, kSelf, out, c) == IcmpResult::Replied);
    const Icmp6Message r = icmp6_of(out.frames.at(0));
    CHECK(r.l3 == 18);
    CHECK(r.type == 129);
    CHECK(rnic::wire::load_be16(&out.frames[0][14]) == 5);
}
