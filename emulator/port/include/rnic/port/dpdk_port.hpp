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
    std::string description() const;  // device name, driver, MTU, pool size, for the log

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace rnic::port
