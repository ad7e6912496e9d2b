// rnicd's TPACKET_V2 ring port against the real kernel, on the loopback interface of a network
// namespace of the test's own: what enters the ring, frames whole and in order, the ring socket as
// the wake-up, a full ring's drops, one sendto() per burst.
#include <arpa/inet.h>
#include <net/ethernet.h>
#include <poll.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "frames.hpp"
#include "loopback_bed.hpp"
#include "rnic/port/packet_ring_port.hpp"

using namespace rnic;
using namespace rnic::port::test;

namespace {

port::PacketRingConfig config_on_lo(unsigned rx_frames = 64) {
    port::PacketRingConfig c;
    c.iface = "lo";
    c.ipv4 = kSelf.ipv4;
    c.rx_frames = rx_frames;
    c.tx_frames = 64;
    return c;
}

// A ring port on the loopback interface of a namespace of the test's own; none (and a warning)
// where the test cannot run.
std::unique_ptr<port::PacketRingPort> ring_on_lo(unsigned rx_frames = 64) {
    if (!private_loopback()) {
        WARN("needs root and network namespaces: skipped");
        return nullptr;
    }
    auto p = port::PacketRingPort::open(config_on_lo(rx_frames));
    REQUIRE(p);
    return std::move(*p);
}

// Waits (bounded) until the ring socket says a frame is there.
bool readable(const port::PacketRingPort& p, int timeout_ms = 5000) {
    pollfd fd{p.rx_wait_fd(), POLLIN, 0};
    return poll(&fd, 1, timeout_ms) == 1;
}

// Every frame the ring holds now, copied out (the ring's memory goes back at release).
std::vector<std::vector<uint8_t>> take_all(port::PacketRingPort& p) {
    std::vector<std::vector<uint8_t>> got;
    std::array<port::RxFrame, 8> burst;
    for (int i = 0; i < 1000; ++i) {  // bounded
        const size_t n = p.rx_burst(burst);
        for (size_t k = 0; k < n; ++k) got.emplace_back(burst[k].begin(), burst[k].end());
        p.release_rx();
        if (n == 0) break;
    }
    return got;
}

// A UDP 4791 frame to us whose payload starts with `tag`.
std::vector<uint8_t> tagged(uint8_t tag, size_t payload = 8 + 12 + 16 + 4) {
    auto f = ipv4_frame(17, payload);
    f[14 + 20 + 8] = tag;
    return f;
}

}  // namespace

TEST_CASE("ring port: served frames arrive whole and in order, others never enter the ring", "[ring]") {
    const auto ring = ring_on_lo();
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    Injector inj;
    auto lldp = tagged(9);
    wire::store_be16(&lldp[12], 0x88CC);
    const std::vector<std::vector<uint8_t>> sent{tagged(1), arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4),
                                                 tagged(2, 4000), echo_request(56), tagged(3)};
    inj.send(sent[0]);
    inj.send(ipv4_frame(17, 40, kSelf.mac, kSelf.ipv4, 4792));  // another UDP port
    inj.send(sent[1]);
    inj.send(lldp);
    inj.send(sent[2]);
    inj.send(ipv4_frame(17, 40, kSelf.mac, kPeerIp));  // another address
    inj.send(sent[3]);
    inj.send(sent[4]);
    REQUIRE(readable(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the rest of them too
    const auto got = take_all(port);
    CHECK(got == sent);
    CHECK(port.stats().rx_frames == sent.size());
    CHECK(port.stats().rx_missed == 0);
}

TEST_CASE("ring port: the ring socket is readable exactly while a frame waits in the ring", "[ring]") {
    const auto ring = ring_on_lo();
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    Injector inj;
    CHECK_FALSE(readable(port, 0));
    inj.send(tagged(1));
    CHECK(readable(port));
    std::array<port::RxFrame, 4> burst;
    REQUIRE(port.rx_burst(burst) == 1);
    port.release_rx();
    CHECK_FALSE(readable(port, 0));
    CHECK(port.rx_burst(burst) == 0);
}

TEST_CASE("ring port: a full ring drops and counts, and released frames take the next ones", "[ring]") {
    const auto ring = ring_on_lo(16);
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    Injector inj;
    for (uint8_t i = 0; i < 40; ++i) inj.send(tagged(i));
    REQUIRE(readable(port));
    auto got = take_all(port);
    REQUIRE(got.size() == 16);
    for (uint8_t i = 0; i < 16; ++i) CHECK(got[i][14 + 20 + 8] == i);  // the first 16, in order
    CHECK(port.stats().rx_missed == 24);
    inj.send(tagged(77));
    REQUIRE(readable(port));
    got = take_all(port);
    REQUIRE(got.size() == 1);
    CHECK(got[0][14 + 20 + 8] == 77);
}

TEST_CASE("ring port: a frame longer than a ring frame is counted, never handed over cut", "[ring]") {
    const auto ring = ring_on_lo();
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    Injector inj;
    inj.send(tagged(1, 9000));  // lo's MTU carries it; the ring frame (8 KiB) does not
    inj.send(tagged(2));
    REQUIRE(readable(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto got = take_all(port);
    REQUIRE(got.size() == 1);
    CHECK(got[0][14 + 20 + 8] == 2);
    CHECK(port.stats().rx_missed == 1);
}

TEST_CASE("ring port: frames built in the TX ring go out whole, one sendto() per burst", "[ring]") {
    const auto ring = ring_on_lo();
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    // What loopback hands back: a plain packet socket sees each frame once, as received.
    const int cap = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    REQUIRE(cap >= 0);
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    REQUIRE(bind(cap, reinterpret_cast<const sockaddr*>(&at), sizeof at) == 0);
    const int big = 1 << 22;
    setsockopt(cap, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);

    std::vector<std::vector<uint8_t>> frames;
    for (uint8_t i = 0; i < 40; ++i) {
        auto f = ipv4_frame(17, 40 + i * 50u, kPeerMac, kPeerIp);  // not to us: our ring stays out of it
        f[14 + 20 + 8] = i;
        frames.push_back(f);
        const std::span<uint8_t> room = port.tx().allocate(f.size());
        REQUIRE(room.size() == f.size());
        std::copy(f.begin(), f.end(), room.begin());
        port.tx().commit(f.size());
        CHECK(std::equal(f.begin(), f.end(), port.last_committed().begin(), port.last_committed().end()));
    }
    CHECK(port.flush_tx() == 8);  // the 32 before went out when the burst filled up
    CHECK(port.flush_tx() == 0);
    CHECK(port.stats().tx_frames == 40);
    CHECK(port.stats().tx_bursts == 2);

    std::vector<std::vector<uint8_t>> seen;
    for (int i = 0; i < 200 && seen.size() < frames.size(); ++i) {  // bounded
        pollfd fd{cap, POLLIN, 0};
        if (poll(&fd, 1, 2000) != 1) break;
        std::vector<uint8_t> buf(9000);
        const ssize_t n = recv(cap, buf.data(), buf.size(), 0);
        REQUIRE(n > 0);
        buf.resize(static_cast<size_t>(n));
        seen.push_back(buf);
    }
    close(cap);
    CHECK(seen == frames);

    // Too long for a ring frame: no room, counted.
    CHECK(port.tx().allocate(9000).empty());
    CHECK(port.stats().tx_no_buffer == 1);
}

TEST_CASE("ring port: with arrival stamps on, the wait's end names the kernel's arrival time", "[ring]") {
    const auto ring = ring_on_lo();
    if (!ring) return;
    port::PacketRingPort& port = *ring;
    Injector inj;
    port.set_arrival_stamps(true);
    auto ns = [](const timespec& t) { return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec); };
    timespec before{}, after{};
    clock_gettime(CLOCK_REALTIME, &before);
    inj.send(tagged(1));
    REQUIRE(readable(port));
    clock_gettime(CLOCK_REALTIME, &after);
    port.rx_wait_done();
    CHECK(port.wait_arrival_realtime_ns() >= ns(before));
    CHECK(port.wait_arrival_realtime_ns() <= ns(after));
    take_all(port);
    port.rx_wait_done();
    CHECK(port.wait_arrival_realtime_ns() == 0);  // nothing waiting: no stamp
}

TEST_CASE("ring port: an unknown interface or ring size is an error message", "[ring]") {
    port::PacketRingConfig missing;
    missing.iface = "rnic-no-such-if";
    auto p = port::PacketRingPort::open(missing);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("rnic-no-such-if") != std::string::npos);
    port::PacketRingConfig odd = config_on_lo();
    odd.rx_frames = 100;
    auto q = port::PacketRingPort::open(odd);
    REQUIRE_FALSE(q);
    CHECK(q.error().find("powers of two") != std::string::npos);
}
