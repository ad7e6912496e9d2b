// rnicd: the software RNIC. Set-up (options, EAL, port, engine, capture) fails with a clear
// message and exit status 1 (2 for usage); after that the poll loop runs until SIGINT/SIGTERM.
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "config_file.hpp"
#include "datapath.hpp"
#include "journal_log.hpp"
#include "idle_policy.hpp"
#include "options.hpp"
#include "poll_loop.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/dpdk_port.hpp"
#include "rnic/port/packet_ring_port.hpp"
#include "rnic/wire/gid.hpp"

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<bool> dump_requested{false};

void on_stop(int) { stop_requested.store(true, std::memory_order_relaxed); }
void on_dump(int) { dump_requested.store(true, std::memory_order_relaxed); }

uint64_t clock_ns(clockid_t clock) noexcept {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

// Only the loop's thread: the EAL's own threads (interrupts, timers) stay as they were. Failing
// here costs latency, not correctness, so it is a warning.
void apply_sched(rnic::daemon::Sched s, bool busy_poll) {
    using rnic::daemon::Sched;
    if (s == Sched::Fifo) {
        if (busy_poll)
            spdlog::warn("--sched fifo with --busy-poll: the loop holds its core until RT throttling (95%) stops it");
        sched_param p{};
        p.sched_priority = 1;
        if (sched_setscheduler(0, SCHED_FIFO, &p) != 0)
            spdlog::warn("SCHED_FIFO refused ({}): running with the default policy", std::strerror(errno));
    } else if (s == Sched::Nice) {
        if (setpriority(PRIO_PROCESS, 0, -20) != 0)
            spdlog::warn("nice -20 refused ({}): running at the default priority", std::strerror(errno));
    }
}

std::string mac_text(const rnic::wire::MacAddr& m) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return buf;
}

std::string prefix_text(const rnic::port::Ipv6Prefix& p) {
    return rnic::port::ipv6_to_string(p.addr) + "/" + std::to_string(p.length);
}

void install_signals() {
    struct sigaction sa{};
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sa.sa_handler = on_dump;
    sigaction(SIGUSR1, &sa, nullptr);
    // A client that vanishes must cost an error return, never the daemon.
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace

// Everything one port (one device) needs, built in order and torn down in reverse: the engine
// before the datapath that feeds it, the host service last (its handlers name the others).
struct Device {
    rnic::port::PortIo* io = nullptr;
    std::unique_ptr<rnic::port::Capture> capture;
    rnic::port::HostAddress self;
    std::unique_ptr<rnic::transport::Engine> engine;
    std::unique_ptr<rnic::daemon::Datapath> dp;
    std::unique_ptr<rnic::host::server::HostService> host;
    std::string name;
};

int main(int argc, char** argv) {
    using namespace rnic;
    const auto parsed = daemon::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed) {
        std::fprintf(stderr, "rnicd: %s\n%s", parsed.error().c_str(), daemon::usage());
        return 2;
    }
    const daemon::Options& opt = *parsed;
    if (opt.help) {
        std::fputs(daemon::usage(), stdout);
        return 0;
    }
    if (opt.home_cpu) {
        if (const std::string why = daemon::LoopPlacement::unusable(*opt.home_cpu); !why.empty()) {
            std::fprintf(stderr, "rnicd: %s\n", why.c_str());
            return 2;
        }
    }
    auto logger = spdlog::stderr_color_mt("rnicd", spdlog::color_mode::never);
    spdlog::set_default_logger(logger);
    daemon::set_log_format();
    spdlog::set_level(spdlog::level::from_str(opt.log_level));
    // Signals before the EAL so a SIGTERM during a slow start is not lost.
    install_signals();

    std::unique_ptr<port::DpdkRuntime> dpdk;
    std::vector<std::unique_ptr<port::PacketRingPort>> ring_ports;
    std::vector<Device> devices(opt.ports.size());
    try {
        // --ring-port: every --iface port is rnicd's own TPACKET ring; the rest (and all of them
        // without it) are DPDK's, in the order they were given. No DPDK port, no EAL.
        const auto is_ring = [&](const daemon::PortOptions& po) { return opt.ring_port && !po.iface.empty(); };
        const bool rx_wakeups = opt.rx_wakeup && !opt.busy_poll;
        port::DpdkConfig dc;
        dc.eal_args = opt.eal_args;
        for (const daemon::PortOptions& po : opt.ports) {
            if (is_ring(po)) {
                port::PacketRingConfig rc;
                rc.iface = po.iface;
                rc.mac = po.mac;
                rc.ipv4 = po.ip.addr;
                rc.rx_wakeups = rx_wakeups;
                auto ring = port::PacketRingPort::open(rc);
                if (!ring) throw std::runtime_error("ring port on " + po.iface + ": " + ring.error());
                ring_ports.push_back(std::move(*ring));
                continue;
            }
            port::DpdkPortConfig pc;
            pc.iface = po.iface;
            pc.mac = po.mac;
            pc.rx_wakeups = rx_wakeups;
            pc.rx_descriptors = opt.rx_descriptors;
            pc.tx_descriptors = opt.tx_descriptors;
            pc.ipv4 = po.ip.addr;
            dc.ports.push_back(pc);
        }
        if (!dc.ports.empty()) dpdk = std::make_unique<port::DpdkRuntime>(dc);
        for (size_t i = 0, next_ring = 0, next_dpdk = 0; i < devices.size(); ++i) {
            devices[i].io = is_ring(opt.ports[i]) ? static_cast<port::PortIo*>(ring_ports.at(next_ring++).get())
                                                  : &dpdk->port(next_dpdk++);
            devices[i].name = opt.ports[i].name;
            if (!opt.ports[i].pcap.empty())
                devices[i].capture =
                    std::make_unique<port::Capture>(opt.ports[i].pcap, opt.ports[i].pcap_max_mb << 20);
        }
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }

    const uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    const int64_t realtime_offset = static_cast<int64_t>(clock_ns(CLOCK_REALTIME)) - static_cast<int64_t>(mono0);
    // Declared before the services so pending handlers are destroyed after them, never run on them.
    // Only the poll thread ever touches it (the ODP workers signal through an eventfd of their
    // own), so Asio's scheduler and reactor locks are pure cost: they took ~7 % of the daemon's
    // samples in a message-rate profile, with a lock and unlock around every poll_one and nap.
    boost::asio::io_context asio_io{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
    const daemon::PollLoop* loop_counters = nullptr;  // set once the loop exists
    // One process's registrations on every device count against its one RLIMIT_MEMLOCK.
    const auto pinned_pages = std::make_shared<host::server::PinnedPages>();

    for (size_t i = 0; i < devices.size(); ++i) {
        Device& d = devices[i];
        const daemon::PortOptions& po = opt.ports[i];
        // The link-local address always exists (RFC 4291 2.1: every interface has one).
        d.self = port::HostAddress{d.io->mac(), po.ip.addr, po.ip.length, port::with_link_local(d.io->mac(), po.ip6)};
        transport::EngineConfig ec;
        // The active MTU is the largest IB MTU whose packets, with every header a RoCEv2 packet may
        // carry, fit the port's IP MTU (rxe keeps the same 80-byte margin): 1500 -> 1024, 9000 -> 4096.
        constexpr unsigned kRoceHeaderMargin = 80;
        const auto active_mtu = transport::mtu_from_bytes(
            d.io->ip_mtu() > kRoceHeaderMargin ? d.io->ip_mtu() - kRoceHeaderMargin : 0);
        if (!active_mtu) {
            spdlog::critical("{}: the port's MTU ({}) is too small for RoCE (at least 256 + {} bytes)", d.name,
                             d.io->ip_mtu(), kRoceHeaderMargin);
            return 1;
        }
        ec.limits.active_mtu = std::min(*active_mtu, ec.limits.max_mtu);
        ec.mac = d.self.mac;
        ec.gids = port::gid_table(d.self);
        auto cache = [&opt](const daemon::CacheOption& c) {
            return mem::CacheConfig{.entries = c.entries, .ways = c.ways, .miss_cost_ns = opt.cache_miss_ns};
        };
        ec.caches = {.qpc = cache(opt.qpc_cache), .mpt = cache(opt.mpt_cache), .mtt = cache(opt.mtt_cache)};
        ec.congestion = opt.congestion;
        ec.port_rate_mbps = opt.port_rate_mbps;
        ec.tuning.odp_timeout_ns = opt.odp_timeout_ms * 1'000'000;
        ec.dscp_priority = opt.dscp_priority;
        d.engine = std::make_unique<transport::Engine>(ec);
        d.dp = std::make_unique<daemon::Datapath>(*d.io, *d.engine, d.self, d.capture.get(), realtime_offset,
                                                  monotonic_ns);

        host::server::ServerConfig sc;
        sc.name = d.name;
        sc.run_dir = opt.run_dir;
        sc.socket_mode = opt.socket_mode;
        sc.socket_gid = opt.socket_gid;
        sc.user_limits_default = opt.user_limits_default;
        sc.user_limits = opt.user_limits;
        sc.pinned_pages = pinned_pages;
        sc.cm_keepalive_idle_ms = opt.cm_keepalive.idle_ms;
        sc.cm_keepalive_probe_ms = opt.cm_keepalive.probe_ms;
        sc.cm_keepalive_probes = opt.cm_keepalive.probes;
        sc.mac = d.self.mac;
        sc.ipv4 = d.self.ipv4;
        sc.prefix_length = d.self.prefix_length;
        for (const port::Ipv6Prefix& p : d.self.ipv6) sc.ipv6.push_back(prefix_text(p));
        sc.ethernet_mtu = d.io->ip_mtu();
        sc.link_speed_mbps = d.io->link_speed_mbps();
        daemon::Datapath* dp = d.dp.get();
        auto resolver = [dp](const wire::Gid& dgid, uint64_t now, wire::MacAddr& mac) {
            switch (dp->resolve(dgid, now, mac)) {
                case daemon::Neighbour::Resolved:
                    return host::server::Resolution::Resolved;
                case daemon::Neighbour::Pending:
                    return host::server::Resolution::Pending;
                case daemon::Neighbour::Unreachable:
                    break;
            }
            return host::server::Resolution::Unreachable;
        };
        d.host = std::make_unique<host::server::HostService>(asio_io, *d.engine, sc, resolver, [dp, &loop_counters] {
            auto all = dp->counter_list();
            if (loop_counters)
                for (auto& c : loop_counters->counter_list()) all.push_back(std::move(c));
            return all;
        });
        d.dp->set_cm(&d.host->cm());
        try {
            d.host->start();
        } catch (const std::exception& e) {
            spdlog::critical("{}: {}", d.name, e.what());
            return 1;
        }
    }

    std::vector<daemon::Lane> lanes;
    for (Device& d : devices) lanes.push_back(daemon::Lane{*d.io, *d.dp, *d.host});
    const uint64_t nap_cap_us = opt.idle_sleep_max_us ? opt.idle_sleep_max_us
                                : daemon::PollLoop::frames_end_naps(lanes, opt.busy_poll) ? daemon::kNapCapWokenUs
                                                                                          : daemon::kNapCapTimedUs;
    daemon::PollLoop loop(std::move(lanes),
                          {.busy_poll = opt.busy_poll,
                           .spin_ns = opt.spin_us * 1000,
                           .min_sleep_ns = 16'000,
                           .max_sleep_ns = nap_cap_us * 1000,
                           .stream_spin_ns = opt.stream_spin_us * 1000,
                           .stream_nap_ns = opt.stream_nap_us * 1000,
                           .stream_linger_ns = opt.stream_linger_us * 1000},
                          monotonic_ns);
    loop_counters = &loop;
    loop.set_latency_trace(opt.latency_trace);
    apply_sched(opt.sched, opt.busy_poll);
    try {
        loop.set_placement(std::make_unique<daemon::LoopPlacement>(opt.home_cpu));
    } catch (const std::exception& e) {
        // Without a home, placement is only policy 9's help: the loop runs where the kernel puts it.
        if (opt.home_cpu) {
            spdlog::critical("{}", e.what());
            return 1;
        }
        spdlog::warn("loop placement off: {}", e.what());
    }

    for (Device& d : devices) {
        std::string ip6_text;
        for (const port::Ipv6Prefix& p : d.self.ipv6) ip6_text += " ip6 " + prefix_text(p);
        spdlog::info("rnicd up: {} port {} mac {} ip {}/{}{} gid0 {}{}", d.name, d.io->description(),
                     mac_text(d.self.mac), wire::ipv4_to_string(d.self.ipv4), int{d.self.prefix_length}, ip6_text,
                     d.engine->config().gids[0].to_string(),
                     d.capture ? " capture " + d.capture->current_path() : std::string());
    }
    spdlog::info("poll loop: {} device(s), polling {} sched {}", devices.size(),
                 opt.busy_poll ? std::string("busy")
                               : "adaptive (spin " + std::to_string(opt.spin_us) + " us, in a stream " +
                                     std::to_string(opt.stream_spin_us) + " us then " +
                                     std::to_string(opt.stream_nap_us) + " us naps until " +
                                     std::to_string(opt.stream_linger_us) + " us after it, naps up to " +
                                     std::to_string(nap_cap_us) + " us, " +
                                     (loop.wakes_on_rx() ? "woken by frames" : "timed") + ")",
                 daemon::to_string(opt.sched) +
                     (opt.home_cpu ? " home-cpu " + std::to_string(*opt.home_cpu) : std::string()));
    for (Device& d : devices) d.dp->start(mono0);

    while (!stop_requested.load(std::memory_order_relaxed)) {
        loop.turn();
        if (dump_requested.exchange(false, std::memory_order_relaxed))
            for (Device& d : devices) spdlog::info("{} counters: {}", d.name, d.dp->summary());
    }

    const uint64_t now = clock_ns(CLOCK_MONOTONIC);
    for (Device& d : devices) {
        spdlog::info("rnicd stopping: {}: disconnecting {} session(s)", d.name, d.host->session_count());
        d.host->shutdown(now);
    }
    // One more turn sends the DREQs and REJs the sessions' connections ended with, as Linux's CM
    // does for a process that exits.
    for (Device& d : devices) d.dp->poll(clock_ns(CLOCK_MONOTONIC));
    int status = 0;
    for (Device& d : devices) {
        if (!d.capture) continue;
        try {
            d.capture->flush();
        } catch (const std::exception& e) {
            // The sessions are already told and reclaimed, so the stop goes on, but the exit status
            // says the capture is incomplete: no script should trust it.
            spdlog::error("{}: capture flush failed: {}", d.name, e.what());
            status = 1;
        }
        if (!d.capture->error().empty()) {
            spdlog::error("{}: the capture had stopped early: {}", d.name, d.capture->error());
            status = 1;
        }
    }
    std::string loop_text;
    for (const auto& [name, v] : loop.counter_list()) loop_text += name + "=" + std::to_string(v) + " ";
    spdlog::info("loop: {}", loop_text);
    // tests/system/check_daemon.py reads the counters line, the second to last of the log.
    for (Device& d : devices) spdlog::info("counters: {}", d.dp->summary());
    std::string capture_text;
    for (Device& d : devices)
        if (d.capture)
            capture_text += " (" + d.name + " capture: " + std::to_string(d.capture->frames()) + " frames in " +
                            std::to_string(d.capture->files()) + " file(s))";
    spdlog::info("rnicd stopping{}", capture_text);
    loop.detach();
    for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
        it->host.reset();
        it->dp.reset();
        it->engine.reset();
        it->capture.reset();
    }
    dpdk.reset();
    return status;
}
