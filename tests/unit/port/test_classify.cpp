#include <catch2/catch.hpp>

#include "frames.hpp"
#include "rnic/port/classify.hpp"

using namespace rnic::port;
using namespace rnic::port::test;

TEST_CASE("classify: ARP, ICMP and RoCEv2 for us are told apart", "[classify]") {
    CHECK(classify(arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4), kSelf) == FrameClass::Arp);
    CHECK(classify(echo_request(56), kSelf) == FrameClass::IcmpForUs);
    CHECK(classify(ipv4_frame(17, 8 + 12 + 4), kSelf) == FrameClass::RoceForUs);
}

TEST_CASE("classify: frames for another MAC or IP are not for us", "[classify]") {
    CHECK(classify(ipv4_frame(17, 24, kPeerMac), kSelf) == FrameClass::NotForUs);
    CHECK(classify(ipv4_frame(17, 24, kSelf.mac, kPeerIp), kSelf) == FrameClass::NotForUs);
    CHECK(classify(ipv4_frame(17, 24, kBroadcastMac), kSelf) == FrameClass::NotForUs);
}

TEST_CASE("classify: other protocols and ports for us are counted apart", "[classify]") {
    CHECK(classify(ipv4_frame(6, 40), kSelf) == FrameClass::OtherForUs);
    CHECK(classify(ipv4_frame(17, 24, kSelf.mac, kSelf.ipv4, 53), kSelf) == FrameClass::OtherForUs);
    auto frag = ipv4_frame(17, 24);
    rnic::wire::store_be16(&frag[14 + 6], 0x2000);  // MF: RoCE never fragments
    CHECK(classify(frag, kSelf) == FrameClass::OtherForUs);
    auto v6 = ipv4_frame(17, 24);
    rnic::wire::store_be16(&v6[12], 0x86DD);
    CHECK(classify(v6, kSelf) == FrameClass::Ipv6);
}

TEST_CASE("classify: truncated and inconsistent headers are malformed, never read past the end", "[classify]") {
    const auto good = ipv4_frame(17, 24);
    for (size_t len : {0, 5, 13}) CHECK(classify(std::span(good.data(), len), kSelf) == FrameClass::Malformed);
    CHECK(classify(std::span(good.data(), 14 + 19), kSelf) == FrameClass::Malformed);
    CHECK(classify(std::span(good.data(), 14 + 20 + 7), kSelf) == FrameClass::Malformed);
    auto bad_ihl = good;
    bad_ihl[14] = 0x44;
    CHECK(classify(bad_ihl, kSelf) == FrameClass::Malformed);
    auto v5 = good;
    v5[14] = 0x55;
    CHECK(classify(v5, kSelf) == FrameClass::Malformed);
    // Every prefix of a valid frame classifies without crashing (ASan checks the reads).
    for (size_t len = 0; len <= good.size(); ++len) (void)classify(std::span(good.data(), len), kSelf);
}

TEST_CASE("classify: VLAN-tagged RoCEv2 is found behind the tag", "[classify]") {
    auto f = ipv4_frame(17, 24);
    f.insert(f.begin() + 12, {0x81, 0x00, 0x00, 0x05});
    CHECK(classify(f, kSelf) == FrameClass::RoceForUs);
}

TEST_CASE("host address: parsing IPv4 prefixes and MACs", "[classify]") {
    const auto p = parse_ipv4_prefix("10.77.0.1/24");
    REQUIRE(p);
    CHECK(p->addr == 0x0A4D0001);
    CHECK(p->length == 24);
    CHECK_FALSE(parse_ipv4_prefix("10.77.0.1/33"));
    CHECK_FALSE(parse_ipv4_prefix("10.77.0/24"));
    CHECK_FALSE(parse_ipv4_prefix("10.77.0.1/"));
    CHECK(parse_mac("02:00:00:00:00:2a") == rnic::wire::MacAddr{2, 0, 0, 0, 0, 0x2a});
    CHECK_FALSE(parse_mac("02:00:00:00:00"));
    CHECK_FALSE(parse_mac("02:00:00:00:00:zz"));
    CHECK(kSelf.on_link(kPeerIp));
    CHECK_FALSE(kSelf.on_link(0x0A4E0002));
}
