#include "rnic/port/dpdk_port.hpp"

#include <dirent.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "rnic/port/interface_speed.hpp"
#include "rnic/port/wake_socket.hpp"

namespace rnic::port {

namespace {

unsigned read_iface_mtu(const std::string& iface) {
    std::ifstream f("/sys/class/net/" + iface + "/mtu");
    unsigned mtu = 0;
    if (!(f >> mtu))
        throw std::runtime_error("no network interface '" + iface + "' (/sys/class/net/" + iface + "/mtu)");
    return mtu;
}

bool eal_initialized = false;

// The af_xdp PMD keeps its AF_XDP socket to itself; it is the one socket of that family in the
// process (one queue), and it is readable while its RX ring holds frames. -1: none or several.
int find_xsk_fd() {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1, count = 0;
    for (int i = 0; i < 4096; ++i) {  // bounded: a daemon has a few dozen fds
        const dirent* e = readdir(dir);
        if (!e) break;
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        int domain = 0;
        socklen_t len = sizeof domain;
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_XDP) {
            found = static_cast<int>(fd);
            ++count;
        }
    }
    closedir(dir);
    return count == 1 ? found : -1;
}

enum class WakeMode : uint8_t { None, Interrupt, Socket, Xsk };

const char* to_string(WakeMode m) {
    switch (m) {
        case WakeMode::Interrupt:
            return "rx-interrupt";
        case WakeMode::Socket:
            return "wake-socket";
        case WakeMode::Xsk:
            return "xsk-fd";
        case WakeMode::None:
            break;
    }
    return "none (timed naps)";
}

}  // namespace

struct DpdkPort::Impl final : common::FrameSink {
    uint16_t port_id = 0;
    uint16_t burst = 32;
    rte_mempool* pool = nullptr;
    wire::MacAddr mac{};
    std::string description;
    unsigned ip_mtu = 1500;
    unsigned link_speed_mbps = 0;
    std::vector<rte_mbuf*> rx;
    size_t rx_count = 0;
    std::vector<rte_mbuf*> staged;  // committed, not yet handed to the device
    rte_mbuf* pending = nullptr;    // allocated, not yet committed
    PortStats stats;
    uint64_t rx_multiseg = 0;
    bool started = false;
    bool owned = false;  // a DpdkPort took it over (and frees what it holds)
    WakeMode wake_mode = WakeMode::None;
    int wake_fd = -1;
    std::optional<WakeSocket> wake_socket;
    bool arrival_stamps = false;  // latency tracing: the wake socket's copies are stamped
    uint64_t wait_arrival_ns = 0;

    std::span<uint8_t> allocate(size_t length) override {
        if (staged.size() >= burst) flush();
        if (!pending) pending = rte_pktmbuf_alloc(pool);
        if (!pending || length > rte_pktmbuf_tailroom(pending)) {
            ++stats.tx_no_buffer;
            return {};
        }
        return {rte_pktmbuf_mtod(pending, uint8_t*), length};
    }

    void commit(size_t length) override {
        pending->data_len = static_cast<uint16_t>(length);
        pending->pkt_len = static_cast<uint32_t>(length);
        staged.push_back(pending);
        stats.tx_bytes += length;
        pending = nullptr;
    }

    ~Impl() override {
        // A port whose set-up threw half-way (no DpdkPort owns it yet) still frees its pool.
        if (!owned && pool) rte_mempool_free(pool);
    }

    size_t flush() {
        if (staged.empty()) return 0;  // af_packet would still make a sendto() call
        const auto n = static_cast<uint16_t>(staged.size());
        uint16_t sent = 0;
        // A full TX ring drains in microseconds; a few retries beat dropping, more would stall rx.
        for (int attempt = 0; attempt < 4 && sent < n; ++attempt)
            sent = static_cast<uint16_t>(sent + rte_eth_tx_burst(port_id, 0, staged.data() + sent, n - sent));
        if (sent < n) {
            rte_pktmbuf_free_bulk(staged.data() + sent, n - sent);
            stats.tx_dropped += n - sent;
        }
        stats.tx_frames += sent;
        ++stats.tx_bursts;
        staged.clear();
        return sent;
    }
};

namespace {

// Starts ethdev `port` as configured: pool, queues, MAC, RX wake-up. `wake_socket`, opened before
// the EAL, becomes the wake fd when the driver is af_packet; `index` names the pool.
std::unique_ptr<DpdkPort::Impl> start_port(uint16_t port, size_t index, const DpdkPortConfig& config, unsigned mtu,
                                           std::optional<WakeSocket> wake_socket, const std::string& wake_error) {
    auto impl = std::make_unique<DpdkPort::Impl>();
    DpdkPort::Impl& m = *impl;
    m.wake_socket = std::move(wake_socket);
    m.burst = config.burst;
    m.port_id = port;

    rte_eth_dev_info info{};
    if (const int rc = rte_eth_dev_info_get(port, &info); rc != 0)
        throw std::runtime_error(std::string("rte_eth_dev_info_get: ") + rte_strerror(-rc));
    uint16_t dev_mtu = 1500;
    rte_eth_dev_get_mtu(port, &dev_mtu);
    const unsigned port_mtu = std::max<unsigned>(dev_mtu, mtu);
    // The interface's MTU is what the wire between us and the peer carries (af_packet reports
    // its own default, not the veth's); with no interface, the device's.
    m.ip_mtu = config.iface.empty() ? dev_mtu : mtu;
    if (!config.iface.empty()) m.link_speed_mbps = interface_speed_mbps(config.iface);
    if (m.link_speed_mbps == 0) {
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_speed != RTE_ETH_SPEED_NUM_NONE &&
            link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
            m.link_speed_mbps = link.link_speed;
    }
    const std::string driver = info.driver_name ? info.driver_name : "?";
    uint32_t max_frame = port_mtu + 14 + 4;
    const uint32_t ring_frame = driver == "net_af_packet" ? af_packet_frame_size(mtu) : 0;
    // af_xdp's UMEM is the mbuf pool itself, one mbuf per chunk, and the kernel takes chunks
    // of at most a page: the port then carries smaller frames than the interface (RoCE MTU 2048
    // on a 9000-byte veth) rather than failing to start.
    if (driver == "net_af_xdp") {
        constexpr uint32_t kXdpFrame = 4096 - 256 - 128 - 64;  // page - XDP headroom - mbuf - pool header
        if (max_frame > kXdpFrame) {
            max_frame = kXdpFrame;
            m.ip_mtu = std::min(m.ip_mtu, max_frame - 18);
        }
    }
    const uint16_t data_room = static_cast<uint16_t>(
        RTE_PKTMBUF_HEADROOM + std::max({std::min<uint32_t>(max_frame, 4096 + 256 + 18), ring_frame,
                                         2048u}));
    const unsigned mbufs = mbuf_pool_size(config);
    const std::string pool_name = "rnic_mbufs" + std::to_string(index);
    m.pool = rte_pktmbuf_pool_create(pool_name.c_str(), mbufs, 256, 0, data_room, static_cast<int>(rte_socket_id()));
    if (!m.pool)
        throw std::runtime_error("cannot create the mbuf pool (" + std::to_string(mbufs) + " x " +
                                 std::to_string(data_room) + " B): " + rte_strerror(rte_errno) + "; raise -m");

    rte_eth_conf conf{};
    // RX interrupts where the driver may have them (af_packet has none); a driver that refuses
    // the request is configured without.
    conf.intr_conf.rxq = config.rx_wakeups && driver != "net_af_packet" ? 1 : 0;
    int configured = rte_eth_dev_configure(port, 1, 1, &conf);
    if (configured != 0 && conf.intr_conf.rxq) {
        conf.intr_conf.rxq = 0;
        configured = rte_eth_dev_configure(port, 1, 1, &conf);
    }
    if (configured != 0) throw std::runtime_error(std::string("rte_eth_dev_configure: ") + rte_strerror(-configured));
    uint16_t rxd = config.rx_descriptors, txd = config.tx_descriptors;
    rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
    const int socket = rte_eth_dev_socket_id(port);
    const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
    if (const int rc = rte_eth_rx_queue_setup(port, 0, rxd, sock, nullptr, m.pool); rc != 0)
        throw std::runtime_error(std::string("rte_eth_rx_queue_setup: ") + rte_strerror(-rc));
    if (const int rc = rte_eth_tx_queue_setup(port, 0, txd, sock, nullptr); rc != 0)
        throw std::runtime_error(std::string("rte_eth_tx_queue_setup: ") + rte_strerror(-rc));

    rte_ether_addr addr{};
    rte_eth_macaddr_get(port, &addr);
    std::copy(std::begin(addr.addr_bytes), std::end(addr.addr_bytes), m.mac.begin());
    if (config.mac && *config.mac != m.mac) {
        rte_ether_addr want_mac{};
        std::copy(config.mac->begin(), config.mac->end(), std::begin(want_mac.addr_bytes));
        // Not every driver can change its address (af_packet cannot): promiscuous then.
        if (rte_eth_dev_default_mac_addr_set(port, &want_mac) != 0 && rte_eth_promiscuous_enable(port) != 0)
            throw std::runtime_error("the port can neither take --mac nor go promiscuous");
        m.mac = *config.mac;
    }
    if (const int rc = rte_eth_dev_start(port); rc != 0)
        throw std::runtime_error(std::string("rte_eth_dev_start: ") + rte_strerror(-rc));
    m.started = true;

    if (conf.intr_conf.rxq) {
        const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port, 0);
        if (fd >= 0 && rte_eth_dev_rx_intr_enable(port, 0) == 0) {
            rte_eth_dev_rx_intr_disable(port, 0);
            m.wake_mode = WakeMode::Interrupt;
            m.wake_fd = fd;
        }
    }
    if (m.wake_mode == WakeMode::None && driver == "net_af_packet" && m.wake_socket) {
        m.wake_mode = WakeMode::Socket;
        m.wake_fd = m.wake_socket->fd();
    }
    if (m.wake_mode == WakeMode::None && config.rx_wakeups && driver == "net_af_xdp") {
        if (const int fd = find_xsk_fd(); fd >= 0) {
            m.wake_mode = WakeMode::Xsk;
            m.wake_fd = fd;
        }
    }
    if (m.wake_mode != WakeMode::Socket) m.wake_socket.reset();  // frames never reach it, or not needed

    m.rx.resize(config.burst);
    m.staged.reserve(config.burst);
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(port, name);
    m.description = std::string(name) + " driver=" + (info.driver_name ? info.driver_name : "?") +
                    " mtu=" + std::to_string(port_mtu) + " mbufs=" + std::to_string(mbufs) + "x" +
                    std::to_string(data_room) + "B rxd=" + std::to_string(rxd) + " txd=" + std::to_string(txd) +
                    " rx-wakeup=" + to_string(m.wake_mode) +
                    (m.wake_mode == WakeMode::None && !wake_error.empty() ? " (wake socket: " + wake_error + ")" : "");
    return impl;
}

}  // namespace

DpdkPort::DpdkPort(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
    impl_->owned = true;
}

DpdkRuntime::DpdkRuntime(const DpdkConfig& config) {
    if (eal_initialized) throw std::runtime_error("the DPDK EAL can be initialized once per process");
    if (config.ports.empty()) throw std::runtime_error("no port to start");
    std::vector<unsigned> mtus;
    for (const DpdkPortConfig& p : config.ports) mtus.push_back(p.iface.empty() ? 1500 : read_iface_mtu(p.iface));
    auto args = eal_arguments(config, mtus);
    // Before the EAL binds af_packet's own sockets: see wake_socket.hpp for why the order matters.
    std::vector<std::optional<WakeSocket>> wake_sockets(config.ports.size());
    std::vector<std::string> wake_errors(config.ports.size());
    for (size_t i = 0; i < config.ports.size(); ++i) {
        const DpdkPortConfig& p = config.ports[i];
        if (!p.rx_wakeups || p.iface.empty()) continue;
        if (auto w = WakeSocket::open(p.iface, p.ipv4))
            wake_sockets[i].emplace(std::move(*w));
        else
            wake_errors[i] = w.error();
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    cpu_set_t allowed;
    const bool have_allowed = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0)
        throw std::runtime_error(std::string("DPDK EAL initialization failed: ") + rte_strerror(rte_errno));
    eal_initialized = true;
    // The EAL pins the main thread to its lcore. Our default `-l 0` is only there because the EAL
    // wants one, and pinned there every rnicd on the host shares core 0: a daemon woken for a
    // frame waits for the other one to give the core up (measured: 64 KiB WRITEs between two
    // daemons 1.8 -> 3.2 Gb/s when unpinned). Unless the user chose cores, the loop may run
    // wherever it was allowed to before.
    if (have_allowed && !std::any_of(config.eal_args.begin(), config.eal_args.end(), [](const std::string& a) {
            return a == "-l" || a == "-c" || a == "--lcores" || a.rfind("--lcores=", 0) == 0;
        }))
        (void)sched_setaffinity(0, sizeof allowed, &allowed);

    try {
        // Our vdevs are found by name; devices the caller named are taken in the EAL's order.
        const bool ours = !eal_names_devices(config.eal_args);
        uint64_t next = 0;
        for (size_t i = 0; i < config.ports.size(); ++i) {
            uint16_t port = 0;
            if (ours && !config.ports[i].iface.empty()) {
                const std::string name = "net_af_packet" + std::to_string(i);
                if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0)
                    throw std::runtime_error("DPDK did not create " + name + " on " + config.ports[i].iface);
            } else {
                next = rte_eth_find_next_owned_by(static_cast<uint16_t>(next), RTE_ETH_DEV_NO_OWNER);
                if (next >= RTE_MAX_ETHPORTS)
                    throw std::runtime_error("DPDK found " + std::to_string(i) + " port(s) for " +
                                             std::to_string(config.ports.size()) +
                                             " configured: check --iface or the --vdev/-a EAL arguments");
                port = static_cast<uint16_t>(next++);
            }
            ports_.push_back(std::unique_ptr<DpdkPort>(new DpdkPort(
                start_port(port, i, config.ports[i], mtus[i], std::move(wake_sockets[i]), wake_errors[i]))));
        }
    } catch (...) {
        ports_.clear();
        rte_eal_cleanup();
        throw;
    }
}

DpdkRuntime::~DpdkRuntime() {
    ports_.clear();
    rte_eal_cleanup();
}

DpdkPort::~DpdkPort() {
    Impl& m = *impl_;
    if (m.pending) rte_pktmbuf_free(m.pending);
    release_rx();
    if (m.started) {
        m.flush();
        rte_eth_dev_stop(m.port_id);
    }
    rte_eth_dev_close(m.port_id);
    if (m.pool) rte_mempool_free(m.pool);
}

wire::MacAddr DpdkPort::mac() const {
    return impl_->mac;
}

size_t DpdkPort::rx_burst(std::span<RxFrame> out) {
    Impl& m = *impl_;
    const auto want = static_cast<uint16_t>(std::min(out.size(), m.rx.size()));
    const uint16_t n = rte_eth_rx_burst(m.port_id, 0, m.rx.data(), want);
    m.rx_count = n;
    size_t kept = 0;
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* mb = m.rx[i];
        m.stats.rx_bytes += mb->pkt_len;
        if (mb->nb_segs != 1) {
            ++m.rx_multiseg;  // the engine wants one contiguous frame; a pool this size never chains
            continue;
        }
        out[kept++] = RxFrame{rte_pktmbuf_mtod(mb, const uint8_t*), mb->data_len};
    }
    m.stats.rx_frames += n;
    m.stats.rx_bursts += n != 0;
    return kept;
}

void DpdkPort::release_rx() {
    Impl& m = *impl_;
    if (m.rx_count) rte_pktmbuf_free_bulk(m.rx.data(), static_cast<unsigned>(m.rx_count));
    m.rx_count = 0;
}

common::FrameSink& DpdkPort::tx() {
    return *impl_;
}

std::span<const uint8_t> DpdkPort::last_committed() const {
    const Impl& m = *impl_;
    if (m.staged.empty()) return {};
    const rte_mbuf* mb = m.staged.back();
    return {rte_pktmbuf_mtod(mb, const uint8_t*), mb->data_len};
}

size_t DpdkPort::flush_tx() {
    return impl_->flush();
}

PortStats DpdkPort::stats() const {
    PortStats s = impl_->stats;
    // af_packet reports its ring's drops (PACKET_STATISTICS) here: the sign of a ring too small
    // for the time the loop spends away from it.
    rte_eth_stats e{};
    if (rte_eth_stats_get(impl_->port_id, &e) == 0) s.rx_missed = e.imissed;
    return s;
}

int DpdkPort::rx_wait_fd() const {
    return impl_->wake_fd;
}

void DpdkPort::arm_rx_wait() {
    Impl& m = *impl_;
    switch (m.wake_mode) {
        case WakeMode::Socket:
            m.wake_socket->drain();
            break;
        case WakeMode::Interrupt: {
            rte_eth_dev_rx_intr_enable(m.port_id, 0);
            uint64_t v;
            (void)!read(m.wake_fd, &v, sizeof v);  // an interrupt from before the arming
            break;
        }
        case WakeMode::Xsk:  // readable exactly while the RX ring holds frames: nothing to clear
        case WakeMode::None:
            break;
    }
}

void DpdkPort::rx_wait_done() {
    Impl& m = *impl_;
    if (m.wake_mode == WakeMode::Interrupt) rte_eth_dev_rx_intr_disable(m.port_id, 0);
    // The copies that ended the wait, read now for their stamps (the next arming would drain
    // them anyway); only the wake socket's copies carry the kernel's arrival time.
    if (m.arrival_stamps && m.wake_mode == WakeMode::Socket) m.wake_socket->drain_stamped(m.wait_arrival_ns);
}

void DpdkPort::set_arrival_stamps(bool on) {
    Impl& m = *impl_;
    m.arrival_stamps = on && m.wake_mode == WakeMode::Socket && m.wake_socket->enable_timestamps(true);
    m.wait_arrival_ns = 0;
}

uint64_t DpdkPort::wait_arrival_realtime_ns() const {
    return impl_->wait_arrival_ns;
}

std::string DpdkPort::description() const {
    return impl_->description;
}

unsigned DpdkPort::ip_mtu() const {
    return impl_->ip_mtu;
}

unsigned DpdkPort::link_speed_mbps() const {
    return impl_->link_speed_mbps;
}

}  // namespace rnic::port
