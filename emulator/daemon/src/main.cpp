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

#include "datapath.hpp"
#include "idle_policy.hpp"
#include "options.hpp"
#include "poll_loop.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/dpdk_port.hpp"
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

int main(int argc, char** argv) {
    using namespace rnic;
    const auto parsed = daemon::parse_options(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed) {
        std::fprintf(stderr, "rnicd: %s\n%s", parsed.error().c_str(), daemon::usage());
        return 2;
    }
    const daemon::Options& opt = *parsed;
    if (opt.help) {
        std::fputs(daemon::usage(), stdout);
        return 0;
    }
    auto logger = spdlog::stderr_color_mt("rnicd", spdlog::color_mode::never);
    spdlog::set_default_logger(logger);
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ %v");
    spdlog::set_level(spdlog::level::from_str(opt.log_level));
    // Signals before the EAL so a SIGTERM during a slow start is not lost.
    install_signals();

    std::unique_ptr<port::DpdkPort> io;
    std::unique_ptr<port::Capture> capture;
    try {
        port::DpdkPortConfig pc;
        pc.iface = opt.iface;
        pc.eal_args = opt.eal_args;
        pc.mac = opt.mac;
        pc.rx_wakeups = opt.rx_wakeup && !opt.busy_poll;
        pc.ipv4 = opt.ip.addr;
        io = std::make_unique<port::DpdkPort>(pc);
        if (!opt.pcap.empty()) capture = std::make_unique<port::Capture>(opt.pcap, opt.pcap_max_mb << 20);
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }

    // The link-local address always exists (RFC 4291 2.1: every interface has one).
    port::HostAddress self{io->mac(), opt.ip.addr, opt.ip.length, port::with_link_local(io->mac(), opt.ip6)};
    transport::EngineConfig ec;
    // The active MTU is the largest IB MTU whose packets, with every header a RoCEv2 packet may
    // carry, fit the port's IP MTU (rxe keeps the same 80-byte margin): 1500 -> 1024, 9000 -> 4096.
    constexpr unsigned kRoceHeaderMargin = 80;
    const auto active_mtu =
        transport::mtu_from_bytes(io->ip_mtu() > kRoceHeaderMargin ? io->ip_mtu() - kRoceHeaderMargin : 0);
    if (!active_mtu) {
        spdlog::critical("the port's MTU ({}) is too small for RoCE (at least 256 + {} bytes)", io->ip_mtu(),
                         kRoceHeaderMargin);
        return 1;
    }
    ec.limits.active_mtu = std::min(*active_mtu, ec.limits.max_mtu);
    ec.mac = self.mac;
    ec.gids = port::gid_table(self);
    transport::Engine engine(ec);

    const uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    const int64_t realtime_offset = static_cast<int64_t>(clock_ns(CLOCK_REALTIME)) - static_cast<int64_t>(mono0);
    daemon::Datapath dp(*io, engine, self, capture.get(), realtime_offset, monotonic_ns);

    // Declared before the service so pending handlers are destroyed after it, never run on it.
    boost::asio::io_context asio_io;
    host::server::ServerConfig sc;
    sc.name = opt.name;
    sc.run_dir = opt.run_dir;
    sc.mac = self.mac;
    sc.ipv4 = self.ipv4;
    sc.prefix_length = self.prefix_length;
    for (const port::Ipv6Prefix& p : self.ipv6)
        sc.ipv6.push_back(port::ipv6_to_string(p.addr) + "/" + std::to_string(p.length));
    sc.ethernet_mtu = io->ip_mtu();
    sc.link_speed_mbps = io->link_speed_mbps();
    auto resolver = [&dp](const wire::Gid& dgid, uint64_t now, wire::MacAddr& mac) {
        switch (dp.resolve(dgid, now, mac)) {
            case daemon::Neighbour::Resolved:
                return host::server::Resolution::Resolved;
            case daemon::Neighbour::Pending:
                return host::server::Resolution::Pending;
            case daemon::Neighbour::Unreachable:
                break;
        }
        return host::server::Resolution::Unreachable;
    };
    const daemon::PollLoop* loop_counters = nullptr;  // set once the loop exists
    host::server::HostService host(asio_io, engine, sc, resolver, [&dp, &loop_counters] {
        auto all = dp.counter_list();
        if (loop_counters)
            for (auto& c : loop_counters->counter_list()) all.push_back(std::move(c));
        return all;
    });
    try {
        host.start();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }

    const bool woken_by_frames = !opt.busy_poll && io->rx_wait_fd() >= 0;
    const uint64_t nap_cap_us =
        opt.idle_sleep_max_us ? opt.idle_sleep_max_us : woken_by_frames ? daemon::kNapCapWokenUs : daemon::kNapCapTimedUs;
    daemon::PollLoop loop(*io, dp, host,
                          {.busy_poll = opt.busy_poll,
                           .spin_ns = opt.spin_us * 1000,
                           .min_sleep_ns = 16'000,
                           .max_sleep_ns = nap_cap_us * 1000,
                           .stream_spin_ns = opt.stream_spin_us * 1000,
                           .stream_nap_ns = opt.stream_nap_us * 1000},
                          monotonic_ns);
    loop_counters = &loop;
    apply_sched(opt.sched, opt.busy_poll);

    std::string ip6_text;
    for (const std::string& a : sc.ipv6) ip6_text += " ip6 " + a;
    spdlog::info("rnicd up: {} port {} mac {} ip {}/{}{} gid0 {} polling {} sched {}{}", opt.name, io->description(),
                 mac_text(self.mac), wire::ipv4_to_string(self.ipv4), int{self.prefix_length}, ip6_text,
                 ec.gids[0].to_string(),
                 opt.busy_poll ? std::string("busy")
                               : "adaptive (spin " + std::to_string(opt.spin_us) + " us, in a stream " +
                                     std::to_string(opt.stream_spin_us) + " us then " +
                                     std::to_string(opt.stream_nap_us) + " us naps, naps up to " +
                                     std::to_string(nap_cap_us) + " us, " +
                                     (loop.wakes_on_rx() ? "woken by frames" : "timed") + ")",
                 daemon::to_string(opt.sched), capture ? " capture " + opt.pcap : std::string());
    dp.start(mono0);

    while (!stop_requested.load(std::memory_order_relaxed)) {
        loop.turn();
        if (dump_requested.exchange(false, std::memory_order_relaxed)) spdlog::info("counters: {}", dp.summary());
    }

    spdlog::info("rnicd stopping: disconnecting {} session(s)", host.session_count());
    host.shutdown(clock_ns(CLOCK_MONOTONIC));
    if (capture) capture->flush();
    std::string loop_text;
    for (const auto& [name, v] : loop.counter_list()) loop_text += name + "=" + std::to_string(v) + " ";
    spdlog::info("loop: {}", loop_text);
    spdlog::info("counters: {}", dp.summary());  // second to last: tests/system/check_daemon.py reads it there
    spdlog::info("rnicd stopping{}", capture ? " (capture: " + std::to_string(capture->frames()) + " frames in " +
                                                   std::to_string(capture->files()) + " file(s))"
                                             : std::string());
    capture.reset();
    io.reset();
    return 0;
}
