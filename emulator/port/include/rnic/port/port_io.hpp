// The one interface between the daemon and a network port. The DPDK implementation lives in
// rnic_port_dpdk (the only code that includes rte_*.h); FakePort is the in-memory one tests use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "rnic/common/frame_sink.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::port {

struct PortStats {
    uint64_t rx_frames = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_frames = 0;
    uint64_t tx_bytes = 0;
    uint64_t tx_no_buffer = 0;  // allocate() found no buffer (pool empty or frame too big)
    uint64_t tx_dropped = 0;    // the device did not take the frame after retries
    uint64_t rx_missed = 0;     // the device dropped frames we did not poll in time (ring full)
    // Polls that returned frames and flushes that handed some over: frames per burst is what
    // a system call (af_packet's sendto) or a ring kick is shared by.
    uint64_t rx_bursts = 0;
    uint64_t tx_bursts = 0;
};

using RxFrame = std::span<const uint8_t>;

class PortIo {
public:
    virtual ~PortIo() = default;

    virtual wire::MacAddr mac() const = 0;

    // Up to out.size() received frames. The spans stay valid until release_rx(), which must
    // be called before the next rx_burst: zero-copy, the buffers belong to the port.
    virtual size_t rx_burst(std::span<RxFrame> out) = 0;
    virtual void release_rx() = 0;

    // Outgoing frames are built straight into the port's buffers through this sink (the
    // engine's own interface, so the engine writes into mbuf space); they are queued and go
    // out at flush_tx(), or earlier when a burst fills up.
    virtual common::FrameSink& tx() = 0;
    // The frame most recently committed to tx(), for the capture tap; valid until flush_tx().
    virtual std::span<const uint8_t> last_committed() const = 0;
    virtual size_t flush_tx() = 0;

    virtual PortStats stats() const = 0;

    // Sleeping until a frame arrives instead of spinning. rx_wait_fd() becomes readable when a
    // frame may have arrived since the last arm_rx_wait(); -1 when the port cannot tell (the loop
    // then naps on a timer). The loop arms, calls rx_burst once more (a frame that came before
    // the arming is found there), sleeps on the fd, and calls rx_wait_done() on waking.
    // Spurious readiness is allowed, a missed frame is not.
    virtual int rx_wait_fd() const { return -1; }
    virtual void arm_rx_wait() {}
    virtual void rx_wait_done() {}
    // Latency tracing: when on, rx_wait_done() notes the kernel's arrival time of the earliest
    // frame that came during the wait (CLOCK_REALTIME ns), if the port can tell; 0 otherwise.
    virtual void set_arrival_stamps(bool /*on*/) {}
    virtual uint64_t wait_arrival_realtime_ns() const { return 0; }

    // For the log and the engine's limits: what the port is, the largest IP packet it carries,
    // its speed in Mb/s (0: unknown).
    virtual std::string description() const { return {}; }
    virtual unsigned ip_mtu() const { return 1500; }
    virtual unsigned link_speed_mbps() const { return 0; }
};

}  // namespace rnic::port
