#include "rnic/port/packet_ring_port.hpp"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rnic/port/interface_speed.hpp"
#include "rnic/port/wake_socket.hpp"

namespace rnic::port {

namespace {

// A block holds eight frames: frames are multiples of 512 bytes, so a block is whole pages.
constexpr unsigned kFramesPerBlock = 8;
// Without PACKET_TX_HAS_OFF the kernel reads a TX frame right after the aligned V2 header.
constexpr size_t kTxDataOffset = TPACKET_ALIGN(sizeof(tpacket2_hdr));
// The status word is shared with the kernel: it hands a frame over with a release store and
// takes it back with one, so the frame's bytes are visible before the status that says so.
uint32_t load_status(const tpacket2_hdr* h) noexcept {
    return __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
}
void store_status(tpacket2_hdr* h, uint32_t status) noexcept {
    __atomic_store_n(&h->tp_status, status, __ATOMIC_RELEASE);
}

// Frames lie back to back: blocks are whole frames with no gap between them.
struct Ring {
    uint8_t* base = nullptr;
    unsigned frame_size = 0;
    unsigned frames = 0;  // a power of two, at least kFramesPerBlock

    tpacket2_hdr* at(unsigned i) const noexcept {
        return reinterpret_cast<tpacket2_hdr*>(base + size_t{i & (frames - 1)} * frame_size);
    }
    size_t bytes() const noexcept { return size_t{frames} * frame_size; }
    tpacket_req request() const noexcept {
        return {frame_size * kFramesPerBlock, frames / kFramesPerBlock, frame_size, frames};
    }
};

std::string errno_text(const char* what) {
    return std::string(what) + ": " + std::strerror(errno);
}

bool is_power_of_two(unsigned v) noexcept {
    return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

unsigned packet_ring_frame_size(unsigned iface_mtu) {
    // payload + IP/UDP/BTH/extension headers/ICRC of the largest RoCEv2 packet, rounded up
    constexpr unsigned kLargestRoceIpPacket = 4096 + 256;
    // The kernel puts a received frame's MAC header at TPACKET_ALIGN(header + 16) - 14 (about 66
    // bytes in); 128 covers it and a VLAN tag. Rounded to 512 bytes, not to a power of two: a
    // 4 KiB RoCE MTU then takes 4.5 KiB frames, not 8, and the ring half the memory and cache.
    const unsigned need = std::min(iface_mtu, kLargestRoceIpPacket) + 14 + 4 + 128;
    return (need + 511) / 512 * 512;
}

struct PacketRingPort::Impl final : common::FrameSink {
    int fd = -1;
    void* map = MAP_FAILED;
    size_t map_bytes = 0;
    Ring rx, tx;
    unsigned rx_head = 0;   // the next RX frame the kernel hands us
    unsigned rx_taken = 0;  // frames from rx_head that the last rx_burst looked at, until release_rx
    unsigned tx_head = 0;   // the next TX frame to fill
    unsigned staged = 0;    // committed frames the kernel has not been asked to send yet
    unsigned burst = 32;
    std::span<const uint8_t> last;
    wire::MacAddr mac{};
    std::string description;
    unsigned ip_mtu = 1500;
    unsigned link_speed_mbps = 0;
    PortStats stats;
    uint64_t rx_truncated = 0;
    mutable uint64_t ring_drops = 0;  // PACKET_STATISTICS counts from the last read: summed here
    bool rx_wakeups = true;
    bool arrival_stamps = false;
    uint64_t wait_arrival_ns = 0;

    ~Impl() override {
        if (map != MAP_FAILED) munmap(map, map_bytes);
        if (fd >= 0) close(fd);
    }

    std::span<uint8_t> allocate(size_t length) override {
        if (staged >= burst) flush();
        if (length > tx.frame_size - kTxDataOffset) {
            ++stats.tx_no_buffer;
            return {};
        }
        tpacket2_hdr* h = tx.at(tx_head);
        if (load_status(h) != TP_STATUS_AVAILABLE) {
            // The kernel still holds the frame (a device that has not sent it yet, or frames
            // waiting for a sendto() that failed): hand over what is staged and look once more.
            flush();
            if (load_status(h) != TP_STATUS_AVAILABLE) {
                ++stats.tx_no_buffer;
                return {};
            }
        }
        return {reinterpret_cast<uint8_t*>(h) + kTxDataOffset, length};
    }

    void commit(size_t length) override {
        tpacket2_hdr* h = tx.at(tx_head);
        h->tp_len = static_cast<uint32_t>(length);
        last = {reinterpret_cast<const uint8_t*>(h) + kTxDataOffset, length};
        store_status(h, TP_STATUS_SEND_REQUEST);
        ++tx_head;
        ++staged;
        stats.tx_bytes += length;
    }

    // One sendto() sends every frame marked SEND_REQUEST, in ring order. When it fails (the
    // interface down, no socket buffer), the frames stay marked and go with the next call; they
    // are counted as sent then, and allocate() finds no room while they wait.
    size_t flush() {
        if (staged == 0) return 0;
        ssize_t rc = -1;
        for (int attempt = 0; attempt < 4; ++attempt) {
            rc = send(fd, nullptr, 0, MSG_DONTWAIT);
            if (rc >= 0 || (errno != EINTR && errno != EAGAIN && errno != ENOBUFS)) break;
        }
        ++stats.tx_bursts;
        if (rc < 0) return 0;
        const unsigned sent = staged;
        stats.tx_frames += sent;
        staged = 0;
        return sent;
    }

    size_t rx_burst(std::span<RxFrame> out) {
        release_rx();
        size_t n = 0;
        while (n < out.size() && rx_taken < rx.frames) {
            tpacket2_hdr* h = rx.at(rx_head + rx_taken);
            if (!(load_status(h) & TP_STATUS_USER)) break;
            ++rx_taken;
            stats.rx_bytes += h->tp_len;
            ++stats.rx_frames;
            if (h->tp_snaplen < h->tp_len) {
                ++rx_truncated;  // longer than any frame rnicd serves (the ring frame's size)
                continue;
            }
            out[n++] = RxFrame{reinterpret_cast<const uint8_t*>(h) + h->tp_mac, h->tp_snaplen};
        }
        stats.rx_bursts += rx_taken != 0;
        return n;
    }

    void release_rx() noexcept {
        for (unsigned k = 0; k < rx_taken; ++k) store_status(rx.at(rx_head + k), TP_STATUS_KERNEL);
        rx_head += rx_taken;
        rx_taken = 0;
    }
};

wire::Expected<std::unique_ptr<PacketRingPort>, std::string> PacketRingPort::open(const PacketRingConfig& config) {
    using Error = wire::Unexpected<std::string>;
    if (!is_power_of_two(config.rx_frames) || !is_power_of_two(config.tx_frames))
        return Error{"ring frame counts must be powers of two"};
    auto m = std::make_unique<Impl>();
    m->burst = std::max(1u, config.burst);
    m->rx_wakeups = config.rx_wakeups;
    const unsigned ifindex = if_nametoindex(config.iface.c_str());
    if (ifindex == 0) return Error{"no network interface '" + config.iface + "'"};

    // Protocol 0: the socket receives nothing until bind(), so no frame lands before the filter.
    m->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (m->fd < 0) return Error{errno_text("AF_PACKET socket (CAP_NET_RAW?)")};
    const int fd = m->fd;

    ifreq ifr{};
    std::strncpy(ifr.ifr_name, config.iface.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFMTU, &ifr) != 0) return Error{errno_text("SIOCGIFMTU")};
    const unsigned iface_mtu = static_cast<unsigned>(ifr.ifr_mtu);
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) return Error{errno_text("SIOCGIFHWADDR")};
    wire::MacAddr own{};
    std::memcpy(own.data(), ifr.ifr_hwaddr.sa_data, own.size());
    m->mac = config.mac.value_or(own);

    const int version = TPACKET_V2;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) != 0)
        return Error{errno_text("PACKET_VERSION TPACKET_V2")};
    // Only what the daemon serves enters the ring, whole (the wake socket's filter, not cut).
    std::vector<sock_filter> code = wake_filter(config.ipv4, UINT32_MAX);
    const sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0)
        return Error{errno_text("SO_ATTACH_FILTER")};
    const int one = 1;
    // Frames other sockets of the host send on the interface are no business of ours: without
    // this the kernel clones each one for the filter to drop.
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    // Straight to the driver, as DPDK's PMD does by default: a qdisc only adds a queue.
    (void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    // A frame the kernel refuses (too long for the device) is skipped, not a stop of the ring.
    if (setsockopt(fd, SOL_PACKET, PACKET_LOSS, &one, sizeof one) != 0) return Error{errno_text("PACKET_LOSS")};

    const unsigned frame = packet_ring_frame_size(iface_mtu);
    for (Ring* r : {&m->rx, &m->tx}) {
        r->frame_size = frame;
        r->frames = std::max(kFramesPerBlock, r == &m->rx ? config.rx_frames : config.tx_frames);
    }
    const tpacket_req rx_req = m->rx.request(), tx_req = m->tx.request();
    if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &rx_req, sizeof rx_req) != 0)
        return Error{errno_text("PACKET_RX_RING")};
    if (setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &tx_req, sizeof tx_req) != 0)
        return Error{errno_text("PACKET_TX_RING")};
    // The kernel maps the RX ring first, the TX ring right after it.
    m->map_bytes = m->rx.bytes() + m->tx.bytes();
    m->map = mmap(nullptr, m->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m->map == MAP_FAILED) return Error{errno_text("mmap of the packet rings")};
    m->rx.base = static_cast<uint8_t*>(m->map);
    m->tx.base = m->rx.base + m->rx.bytes();

    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sll), sizeof sll) != 0)
        return Error{errno_text(("bind to " + config.iface).c_str())};
    if (m->mac != own) {
        packet_mreq mr{};
        mr.mr_ifindex = static_cast<int>(ifindex);
        mr.mr_type = PACKET_MR_PROMISC;
        if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0)
            return Error{errno_text("promiscuous mode for --mac")};
    }

    // The largest frame the ring carries either way: the interface's, or the ring frame's room.
    const unsigned frame_room = frame - 128;
    m->ip_mtu = std::min(iface_mtu, frame_room - 18);
    m->link_speed_mbps = interface_speed_mbps(config.iface);
    m->description = config.iface + " driver=packet-ring (TPACKET_V2) mtu=" + std::to_string(iface_mtu) +
                     " rx-frames=" + std::to_string(m->rx.frames) + " tx-frames=" + std::to_string(m->tx.frames) +
                     " frame=" + std::to_string(frame) + "B rx-wakeup=" + (config.rx_wakeups ? "ring-fd" : "none (timed naps)");
    return std::unique_ptr<PacketRingPort>(new PacketRingPort(std::move(m)));
}

PacketRingPort::PacketRingPort(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PacketRingPort::~PacketRingPort() {
    impl_->release_rx();
    impl_->flush();
}

wire::MacAddr PacketRingPort::mac() const {
    return impl_->mac;
}

size_t PacketRingPort::rx_burst(std::span<RxFrame> out) {
    return impl_->rx_burst(out);
}

void PacketRingPort::release_rx() {
    impl_->release_rx();
}

common::FrameSink& PacketRingPort::tx() {
    return *impl_;
}

std::span<const uint8_t> PacketRingPort::last_committed() const {
    return impl_->staged ? impl_->last : std::span<const uint8_t>{};
}

size_t PacketRingPort::flush_tx() {
    return impl_->flush();
}

PortStats PacketRingPort::stats() const {
    const Impl& m = *impl_;
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(m.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) m.ring_drops += st.tp_drops;
    PortStats s = m.stats;
    s.rx_missed = m.ring_drops + m.rx_truncated;
    return s;
}

int PacketRingPort::rx_wait_fd() const {
    return impl_->rx_wakeups ? impl_->fd : -1;
}

void PacketRingPort::rx_wait_done() {
    Impl& m = *impl_;
    if (!m.arrival_stamps) return;
    // The kernel stamps every frame it writes into the ring: the first waiting one ended the wait.
    const tpacket2_hdr* h = m.rx.at(m.rx_head + m.rx_taken);
    m.wait_arrival_ns = load_status(h) & TP_STATUS_USER ? uint64_t{h->tp_sec} * 1'000'000'000u + h->tp_nsec : 0;
}

void PacketRingPort::set_arrival_stamps(bool on) {
    impl_->arrival_stamps = on;
    impl_->wait_arrival_ns = 0;
}

uint64_t PacketRingPort::wait_arrival_realtime_ns() const {
    return impl_->wait_arrival_ns;
}

std::string PacketRingPort::description() const {
    return impl_->description;
}

unsigned PacketRingPort::ip_mtu() const {
    return impl_->ip_mtu;
}

unsigned PacketRingPort::link_speed_mbps() const {
    return impl_->link_speed_mbps;
}

}  // namespace rnic::port
