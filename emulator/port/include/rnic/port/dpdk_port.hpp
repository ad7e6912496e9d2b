// The DPDK port: EAL initialization, one ethdev with one RX and one TX queue, an mbuf pool
// sized from the configuration, frames built straight into mbufs. No rte_*.h here: everything
// DPDK is behind the pimpl in dpdk_port.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rnic/port/port_io.hpp"

namespace rnic::port {

struct DpdkPortConfig {
    std::string iface;                  // af_packet on this interface unless eal_args name a device
    std::vector<std::string> eal_args;  // passed through (after `--` on rnicd's command line)
    std::optional<wire::MacAddr> mac;   // else the device's; another MAC turns on promiscuous mode
    uint16_t rx_descriptors = 1024;
    uint16_t tx_descriptors = 1024;
    uint16_t burst = 32;
    // RX wake-ups (PortIo::rx_wait_fd): the driver's RX interrupt when it has one, else a wake
    // socket on `iface` (af_packet) accepting what the daemon at `ipv4` (host order) serves, else
    // the AF_XDP socket itself (af_xdp). Off: the loop naps on a timer.
    bool rx_wakeups = true;
    uint32_t ipv4 = 0;
};

// The EAL arguments rnicd uses: the flags measured to work on machines without hugepages or
// DPDK NICs, plus a vdev for `iface`, minus whatever the caller's extra arguments override.
std::vector<std::string> eal_arguments(const DpdkPortConfig& config, unsigned iface_mtu);

class DpdkPort final : public PortIo {
public:
    // Initializes the EAL (once per process) and starts the port. Throws std::runtime_error
    // with a message fit for the user when anything in the set-up fails.
    explicit DpdkPort(const DpdkPortConfig& config);
    ~DpdkPort() override;
    DpdkPort(const DpdkPort&) = delete;
    DpdkPort& operator=(const DpdkPort&) = delete;

    wire::MacAddr mac() const override;
    size_t rx_burst(std::span<RxFrame> out) override;
    void release_rx() override;
    transport::FrameSink& tx() override;
    std::span<const uint8_t> last_committed() const override;
    size_t flush_tx() override;
    PortStats stats() const override;
    int rx_wait_fd() const override;
    void arm_rx_wait() override;
    void rx_wait_done() override;
    std::string description() const;  // device name, driver, MTU, pool size, for the log
    unsigned ip_mtu() const;          // the largest IP packet the port carries
    // The link's speed in Mb/s as the kernel reports the interface's (ethtool; veth says
    // 10000), else as the PMD reports it; 0 when neither knows.
    unsigned link_speed_mbps() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace rnic::port
