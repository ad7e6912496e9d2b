// What rnicd asks of DPDK: the EAL flags measured to work on machines without hugepages or DPDK
// NICs, and one af_packet vdev per port. Pure logic (no rte_*.h), so it is unit-tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rnic/wire/headers.hpp"

namespace rnic::port {

struct DpdkPortConfig {
    std::string iface;                 // af_packet on this interface unless the EAL arguments name devices
    std::optional<wire::MacAddr> mac;  // else the device's; another MAC turns on promiscuous mode
    uint16_t rx_descriptors = 1024;
    uint16_t tx_descriptors = 1024;
    uint16_t burst = 32;
    // RX wake-ups (PortIo::rx_wait_fd): the driver's RX interrupt when it has one, else a wake
    // socket on `iface` (af_packet) accepting what the daemon at `ipv4` (host order) serves, else
    // the AF_XDP socket itself (af_xdp). Off: the loop naps on a timer.
    bool rx_wakeups = true;
    uint32_t ipv4 = 0;
};

struct DpdkConfig {
    std::vector<DpdkPortConfig> ports;  // in device order: rnic0, rnic1, ...
    std::vector<std::string> eal_args;  // passed through (after `--` on rnicd's command line)
};

// True when the caller's EAL arguments name the devices themselves (--vdev, -a/--allow): rnicd
// then adds no vdev and takes the EAL's ports in order.
bool eal_names_devices(const std::vector<std::string>& eal_args);

// The vdev rnicd creates for port `index` (net_af_packet<index>,iface=...,framecnt=...).
std::string af_packet_vdev(size_t index, const std::string& iface, unsigned iface_mtu);

// The whole argument vector (argv[0] included): defaults the caller's arguments do not override,
// then a vdev per port with an interface (unless the caller names devices), then the caller's.
// `iface_mtus[i]` is port i's interface MTU.
std::vector<std::string> eal_arguments(const DpdkConfig& config, const std::vector<unsigned>& iface_mtus);

// af_packet ring frames for an interface MTU; 0 for the PMD's default (see the definition).
unsigned af_packet_frame_size(unsigned iface_mtu);

// The mbufs a port's pool needs: every RX and TX descriptor can hold one, plus a burst each way
// in the loop and the per-core cache; a power of two minus one, what rte_mempool likes.
unsigned mbuf_pool_size(const DpdkPortConfig& config);

}  // namespace rnic::port
