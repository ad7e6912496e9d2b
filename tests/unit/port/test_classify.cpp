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
    CHECK(classify(v6, kSelf) == FrameClass::Malformed);  // an IPv4 header behind the IPv6 EtherType
}

TEST_CASE("classify: IPv6 for our addresses and groups, under the right MACs", "[classify][ipv6]") {
    CHECK(classify(ipv6_frame(17, 8 + 12 + 4), kSelf) == FrameClass::RoceForUs);
    CHECK(classify(ipv6_frame(17, 24, kSelf.mac, kSelf.ipv6[0].addr), kSelf) == FrameClass::RoceForUs);
    CHECK(classify(ipv6_frame(58, 8), kSelf) == FrameClass::Icmp6ForUs);
    CHECK(classify(solicitation(kSelfIp6), kSelf) == FrameClass::Icmp6ForUs);
    CHECK(classify(solicitation(kSelf.ipv6[0].addr), kSelf) == FrameClass::Icmp6ForUs);
    CHECK(classify(advertisement(kPeerIp6, 0x20), kSelf) == FrameClass::Icmp6ForUs);  // to all-nodes
    // Other addresses, other groups, a group under the wrong MAC, our address under another MAC.
    CHECK(classify(ipv6_frame(17, 24, kSelf.mac, kPeerIp6), kSelf) == FrameClass::NotForUs);
    CHECK(classify(solicitation(kPeerIp6), kSelf) == FrameClass::NotForUs);
    const Ipv6Addr all_routers{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    CHECK(classify(ipv6_frame(58, 8, multicast_mac(all_routers), all_routers), kSelf) == FrameClass::NotForUs);
    CHECK(classify(ipv6_frame(58, 8, kSelf.mac, kAllNodes), kSelf) == FrameClass::NotForUs);
    CHECK(classify(ipv6_frame(58, 8, kPeerMac), kSelf) == FrameClass::NotForUs);
    // Ours but not served: TCP, another UDP port, extension headers, UDP to a group.
    CHECK(classify(ipv6_frame(6, 20), kSelf) == FrameClass::OtherForUs);
    CHECK(classify(ipv6_frame(17, 24, kSelf.mac, kSelfIp6, 53), kSelf) == FrameClass::OtherForUs);
    CHECK(classify(ipv6_frame(0, 8), kSelf) == FrameClass::OtherForUs);  // hop-by-hop (MLD queries)
    CHECK(classify(ipv6_frame(17, 24, multicast_mac(kAllNodes), kAllNodes), kSelf) == FrameClass::OtherForUs);
    // Truncation at every length never reads past the end.
    const auto good = ipv6_frame(17, 24);
    CHECK(classify(std::span(good.data(), 14 + 39), kSelf) == FrameClass::Malformed);
    CHECK(classify(std::span(good.data(), 14 + 40 + 7), kSelf) == FrameClass::Malformed);
    for (size_t len = 0; len <= good.size(); ++len) (void)classify(std::span(good.data(), len), kSelf);
    auto tagged = good;
    tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x00, 0x05});
    CHECK(classify(tagged, kSelf) == FrameClass::RoceForUs);
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

TEST_CASE("host address: IPv6 prefixes, link-local from the MAC, solicited-node groups", "[classify][ipv6]") {
    const auto p = parse_ipv6_prefix("fd77::1/64");
    REQUIRE(p);
    CHECK(p->addr == kSelfIp6);
    CHECK(p->length == 64);
    CHECK(parse_ipv6_prefix("fd77::1")->length == 128);
    CHECK(parse_ipv6_prefix("2001:db8::1/0")->length == 0);
    for (const char* bad : {"fd77::1/129", "fd77::1/", "fd77::zz/64", "ff02::1/64", "::/0", "::1/128",
                            "::ffff:10.0.0.1/96", "10.0.0.1/24"})
        CHECK_FALSE(parse_ipv6_prefix(bad));
    // RFC 4291 appendix A: 00:1b:21:3c:4d:5e -> fe80::21b:21ff:fe3c:4d5e (the U/L bit flipped).
    CHECK(ipv6_to_string(link_local_from_mac({0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e})) == "fe80::21b:21ff:fe3c:4d5e");
    CHECK(ipv6_to_string(link_local_from_mac({0x02, 0, 0, 0, 0, 0x01})) == "fe80::ff:fe00:1");
    CHECK(ipv6_to_string(solicited_node(parse_ipv6_prefix("fd77::12:3456:789a")->addr)) == "ff02::1:ff56:789a");
    CHECK(multicast_mac(solicited_node(kSelfIp6)) == rnic::wire::MacAddr{0x33, 0x33, 0xff, 0, 0, 0x01});
    // Link-local first, configured ones after, no duplicates; GIDs in the same order after IPv4.
    REQUIRE(kSelf.ipv6.size() == 2);
    CHECK(is_link_local(kSelf.ipv6[0].addr));
    CHECK(with_link_local(kSelf.mac, kSelf.ipv6).size() == 2);
    const auto gids = gid_table(kSelf);
    REQUIRE(gids.size() == 3);
    CHECK(gids[0].to_string() == "::ffff:10.77.0.1");
    CHECK(gids[1].to_string() == "fe80::ff:fe00:1");
    CHECK(gids[2].to_string() == "fd77::1");
    // On-link: link-local and our prefixes; the source we speak from follows the peer's prefix.
    CHECK(kSelf.on_link(kPeerIp6));
    CHECK(kSelf.on_link(kPeerLinkLocal));
    CHECK_FALSE(kSelf.on_link(parse_ipv6_prefix("fd78::2")->addr));
    CHECK(kSelf.source_for(kPeerIp6) == kSelfIp6);
    CHECK(kSelf.source_for(kPeerLinkLocal) == kSelf.ipv6[0].addr);
    CHECK(kSelf.owns(kSelfIp6));
    CHECK(kSelf.in_group(kAllNodes));
    CHECK(kSelf.in_group(solicited_node(kSelf.ipv6[0].addr)));
    CHECK_FALSE(kSelf.in_group(solicited_node(kPeerIp6)));
    CHECK(Ipv6Prefix{kSelfIp6, 63}.contains(parse_ipv6_prefix("fd77::1:0:0:2")->addr));
    CHECK_FALSE(Ipv6Prefix{kSelfIp6, 65}.contains(parse_ipv6_prefix("fd77::8000:0:0:2")->addr));
}
