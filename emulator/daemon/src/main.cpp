// rnicd: the software RNIC. Set-up (options, EAL, port, engine, capture) fails with a clear
// message and exit status 1 (2 for usage); after that the poll loop runs until SIGINT/SIGTERM.
#include <signal.h>
#include <time.h>

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <memory>

#include "datapath.hpp"
#include "idle_policy.hpp"
#include "options.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/dpdk_port.hpp"
#include "rnic/wire/gid.hpp"

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<bool> dump_requested{false};

void on_stop(int) { stop_requested.store(true, std::memory_order_relaxed); }
void on_dump(int) { dump_requested.store(true, std::memory_order_relaxed); }

uint64_t clock_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
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
        io = std::make_unique<port::DpdkPort>(pc);
        if (!opt.pcap.empty()) capture = std::make_unique<port::Capture>(opt.pcap, opt.pcap_max_mb << 20);
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }

    port::HostAddress self{io->mac(), opt.ip.addr, opt.ip.length};
    transport::EngineConfig ec;
    ec.mac = self.mac;
    ec.gids = {wire::Gid::from_ipv4(self.ipv4)};
    transport::Engine engine(ec);

    const uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    const int64_t realtime_offset = static_cast<int64_t>(clock_ns(CLOCK_REALTIME)) - static_cast<int64_t>(mono0);
    daemon::Datapath dp(*io, engine, self, capture.get(), realtime_offset);
    daemon::IdlePolicy idle({.busy_poll = opt.busy_poll,
                             .spin_ns = 1'000'000,
                             .min_sleep_ns = 16'000,
                             .max_sleep_ns = opt.idle_sleep_max_us * 1000});

    // Declared before the service so pending handlers are destroyed after it, never run on it.
    boost::asio::io_context asio_io;
    host::server::ServerConfig sc;
    sc.name = opt.name;
    sc.run_dir = opt.run_dir;
    sc.mac = self.mac;
    sc.ipv4 = self.ipv4;
    sc.prefix_length = self.prefix_length;
    sc.ethernet_mtu = transport::mtu_bytes(engine.query_port().active_mtu);
    auto resolver = [&dp](uint32_t ip, uint64_t now, wire::MacAddr& mac) {
        switch (dp.resolve(ip, now, mac)) {
            case daemon::Neighbour::Resolved:
                return host::server::Resolution::Resolved;
            case daemon::Neighbour::Pending:
                return host::server::Resolution::Pending;
            case daemon::Neighbour::Unreachable:
                break;
        }
        return host::server::Resolution::Unreachable;
    };
    host::server::HostService host(asio_io, engine, sc, resolver, [&dp] { return dp.counter_list(); });
    try {
        host.start();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }

    spdlog::info("rnicd up: {} port {} mac {} ip {}/{} gid0 {} polling {}{}", opt.name, io->description(),
                 mac_text(self.mac), wire::ipv4_to_string(self.ipv4), int{self.prefix_length}, ec.gids[0].to_string(),
                 opt.busy_poll ? "busy" : "adaptive", capture ? " capture " + opt.pcap : std::string());
    dp.start(mono0);

    // Control messages are served between turns: every 64 turns or 50 us while busy, and at
    // once while asleep (the loop sleeps inside Asio).
    constexpr uint64_t kControlEveryNs = 50'000;
    uint64_t turns = 0;
    uint64_t last_control = 0;
    while (!stop_requested.load(std::memory_order_relaxed)) {
        const uint64_t now = clock_ns(CLOCK_MONOTONIC);
        size_t work = host.poll(now);
        work += dp.poll(now);
        if ((++turns & 63) == 0 || now - last_control >= kControlEveryNs) {
            host.poll_control();
            last_control = now;
        }
        if (dump_requested.exchange(false, std::memory_order_relaxed)) spdlog::info("counters: {}", dp.summary());
        if (const uint64_t sleep_ns = idle.after_poll(work, now, dp.next_deadline())) host.sleep(sleep_ns);
    }

    spdlog::info("rnicd stopping: disconnecting {} session(s)", host.session_count());
    host.shutdown(clock_ns(CLOCK_MONOTONIC));
    if (capture) capture->flush();
    spdlog::info("counters: {}", dp.summary());
    spdlog::info("rnicd stopping{}", capture ? " (capture: " + std::to_string(capture->frames()) + " frames in " +
                                                   std::to_string(capture->files()) + " file(s))"
                                             : std::string());
    capture.reset();
    io.reset();
    return 0;
}
