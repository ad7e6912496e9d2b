// A doorbell for received frames when the driver has none (DPDK's af_packet PMD has no RX
// interrupts): a second AF_PACKET socket on the port's interface whose classic BPF filter keeps
// only what the daemon serves and truncates each copy to a few bytes. The poll loop sleeps on its
// fd instead of spinning; the frames themselves are still taken from the driver.
//
// Ordering, the reason a wake-up cannot be lost: the kernel hands a frame to the packet sockets
// of an interface in the reverse order of their binding, so a wake socket opened BEFORE the
// driver's socket gets its copy after the driver's ring already holds the frame. Hence
// drain() -> one more rx_burst -> sleep never sleeps on a frame whose copy was drained.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rnic/wire/expected.hpp"

namespace rnic::port {

// The filter: not our own outgoing frames; ARP; MAC control (PAUSE, PFC); IPv4 to `ipv4` (host
// order) that is ICMP or UDP to 4791; IPv6 that is ICMPv6 (ND, echo) or UDP to 4791 (any address:
// ND targets multicast groups). An accepted frame is cut to `snap` bytes: only its arrival matters.
std::vector<sock_filter> wake_filter(uint32_t ipv4, uint32_t snap);

class WakeSocket {
public:
    static constexpr uint32_t kSnap = 16;
    // A receive buffer this small holds a handful of copies; more are dropped, which is fine: one
    // is enough to end a nap, and a full buffer costs the kernel a filter run per frame, no copy.
    static constexpr int kReceiveBuffer = 4096;

    // Needs CAP_NET_RAW. The error is a message for the log (the daemon then naps on a timer).
    static wire::Expected<WakeSocket, std::string> open(const std::string& iface, uint32_t ipv4);

    WakeSocket(WakeSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    WakeSocket& operator=(WakeSocket&& other) noexcept;
    WakeSocket(const WakeSocket&) = delete;
    WakeSocket& operator=(const WakeSocket&) = delete;
    ~WakeSocket();

    int fd() const noexcept { return fd_; }
    // Reads every queued copy without blocking; how many there were (bounded by the buffer).
    size_t drain() noexcept;

    // Latency tracing: the kernel stamps each copy with its arrival (SO_TIMESTAMPNS, wall-clock
    // time). Turning it on makes the kernel timestamp every received frame of the host, a small
    // cost paid only while tracing.
    bool enable_timestamps(bool on) noexcept;
    // drain() with the earliest arrival stamp among the copies (CLOCK_REALTIME ns, 0: none).
    size_t drain_stamped(uint64_t& earliest_realtime_ns) noexcept;

private:
    explicit WakeSocket(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace rnic::port
