#include <catch2/catch.hpp>

#include "frames.hpp"

using namespace rnic::port;
using namespace rnic::port::test;

namespace {
constexpr uint64_t kSec = 1'000'000'000;
}

TEST_CASE("arp: a request for our address is answered to the asker", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    arp.receive(arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4), 0, out);
    REQUIRE(out.frames.size() == 1);
    CHECK(out.frames[0].size() == 60);  // padded to the Ethernet minimum
    const auto reply = parse_arp(out.frames[0]);
    REQUIRE(reply);
    CHECK(reply->op == 2);
    CHECK(reply->eth_dst == kPeerMac);
    CHECK(reply->sender_mac == kSelf.mac);
    CHECK(reply->sender_ip == kSelf.ipv4);
    CHECK(reply->target_mac == kPeerMac);
    CHECK(reply->target_ip == kPeerIp);
    CHECK(arp.counters().replies_sent == 1);
    // The asker is learnt: no request needed to answer it.
    CHECK(arp.resolve(kPeerIp, 1, out) == kPeerMac);
    CHECK(out.frames.size() == 1);
}

TEST_CASE("arp: requests for other addresses are not answered and do not fill the cache", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    arp.receive(arp_frame(1, kPeerMac, kPeerIp, 0x0A4D0009), 0, out);
    CHECK(out.frames.empty());
    CHECK(arp.entries() == 0);
    CHECK_FALSE(arp.resolve(kPeerIp, 0, out));  // starts a resolution instead
}

TEST_CASE("arp: the gratuitous announcement names us as sender and target", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    arp.announce(out);
    REQUIRE(out.frames.size() == 1);
    const auto g = parse_arp(out.frames[0]);
    REQUIRE(g);
    CHECK(g->eth_dst == kBroadcastMac);
    CHECK(g->sender_ip == kSelf.ipv4);
    CHECK(g->target_ip == kSelf.ipv4);
}

TEST_CASE("arp: resolution sends one request, retries, queues frames and releases them on reply", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    std::vector<uint8_t> frame(64, 0xAB);
    arp.enqueue(kPeerIp, frame, 0, out);
    arp.enqueue(kPeerIp, frame, 0, out);
    REQUIRE(out.frames.size() == 1);  // one request, not one per frame
    CHECK(parse_arp(out.frames[0])->target_ip == kPeerIp);
    CHECK(arp.next_deadline() == kSec);
    arp.advance(kSec / 2, out);
    CHECK(out.frames.size() == 1);
    arp.advance(kSec, out);
    CHECK(out.frames.size() == 2);  // retry
    CHECK(arp.counters().requests_sent == 2);

    arp.receive(arp_frame(2, kPeerMac, kPeerIp, kSelf.ipv4, kSelf.mac, kSelf.mac), kSec + 5, out);
    REQUIRE(out.frames.size() == 4);
    for (size_t i = 2; i < 4; ++i) {
        CHECK(std::equal(kPeerMac.begin(), kPeerMac.end(), out.frames[i].begin()));
        CHECK(std::all_of(out.frames[i].begin() + 6, out.frames[i].end(), [](uint8_t b) { return b == 0xAB; }));
    }
    CHECK(arp.cache().counters().resolved == 1);
    CHECK(arp.resolve(kPeerIp, kSec + 6, out) == kPeerMac);
}

TEST_CASE("arp: an address that never answers fails, drops its queue, and is retried later", "[arp]") {
    ArpConfig cfg;
    ArpAgent arp(kSelf, cfg);
    VectorSink out;
    std::vector<uint8_t> frame(64, 1);
    arp.enqueue(kPeerIp, frame, 0, out);
    for (uint64_t t = 0; t <= 10 * kSec; t += kSec / 10) arp.advance(t, out);
    CHECK(arp.counters().requests_sent == cfg.max_requests);
    CHECK(arp.cache().counters().resolution_failures == 1);
    CHECK(arp.cache().counters().queued_dropped == 1);
    // Failed entries are forgotten after failed_hold, then a new lookup asks again.
    CHECK(arp.entries() == 0);
    CHECK_FALSE(arp.resolve(kPeerIp, 11 * kSec, out));
    CHECK(arp.counters().requests_sent == cfg.max_requests + 1);
}

TEST_CASE("arp: queue per neighbour is bounded", "[arp]") {
    ArpConfig cfg;
    cfg.max_queued_per_neighbour = 2;
    ArpAgent arp(kSelf, cfg);
    VectorSink out;
    std::vector<uint8_t> frame(64, 1);
    for (int i = 0; i < 5; ++i) arp.enqueue(kPeerIp, frame, 0, out);
    CHECK(arp.cache().counters().queued_frames == 2);
    CHECK(arp.cache().counters().queued_dropped == 3);
}

TEST_CASE("arp: a stale entry is still used while a unicast probe refreshes it", "[arp]") {
    ArpConfig cfg;
    ArpAgent arp(kSelf, cfg);
    VectorSink out;
    arp.receive(arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4), 0, out);
    out.frames.clear();
    CHECK(arp.resolve(kPeerIp, cfg.reachable_ns + 1, out) == kPeerMac);
    REQUIRE(out.frames.size() == 1);
    CHECK(parse_arp(out.frames[0])->eth_dst == kPeerMac);  // unicast probe
    // No answer: after the retries the entry fails.
    for (uint64_t t = cfg.reachable_ns; t <= cfg.reachable_ns + 5 * kSec; t += kSec / 10) arp.advance(t, out);
    CHECK_FALSE(arp.resolve(kPeerIp, cfg.reachable_ns + 5 * kSec, out));
}

TEST_CASE("arp: malformed, foreign and conflicting frames are counted", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    auto f = arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4);
    f[14 + 4] = 8;  // hardware length
    arp.receive(f, 0, out);
    arp.receive(std::span(f.data(), 30), 0, out);
    CHECK(arp.counters().ignored == 2);
    arp.receive(arp_frame(2, kPeerMac, kSelf.ipv4, kSelf.ipv4), 0, out);  // someone claims our IP
    CHECK(arp.counters().address_conflicts == 1);
    CHECK(out.frames.empty());
    // Off-subnet senders asking for us are answered, not learnt.
    arp.receive(arp_frame(1, kPeerMac, 0xC0A80001, kSelf.ipv4), 0, out);
    CHECK(out.frames.size() == 1);
    CHECK(arp.entries() == 0);
}

TEST_CASE("arp: a full sink drops, it does not crash", "[arp]") {
    ArpAgent arp(kSelf);
    VectorSink out;
    out.room = 0;
    arp.receive(arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4), 0, out);
    arp.announce(out);
    CHECK(arp.counters().replies_sent == 0);
    CHECK(arp.counters().gratuitous_sent == 0);
}
