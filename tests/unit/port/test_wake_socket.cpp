// The RX wake socket's filter, run by the kernel: frames injected on the loopback interface of a
// network namespace of the test's own (unshare), so nothing outside the test sees them.
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>

#include "frames.hpp"
#include "loopback_bed.hpp"
#include "rnic/port/wake_socket.hpp"

using namespace rnic;
using namespace rnic::port::test;

namespace {

// ARP is always accepted, so an ARP frame from a MAC of its own marks the end of what came before.
const wire::MacAddr kMarkerMac{0x02, 0, 0, 0, 0, 0x99};
std::vector<uint8_t> marker() { return arp_frame(1, kMarkerMac, kPeerIp, kSelf.ipv4); }
bool is_marker(const uint8_t* copy) { return std::equal(kMarkerMac.begin(), kMarkerMac.end(), copy + 6); }

// How many copies of `frame` the wake socket got: send it and the marker, read up to the marker.
int copies_of(const port::WakeSocket& w, const Injector& inj, const std::vector<uint8_t>& frame) {
    inj.send(frame);
    inj.send(marker());
    int copies = 0;
    for (int reads = 0; reads < 64; ++reads) {
        pollfd p{w.fd(), POLLIN, 0};
        REQUIRE(poll(&p, 1, 5000) == 1);  // a bound against a hang, not a measurement
        uint8_t copy[64];
        const ssize_t n = recv(w.fd(), copy, sizeof copy, 0);
        REQUIRE(n == static_cast<ssize_t>(port::WakeSocket::kSnap));  // cut short: only arrival matters
        if (is_marker(copy)) return copies;
        ++copies;
    }
    FAIL("the marker never came");
    return -1;
}

}  // namespace

TEST_CASE("wake socket: the kernel keeps what the daemon serves and drops the rest", "[wake]") {
    if (!private_loopback()) {
        WARN("needs root and network namespaces: skipped");
        return;
    }
    auto w = port::WakeSocket::open("lo", kSelf.ipv4);
    REQUIRE(w);
    Injector inj;

    // Served: ARP, RoCEv2 and ICMP to our address, ICMPv6 and RoCEv2 over IPv6. One copy each:
    // the copy of our own transmission (the injector's, here) is not delivered.
    CHECK(copies_of(*w, inj, arp_frame(2, kPeerMac, kPeerIp, kSelf.ipv4)) == 1);
    CHECK(copies_of(*w, inj, ipv4_frame(17, 8 + 12 + 16 + 4)) == 1);
    CHECK(copies_of(*w, inj, echo_request(56)) == 1);
    CHECK(copies_of(*w, inj, ipv6_frame(58, 16)) == 1);
    CHECK(copies_of(*w, inj, ipv6_frame(17, 16)) == 1);

    // Not served: other UDP ports, another address, TCP, later IPv4 fragments, other IPv6, other
    // EtherTypes.
    CHECK(copies_of(*w, inj, ipv4_frame(17, 40, kSelf.mac, kSelf.ipv4, 4792)) == 0);
    CHECK(copies_of(*w, inj, ipv4_frame(17, 40, kSelf.mac, kPeerIp)) == 0);
    CHECK(copies_of(*w, inj, ipv4_frame(1, 40, kSelf.mac, kPeerIp)) == 0);
    CHECK(copies_of(*w, inj, ipv4_frame(6, 40)) == 0);
    auto fragment = ipv4_frame(17, 40);
    wire::store_be16(&fragment[14 + 6], 0x0010);  // offset 128 bytes: bytes 20.. are payload
    CHECK(copies_of(*w, inj, fragment) == 0);
    CHECK(copies_of(*w, inj, ipv6_frame(6, 16)) == 0);
    CHECK(copies_of(*w, inj, ipv6_frame(17, 16, kSelf.mac, kSelfIp6, 53)) == 0);
    auto other = ipv4_frame(17, 40);
    wire::store_be16(&other[12], 0x88CC);  // LLDP
    CHECK(copies_of(*w, inj, other) == 0);
    wire::store_be16(&other[12], 0x8808);  // MAC control: PAUSE and PFC end a nap
    CHECK(copies_of(*w, inj, other) == 1);

    // An IPv4 header with options moves the UDP header: the filter follows the header length.
    auto options = ipv4_frame(17, 4 + 8 + 12);
    options[14] = 0x46;
    std::fill(options.begin() + 34, options.begin() + 38, 1);  // four NOP options
    wire::store_be16(&options[38 + 2], 4791);
    CHECK(copies_of(*w, inj, options) == 1);
    wire::store_be16(&options[38 + 2], 4790);
    CHECK(copies_of(*w, inj, options) == 0);
}

TEST_CASE("wake socket: drain empties it, a full buffer drops copies instead of growing", "[wake]") {
    if (!private_loopback()) {
        WARN("needs root and network namespaces: skipped");
        return;
    }
    auto w = port::WakeSocket::open("lo", kSelf.ipv4);
    REQUIRE(w);
    Injector inj;
    for (int i = 0; i < 200; ++i) inj.send(ipv4_frame(17, 8 + 12 + 16 + 4));
    pollfd p{w->fd(), POLLIN, 0};
    REQUIRE(poll(&p, 1, 5000) == 1);
    const size_t drained = w->drain();
    CHECK(drained >= 1);
    CHECK(drained < 200);  // the small receive buffer keeps a handful
    CHECK(w->drain() == 0);
    p.revents = 0;
    CHECK(poll(&p, 1, 0) == 0);
}

TEST_CASE("wake socket: an unknown interface is an error message, not an exception", "[wake]") {
    auto w = port::WakeSocket::open("rnic-no-such-if", kSelf.ipv4);
    REQUIRE_FALSE(w);
    CHECK(w.error().find("if_nametoindex") != std::string::npos);
}

TEST_CASE("wake socket: with timestamps on, a drain reports the earliest copy's arrival", "[wake]") {
    if (!private_loopback()) {
        WARN("needs root and network namespaces: skipped");
        return;
    }
    auto w = port::WakeSocket::open("lo", kSelf.ipv4);
    REQUIRE(w);
    Injector inj;
    uint64_t earliest = 1;
    CHECK(w->drain_stamped(earliest) == 0);
    CHECK(earliest == 0);  // nothing drained, nothing stamped

    REQUIRE(w->enable_timestamps(true));
    // The kernel turns receive timestamps on through a workqueue (net_enable_timestamp): until it
    // has, a copy is stamped when read, not when it arrived.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    timespec before{}, after{};
    clock_gettime(CLOCK_REALTIME, &before);
    inj.send(ipv4_frame(17, 8 + 12 + 16 + 4));
    pollfd p{w->fd(), POLLIN, 0};
    REQUIRE(poll(&p, 1, 5000) == 1);
    inj.send(marker());
    clock_gettime(CLOCK_REALTIME, &after);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the marker's copy too
    auto ns = [](const timespec& t) { return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec); };
    CHECK(w->drain_stamped(earliest) == 2);
    CHECK(earliest >= ns(before));
    CHECK(earliest <= ns(after));

    REQUIRE(w->enable_timestamps(false));
    inj.send(marker());
    REQUIRE(poll(&p, 1, 5000) == 1);
    CHECK(w->drain_stamped(earliest) == 1);
    CHECK(earliest == 0);  // copies without a stamp
}
