// rnicd's own port on a Linux interface: one AF_PACKET socket with a TPACKET_V2 RX ring and TX
// ring mapped into the daemon, frames parsed where the kernel wrote them and built where the
// kernel will read them. `rnicd --ring-port` uses it instead of DPDK's af_packet PMD.
//
// Why not the PMD (docs/daemon.md, "The ring port"): DPDK 22.11's af_packet PMD copies every
// frame once more on each side (ring -> mbuf on receive, mbuf -> ring on send), joins a fanout
// group that makes the kernel hash and look for room in the ring once more for every frame it
// receives, and has no RX interrupt, so a second packet socket (WakeSocket) is needed to sleep.
// Here the ring socket itself is the wake-up, its filter keeps out what the daemon does not serve,
// and no frame is copied in user space.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rnic/port/port_io.hpp"
#include "rnic/wire/expected.hpp"

namespace rnic::port {

struct PacketRingConfig {
    std::string iface;
    std::optional<wire::MacAddr> mac;  // else the interface's; another MAC turns on promiscuous mode
    uint32_t ipv4 = 0;                 // host order: the filter keeps frames for this address
    unsigned rx_frames = 4096;         // a power of two; as DPDK's vdev rnicd asks for (framecnt)
    unsigned tx_frames = 1024;         // a power of two
    unsigned burst = 32;               // committed frames that make a sendto() on their own
    bool rx_wakeups = true;            // the ring socket is rx_wait_fd() (else -1: timed naps)
};

// The ring frame for an interface MTU: 512-byte multiples that hold the largest RoCEv2 frame the
// MTU allows after the ring's header (longer frames are counted and dropped: nothing rnicd serves
// is longer).
unsigned packet_ring_frame_size(unsigned iface_mtu);

class PacketRingPort final : public PortIo {
public:
    // Needs CAP_NET_RAW. The error names the step that failed, for the log.
    static wire::Expected<std::unique_ptr<PacketRingPort>, std::string> open(const PacketRingConfig& config);
    ~PacketRingPort() override;
    PacketRingPort(const PacketRingPort&) = delete;
    PacketRingPort& operator=(const PacketRingPort&) = delete;

    wire::MacAddr mac() const override;
    size_t rx_burst(std::span<RxFrame> out) override;
    void release_rx() override;
    common::FrameSink& tx() override;
    std::span<const uint8_t> last_committed() const override;
    size_t flush_tx() override;
    PortStats stats() const override;
    // The ring socket: readable while the RX ring holds a frame for us.
    int rx_wait_fd() const override;
    void rx_wait_done() override;
    void set_arrival_stamps(bool on) override;
    uint64_t wait_arrival_realtime_ns() const override;

    std::string description() const override;
    unsigned ip_mtu() const override;
    unsigned link_speed_mbps() const override;

    struct Impl;

private:
    explicit PacketRingPort(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace rnic::port
