// port_rate: the raw packet rate of a port through the same port code rnicd uses (rnic_port_dpdk's
// DpdkRuntime and DpdkPort: af_packet with rnicd's vdev arguments, or af_xdp; or rnicd's own
// TPACKET ring port, PacketRingPort), with no transport engine above it. One process per side: `tx` sends RoCEv2 WRITE frames built
// by the wire library as fast as the port takes them, `rx` counts what arrives. The figure that
// rnicd's message rate is held against (docs/benchmarks.md, "Message rate").
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rate_frames.hpp"
#include "rate_options.hpp"
#include "rate_report.hpp"
#include "rnic/port/dpdk_port.hpp"
#include "rnic/port/packet_ring_port.hpp"
#include "rnic/wire/parser.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace rnic;

volatile std::sig_atomic_t stop_requested = 0;

void on_signal(int) {
    stop_requested = 1;
}

double since(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double>(t1 - t0).count();
}

port::DpdkConfig dpdk_config(const port_rate::Options& o) {
    port::DpdkConfig config;
    port::DpdkPortConfig p;
    p.iface = o.iface;
    p.burst = static_cast<uint16_t>(o.burst);
    p.rx_wakeups = false;  // both sides spin: no wake socket, no interrupts
    config.ports.push_back(p);
    // af_packet: DpdkRuntime adds rnicd's own vdev (framecnt, ring frames sized for the MTU).
    // af_xdp: the vdev rnicd is given for it (docs/daemon.md), which takes every frame on the
    // interface away from the kernel.
    if (o.pmd == port_rate::Pmd::AfXdp) config.eal_args = {"--vdev", "net_af_xdp0,iface=" + o.iface};
    return config;
}

port_rate::Report run_tx(port::PortIo& dev, const port_rate::Options& o) {
    port_rate::FrameParams params{dev.mac(), o.dst_mac, o.src_ip, o.dst_ip, o.payload};
    const auto frames = port_rate::make_frames(params, 64);
    // af_xdp's page-sized mbufs carry smaller frames than the interface's MTU (DpdkPort).
    if (frames[0].size() - 14 > dev.ip_mtu())
        throw std::runtime_error("a frame with " + std::to_string(o.payload) + " B of payload is an IP packet of " +
                                 std::to_string(frames[0].size() - 14) + " B; this port carries at most " +
                                 std::to_string(dev.ip_mtu()) + " B");
    common::FrameSink& sink = dev.tx();
    const auto base = dev.stats();
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    size_t next = 0;
    for (uint64_t round = 0; !stop_requested; ++round) {
        for (unsigned i = 0; i < o.burst; ++i) {
            const std::vector<uint8_t>& f = frames[next++ % frames.size()];
            const std::span<uint8_t> buf = sink.allocate(f.size());
            if (buf.size() < f.size()) break;  // no buffer: counted by the port, flush and go on
            std::memcpy(buf.data(), f.data(), f.size());
            sink.commit(f.size());
        }
        dev.flush_tx();
        if ((round & 15) == 0 && Clock::now() >= end) break;
    }
    const double seconds = since(t0, Clock::now());
    const auto s = dev.stats();
    port_rate::Report r;
    r.role = port_rate::Role::Tx;
    r.seconds = seconds;
    r.frames = s.tx_frames - base.tx_frames;
    r.bytes = r.frames * frames[0].size();  // every frame has the same length
    r.dropped = (s.tx_dropped - base.tx_dropped) + (s.tx_no_buffer - base.tx_no_buffer);
    return r;
}

port_rate::Report run_rx(port::PortIo& dev, const port_rate::Options& o) {
    std::vector<port::RxFrame> rx(o.burst);
    port_rate::Report r;
    r.role = port_rate::Role::Rx;
    const auto base = dev.stats();
    const auto t_start = Clock::now();
    Clock::time_point first{}, last{};
    bool seen = false;
    const auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    const auto wait = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.wait));
    const auto idle = std::chrono::milliseconds(o.idle_ms);
    std::fprintf(stderr, "port_rate rx: ready on %s\n", o.iface.c_str());
    while (!stop_requested) {
        const size_t n = dev.rx_burst(rx);
        const auto now = Clock::now();
        uint64_t ours = 0;
        for (size_t i = 0; i < n; ++i) {
            if (!port_rate::is_roce_v2(rx[i])) {
                ++r.other;
                continue;
            }
            ++ours;
            r.bytes += rx[i].size();
            if (o.verify && !wire::parse_frame(rx[i])) ++r.bad;
        }
        dev.release_rx();
        if (ours) {
            if (!seen) first = now;
            seen = true;
            last = now;
            r.frames += ours;
        }
        if (!seen ? now - t_start >= wait : (now - first >= window || now - last >= idle)) break;
        if (n == 0 && o.nap_us) std::this_thread::sleep_for(std::chrono::microseconds(o.nap_us));
    }
    // The first burst's frames arrived before `first` and are counted: below a burst's worth of error.
    r.seconds = seen ? since(first, last) : 0;
    r.missed = dev.stats().rx_missed - base.rx_missed;
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    port_rate::Options o;
    try {
        o = port_rate::parse_options(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "port_rate: %s\n%s", e.what(), port_rate::usage().c_str());
        return 2;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    try {
        std::unique_ptr<port::DpdkRuntime> runtime;
        std::unique_ptr<port::PacketRingPort> ring;
        port::PortIo* io = nullptr;
        if (o.pmd == port_rate::Pmd::Ring) {
            port::PacketRingConfig rc;
            rc.iface = o.iface;
            rc.ipv4 = o.role == port_rate::Role::Rx ? o.dst_ip : o.src_ip;
            rc.burst = o.burst;
            rc.rx_wakeups = false;
            auto opened = port::PacketRingPort::open(rc);
            if (!opened) throw std::runtime_error("ring port on " + o.iface + ": " + opened.error());
            ring = std::move(*opened);
            io = ring.get();
        } else {
            runtime = std::make_unique<port::DpdkRuntime>(dpdk_config(o));
            io = &runtime->port(0);
        }
        port::PortIo& dev = *io;
        std::fprintf(stderr, "port_rate %s: %s\n", o.role == port_rate::Role::Tx ? "tx" : "rx", dev.description().c_str());
        port_rate::Report r = o.role == port_rate::Role::Tx ? run_tx(dev, o) : run_rx(dev, o);
        r.pmd = o.pmd;
        r.iface = o.iface;
        r.payload = o.payload;
        r.burst = o.burst;
        std::printf("%s\n", (o.json ? port_rate::format_json(r) : port_rate::format_line(r)).c_str());
        std::fflush(stdout);
        if (r.frames == 0) {
            std::fprintf(stderr, "port_rate %s: no RoCEv2 frame %s\n", o.role == port_rate::Role::Tx ? "tx" : "rx",
                         o.role == port_rate::Role::Tx ? "was taken by the port" : "arrived");
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "port_rate: %s\n", e.what());
        return 1;
    }
}
