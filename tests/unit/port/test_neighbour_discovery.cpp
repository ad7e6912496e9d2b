// IPv6 neighbour discovery over plain frames: answers, learning, resolution through the shared
// neighbour cache, and RFC 4861's validity checks.
#include <catch2/catch.hpp>

#include "frames.hpp"
#include "rnic/port/neighbour_discovery.hpp"

using namespace rnic::port;
using namespace rnic::port::test;
using rnic::wire::MacAddr;

namespace {
constexpr uint64_t kSec = 1'000'000'000;
const MacAddr kOtherMac{0x02, 0, 0, 0, 0, 0x09};

void receive(NdAgent& nd, const std::vector<uint8_t>& frame, uint64_t now, VectorSink& out) {
    nd.receive(icmp6_of(frame), now, out);
}

MacAddr mac_at(const std::vector<uint8_t>& f, size_t offset) {
    MacAddr m;
    std::copy_n(f.begin() + static_cast<std::ptrdiff_t>(offset), 6, m.begin());
    return m;
}

// Checks an advertisement the agent sent: who it is for, what it says.
void check_advertisement(const std::vector<uint8_t>& f, const Ipv6Addr& target, const Ipv6Addr& dst,
                         const MacAddr& dst_mac, uint8_t flags) {
    const Icmp6Message m = icmp6_of(f);
    CHECK(m.type == 136);
    CHECK(m.hop_limit == 255);
    CHECK(m.eth_dst == dst_mac);
    CHECK(m.eth_src == kSelf.mac);
    CHECK(m.src == target);
    CHECK(m.dst == dst);
    REQUIRE(m.body.size() == 28);
    CHECK(m.body[0] == flags);
    CHECK(ip6_at(f, 14 + 40 + 8) == target);
    CHECK(m.body[20] == 2);  // target link-layer address option
    CHECK(m.body[21] == 1);
    CHECK(mac_at(f, 14 + 40 + 4 + 22) == kSelf.mac);
}

// Checks a solicitation the agent sent for `target`.
void check_solicitation(const std::vector<uint8_t>& f, const Ipv6Addr& target, const Ipv6Addr& src, bool unicast) {
    const Icmp6Message m = icmp6_of(f);
    CHECK(m.type == 135);
    CHECK(m.hop_limit == 255);
    CHECK(m.src == src);
    CHECK(m.dst == (unicast ? target : solicited_node(target)));
    CHECK(m.eth_dst == (unicast ? kPeerMac : multicast_mac(solicited_node(target))));
    CHECK(ip6_at(f, 14 + 40 + 8) == target);
    CHECK(m.body[20] == 1);  // source link-layer address option
    CHECK(mac_at(f, 14 + 40 + 4 + 22) == kSelf.mac);
}
}  // namespace

TEST_CASE("nd: our checksums match an independent builder (scapy) byte for byte", "[nd]") {
    // scapy: Ether/IPv6(src=fd77::2, dst=ff02::1:ff00:1, hlim=255)/ICMPv6ND_NS(tgt=fd77::1)/
    // ICMPv6NDOptSrcLLAddr(02:00:00:00:00:02)
    const auto scapy = from_hex(
        "3333ff00000102000000000286dd6000000000203afffd770000000000000000000000000002ff0200000000000000000001ff000001"
        "87007ca900000000fd7700000000000000000000000000010101020000000002");
    CHECK(solicitation(kSelfIp6) == scapy);
    CHECK(parse_icmp6(scapy));
}

TEST_CASE("nd: a solicitation for our address is answered to the asker, who is learnt", "[nd]") {
    for (const Ipv6Addr& target : {kSelfIp6, kSelf.ipv6[0].addr}) {
        NdAgent nd(kSelf);
        VectorSink out;
        receive(nd, solicitation(target), 0, out);
        REQUIRE(out.frames.size() == 1);
        check_advertisement(out.frames[0], target, kPeerIp6, kPeerMac, 0x60);  // solicited, override
        CHECK(nd.counters().solicitations_received == 1);
        CHECK(nd.counters().advertisements_sent == 1);
        // Learnt as stale (RFC 4861 7.2.3): usable at once, and its first use probes it.
        CHECK(nd.resolve(kPeerIp6, 1, out) == kPeerMac);
        REQUIRE(out.frames.size() == 2);
        check_solicitation(out.frames[1], kPeerIp6, kSelfIp6, true);
        // A confirming answer ends the probe; the next use sends nothing.
        receive(nd, advertisement(kPeerIp6, 0x60), 2, out);
        CHECK(nd.resolve(kPeerIp6, 3, out) == kPeerMac);
        CHECK(out.frames.size() == 2);
    }
}

TEST_CASE("nd: a unicast solicitation is answered too, the reply going to the option's MAC", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    auto body = nd_body(0, kSelfIp6, 1, kOtherMac);
    receive(nd, icmp6_frame(135, body, kPeerIp6, kSelfIp6, kSelf.mac), 0, out);
    REQUIRE(out.frames.size() == 1);
    check_advertisement(out.frames[0], kSelfIp6, kPeerIp6, kOtherMac, 0x60);
    // Without the option the frame's source MAC is used, and nothing is learnt.
    NdAgent bare(kSelf);
    receive(bare, icmp6_frame(135, nd_body(0, kSelfIp6), kPeerIp6, kSelfIp6, kSelf.mac), 0, out);
    REQUIRE(out.frames.size() == 2);
    check_advertisement(out.frames[1], kSelfIp6, kPeerIp6, kPeerMac, 0x60);
    CHECK(bare.entries() == 0);
}

TEST_CASE("nd: solicitations for others teach nothing, off-link askers are answered, not learnt", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    receive(nd, solicitation(parse_ipv6_prefix("fd77::9")->addr), 0, out);  // (classify drops these first)
    CHECK(out.frames.empty());
    CHECK(nd.entries() == 0);
    CHECK(nd.counters().ignored == 1);
    const Ipv6Addr far = parse_ipv6_prefix("2001:db8::7")->addr;
    receive(nd, solicitation(kSelfIp6, far), 0, out);
    REQUIRE(out.frames.size() == 1);
    CHECK(icmp6_of(out.frames[0]).dst == far);
    CHECK(nd.entries() == 0);
}

TEST_CASE("nd: hop limit, code, length, options and multicast rules are enforced", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    receive(nd, solicitation(kSelfIp6, kPeerIp6, 254), 0, out);  // came through a router
    receive(nd, advertisement(kPeerIp6, 0x60, kPeerMac, 64), 0, out);
    CHECK(nd.counters().bad_hop_limit == 2);
    const Ipv6Addr group = solicited_node(kSelfIp6);
    const MacAddr gmac = multicast_mac(group);
    receive(nd, icmp6_frame(135, nd_body(0, kSelfIp6, 1), kPeerIp6, group, gmac, 255, 1), 0, out);  // code 1
    receive(nd, icmp6_frame(135, std::vector<uint8_t>(16, 0), kPeerIp6, group, gmac), 0, out);      // too short
    auto zero_option = nd_body(0, kSelfIp6, 1);
    zero_option[21] = 0;
    receive(nd, icmp6_frame(135, zero_option, kPeerIp6, group, gmac), 0, out);
    auto overrun = nd_body(0, kSelfIp6, 1);
    overrun[21] = 2;
    receive(nd, icmp6_frame(135, overrun, kPeerIp6, group, gmac), 0, out);
    receive(nd, icmp6_frame(135, nd_body(0, kAllNodes, 1), kPeerIp6, group, gmac), 0, out);  // multicast target
    receive(nd, icmp6_frame(135, nd_body(0, kSelfIp6, 1), kAllNodes, group, gmac), 0, out);  // multicast source
    // A DAD probe carries no source address option.
    receive(nd, icmp6_frame(135, nd_body(0, kSelfIp6, 1), Ipv6Addr{}, group, gmac), 0, out);
    // A solicited advertisement is never sent to a group.
    receive(nd, icmp6_frame(136, nd_body(0x60, kPeerIp6, 2), kPeerIp6, kAllNodes, multicast_mac(kAllNodes)), 0, out);
    CHECK(nd.counters().invalid == 8);
    CHECK(out.frames.empty());
    CHECK(nd.entries() == 0);
    // Unknown options are skipped; the link-layer address after them is still found.
    auto with_unknown = nd_body(0, kSelfIp6);
    with_unknown.insert(with_unknown.end(), {14, 1, 0, 0, 0, 0, 0, 0});  // a nonce option
    with_unknown.insert(with_unknown.end(), {1, 1, 0x02, 0, 0, 0, 0, 0x02});
    receive(nd, icmp6_frame(135, with_unknown, kPeerIp6, group, gmac), 0, out);
    CHECK(out.frames.size() == 1);
    CHECK(nd.entries() == 1);
}

TEST_CASE("nd: a duplicate address detection probe for our address is defended", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    receive(nd, solicitation(kSelfIp6, Ipv6Addr{}), 0, out);
    REQUIRE(out.frames.size() == 1);
    check_advertisement(out.frames[0], kSelfIp6, kAllNodes, multicast_mac(kAllNodes), 0x20);
    CHECK(nd.counters().address_conflicts == 1);
    CHECK(nd.entries() == 0);
}

TEST_CASE("nd: the unsolicited advertisement at start names every address, override set", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    nd.announce(out);
    REQUIRE(out.frames.size() == kSelf.ipv6.size());
    for (size_t i = 0; i < kSelf.ipv6.size(); ++i)
        check_advertisement(out.frames[i], kSelf.ipv6[i].addr, kAllNodes, multicast_mac(kAllNodes), 0x20);
    CHECK(nd.counters().unsolicited_sent == 2);
}

TEST_CASE("nd: resolution solicits the group, retries, queues frames and releases them on the answer", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    std::vector<uint8_t> frame(80, 0xAB);
    nd.enqueue(kPeerIp6, frame, 0, out);
    nd.enqueue(kPeerIp6, frame, 0, out);
    REQUIRE(out.frames.size() == 1);  // one solicitation, not one per frame
    check_solicitation(out.frames[0], kPeerIp6, kSelfIp6, false);
    CHECK(nd.next_deadline() == kSec);
    nd.advance(kSec / 2, out);
    CHECK(out.frames.size() == 1);
    nd.advance(kSec, out);
    REQUIRE(out.frames.size() == 2);  // retry
    check_solicitation(out.frames[1], kPeerIp6, kSelfIp6, false);
    CHECK(nd.counters().solicitations_sent == 2);

    receive(nd, advertisement(kPeerIp6, 0x60), kSec + 5, out);
    REQUIRE(out.frames.size() == 4);
    for (size_t i = 2; i < 4; ++i) {
        CHECK(mac_at(out.frames[i], 0) == kPeerMac);
        CHECK(std::all_of(out.frames[i].begin() + 6, out.frames[i].end(), [](uint8_t b) { return b == 0xAB; }));
    }
    CHECK(nd.cache().counters().resolved == 1);
    CHECK(nd.counters().advertisements_received == 1);
    CHECK(nd.resolve(kPeerIp6, kSec + 6, out) == kPeerMac);
    CHECK(out.frames.size() == 4);

    // A link-local neighbour is asked from our link-local address.
    CHECK_FALSE(nd.resolve(kPeerLinkLocal, kSec + 7, out));
    REQUIRE(out.frames.size() == 5);
    check_solicitation(out.frames[4], kPeerLinkLocal, kSelf.ipv6[0].addr, false);
}

TEST_CASE("nd: a neighbour that never answers fails, drops its queue, and is asked again later", "[nd]") {
    NeighbourConfig cfg;
    NdAgent nd(kSelf, cfg);
    VectorSink out;
    std::vector<uint8_t> frame(80, 1);
    nd.enqueue(kPeerIp6, frame, 0, out);
    for (uint64_t t = 0; t <= cfg.max_requests * cfg.retry_ns && !nd.unreachable(kPeerIp6); t += kSec / 10)
        nd.advance(t, out);
    CHECK(nd.unreachable(kPeerIp6));
    CHECK(nd.counters().solicitations_sent == cfg.max_requests);
    CHECK(nd.cache().counters().resolution_failures == 1);
    CHECK(nd.cache().counters().queued_dropped == 1);
    nd.enqueue(kPeerIp6, frame, 4 * kSec, out);  // still failed: dropped at once
    CHECK(nd.cache().counters().queued_dropped == 2);
    for (uint64_t t = 4 * kSec; t <= 10 * kSec; t += kSec / 10) nd.advance(t, out);
    CHECK(nd.entries() == 0);
    CHECK_FALSE(nd.resolve(kPeerIp6, 11 * kSec, out));
    CHECK(nd.counters().solicitations_sent == cfg.max_requests + 1);
}

TEST_CASE("nd: a stale entry is used while a unicast probe refreshes it", "[nd]") {
    NeighbourConfig cfg;
    NdAgent nd(kSelf, cfg);
    VectorSink out;
    nd.resolve(kPeerIp6, 0, out);
    receive(nd, advertisement(kPeerIp6, 0x60), 1, out);
    out.frames.clear();
    CHECK(nd.resolve(kPeerIp6, cfg.reachable_ns, out) == kPeerMac);
    CHECK(out.frames.empty());  // still reachable
    CHECK(nd.resolve(kPeerIp6, cfg.reachable_ns + 2, out) == kPeerMac);
    REQUIRE(out.frames.size() == 1);
    check_solicitation(out.frames[0], kPeerIp6, kSelfIp6, true);
    for (uint64_t t = cfg.reachable_ns; t <= cfg.reachable_ns + 5 * kSec; t += kSec / 10) nd.advance(t, out);
    CHECK_FALSE(nd.resolve(kPeerIp6, cfg.reachable_ns + 5 * kSec, out));
}

TEST_CASE("nd: Linux's answer to a unicast probe (no target address option) confirms the entry", "[nd]") {
    NeighbourConfig cfg;
    NdAgent nd(kSelf, cfg);
    VectorSink out;
    const auto answer_without_option = [] {
        return icmp6_frame(136, nd_body(0x60, kPeerIp6), kPeerIp6, kSelfIp6, kSelf.mac);  // S and O, no TLLA
    };
    // While incomplete there is nothing to learn from it.
    nd.resolve(kPeerIp6, 0, out);
    receive(nd, answer_without_option(), 1, out);
    CHECK_FALSE(nd.resolve(kPeerIp6, 2, out));
    CHECK(nd.counters().ignored == 1);
    receive(nd, advertisement(kPeerIp6, 0x60), 3, out);
    // Stale, probed, confirmed: no retries follow and the entry is trusted for reachable_ns again.
    const uint64_t stale = cfg.reachable_ns + 10;
    out.frames.clear();
    CHECK(nd.resolve(kPeerIp6, stale, out) == kPeerMac);
    REQUIRE(out.frames.size() == 1);
    receive(nd, answer_without_option(), stale + 1, out);
    for (uint64_t t = stale; t <= stale + 5 * kSec; t += kSec / 10) nd.advance(t, out);
    CHECK(out.frames.size() == 1);
    CHECK(nd.resolve(kPeerIp6, stale + 5 * kSec, out) == kPeerMac);
    CHECK(out.frames.size() == 1);
}

TEST_CASE("nd: advertisements follow RFC 4861 7.2.5 (no new entries, override, conflicts)", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    receive(nd, advertisement(kPeerIp6, 0x20), 0, out);  // unsolicited, for a stranger
    CHECK(nd.entries() == 0);
    CHECK(nd.counters().ignored == 1);
    nd.resolve(kPeerIp6, 0, out);
    receive(nd, advertisement(kPeerIp6, 0x60), 1, out);
    // Without the override flag another MAC does not replace the one we have...
    receive(nd, advertisement(kPeerIp6, 0x00, kOtherMac), 2, out);
    CHECK(nd.resolve(kPeerIp6, 3, out) == kPeerMac);
    // ...with it, it does (unsolicited: stale, so the next use probes the new MAC).
    out.frames.clear();
    receive(nd, advertisement(kPeerIp6, 0x20, kOtherMac), 4, out);
    CHECK(nd.resolve(kPeerIp6, 5, out) == kOtherMac);
    REQUIRE(out.frames.size() == 1);
    CHECK(icmp6_of(out.frames[0]).eth_dst == kOtherMac);
    // Someone else advertising our address is a conflict.
    receive(nd, icmp6_frame(136, nd_body(0x20, kSelfIp6, 2, kOtherMac), kSelfIp6, kAllNodes, multicast_mac(kAllNodes)),
            6, out);
    CHECK(nd.counters().address_conflicts == 1);
}

TEST_CASE("nd: the queue per neighbour is bounded and a full sink drops, it does not crash", "[nd]") {
    NeighbourConfig cfg;
    cfg.max_queued_per_neighbour = 2;
    NdAgent nd(kSelf, cfg);
    VectorSink out;
    std::vector<uint8_t> frame(80, 1);
    for (int i = 0; i < 5; ++i) nd.enqueue(kPeerIp6, frame, 0, out);
    CHECK(nd.cache().counters().queued_frames == 2);
    CHECK(nd.cache().counters().queued_dropped == 3);
    VectorSink full;
    full.room = 0;
    receive(nd, solicitation(kSelfIp6), 0, full);
    nd.announce(full);
    CHECK(nd.counters().advertisements_sent == 0);
    CHECK(nd.counters().unsolicited_sent == 0);
    // The answer releases the queue into a sink with no room: counted as dropped.
    receive(nd, advertisement(kPeerIp6, 0x60), 1, full);
    CHECK(nd.cache().counters().queued_dropped == 5);
}

TEST_CASE("nd: VLAN-tagged neighbour discovery is not served (as ARP)", "[nd]") {
    NdAgent nd(kSelf);
    VectorSink out;
    auto f = solicitation(kSelfIp6);
    f.insert(f.begin() + 12, {0x81, 0x00, 0x00, 0x05});
    receive(nd, f, 0, out);
    CHECK(out.frames.empty());
    CHECK(nd.counters().ignored == 1);
}
