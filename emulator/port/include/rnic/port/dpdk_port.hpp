// The DPDK ports: the EAL, initialized once for all of them, and per port one ethdev with one RX
// and one TX queue, an mbuf pool sized from the configuration, frames built straight into mbufs.
// No rte_*.h here: everything DPDK is behind the pimpls in dpdk_port.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rnic/port/eal_arguments.hpp"
#include "rnic/port/port_io.hpp"

namespace rnic::port {

class DpdkPort final : public PortIo {
public:
    ~DpdkPort() override;
    DpdkPort(const DpdkPort&) = delete;
    DpdkPort& operator=(const DpdkPort&) = delete;

    wire::MacAddr mac() const override;
    size_t rx_burst(std::span<RxFrame> out) override;
    void release_rx() override;
    common::FrameSink& tx() override;
    std::span<const uint8_t> last_committed() const override;
    size_t flush_tx() override;
    PortStats stats() const override;
    int rx_wait_fd() const override;
    void arm_rx_wait() override;
    void rx_wait_done() override;
    void set_arrival_stamps(bool on) override;
    uint64_t wait_arrival_realtime_ns() const override;
    std::string description() const override;  // device name, driver, MTU, pool size
    unsigned ip_mtu() const override;
    // As the kernel reports the interface's (ethtool; veth says 10000), else as the PMD does.
    unsigned link_speed_mbps() const override;

    struct Impl;

private:
    friend class DpdkRuntime;
    explicit DpdkPort(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The EAL and every port of the configuration, started in order. One per process: DPDK's EAL
// initializes once. Throws std::runtime_error with a message fit for the user when anything in
// the set-up fails; the destructor stops the ports and cleans the EAL up.
class DpdkRuntime {
public:
    explicit DpdkRuntime(const DpdkConfig& config);
    ~DpdkRuntime();
    DpdkRuntime(const DpdkRuntime&) = delete;
    DpdkRuntime& operator=(const DpdkRuntime&) = delete;

    size_t size() const noexcept { return ports_.size(); }
    DpdkPort& port(size_t i) { return *ports_.at(i); }

private:
    std::vector<std::unique_ptr<DpdkPort>> ports_;
};

}  // namespace rnic::port
