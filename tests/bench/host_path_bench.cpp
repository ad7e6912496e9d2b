// The whole host path in one process: rnicd without DPDK (HostService, the Datapath over the
// in-memory port, the engine) served by a thread as its poll loop would, and the client library
// in the main thread driving two RC QPs of that daemon connected to each other (the datapath
// loops frames for our own MAC back into the engine). 64 B RDMA WRITEs, DEPTH in flight (32), one
// in SIGNAL_EVERY (16) signaled, as perftest posts them. Prints operations per second and the heap allocations per
// operation of both threads once warmed up: posting, the doorbell, the daemon's turn, the frames
// and the completion must allocate nothing.
// Usage: host_path_bench [SECONDS [DEPTH [SIGNAL_EVERY]]]
// clang-format off
#include <utility>  // Boost 1.74 Asio needs it first as C++20
// clang-format on

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "datapath.hpp"
#include "rnic/host/client/connection.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/fake_port.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/transport/engine.hpp"

using namespace rnic;
namespace abi = rnic::host::abi;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kStateInit = 1, kStateRtr = 2, kStateRts = 3;
constexpr uint32_t kMtu4096 = 5;
constexpr uint32_t kAccessAll = 0xF;
constexpr uint8_t kWrRdmaWrite = 0;
constexpr uint32_t kSignaled = 2;

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

[[noreturn]] void fail(const char* what, int rc) {
    std::fprintf(stderr, "host_path_bench: %s: %s\n", what, std::strerror(rc));
    std::exit(1);
}

// rnicd's pieces over the in-memory port, on their own thread.
struct Daemon {
    const port::HostAddress self{
        {0x02, 0, 0, 0, 0, 0x01}, 0x0A4D0001, 24, port::with_link_local({0x02, 0, 0, 0, 0, 0x01}, {})};
    std::string dir;
    boost::asio::io_context io;
    port::FakePort port{self.mac};
    transport::Engine engine{[this] {
        transport::EngineConfig c;
        c.mac = self.mac;
        c.gids = port::gid_table(self);
        return c;
    }()};
    daemon::Datapath dp{port, engine, self, nullptr};
    std::unique_ptr<host::server::HostService> host;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> turns{0};
    std::thread thread;

    Daemon() {
        char tmpl[] = "/tmp/rnic-host-bench-XXXXXX";
        if (!mkdtemp(tmpl)) fail("mkdtemp", errno);
        dir = tmpl;
        host::server::ServerConfig sc;
        sc.name = "rnicbench";
        sc.run_dir = dir;
        sc.mac = self.mac;
        sc.ipv4 = self.ipv4;
        auto resolver = [this](const wire::Gid& dgid, uint64_t t, wire::MacAddr& mac) {
            return dp.resolve(dgid, t, mac) == daemon::Neighbour::Resolved ? host::server::Resolution::Resolved
                                                                           : host::server::Resolution::Unreachable;
        };
        host = std::make_unique<host::server::HostService>(io, engine, sc, resolver);
        host->start();
        dp.start(now_ns());
        thread = std::thread([this] {
            while (!stop.load(std::memory_order_relaxed)) {
                const uint64_t t = now_ns();
                host->poll(t);
                dp.poll(t);
                host->poll_control();
                turns.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    ~Daemon() {
        stop = true;
        thread.join();
        host.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

template <class T>
T must(host::client::Result<T> r, const char* what) {
    if (!r) fail(what, r.error());
    return std::move(*r);
}

void connect(host::client::Connection& c, host::client::Qp* qp, uint32_t dest, const uint8_t* dgid) {
    abi::QpAttr a{};
    a.qp_state = kStateInit;
    a.port_num = 1;
    a.qp_access_flags = kAccessAll & ~1u;
    if (int rc = c.modify_qp(qp, a, 1 | 16 | 32 | 8)) fail("modify_qp INIT", rc);
    a = {};
    a.qp_state = kStateRtr;
    a.path_mtu = kMtu4096;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    std::memcpy(a.ah_attr.dgid, dgid, 16);
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    if (int rc = c.modify_qp(qp, a, 1 | 128 | 256 | (1u << 20) | (1u << 12) | (1u << 17) | (1u << 15)))
        fail("modify_qp RTR", rc);
    a = {};
    a.qp_state = kStateRts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (int rc = c.modify_qp(qp, a, 1 | (1u << 16) | (1u << 9) | (1u << 10) | (1u << 11) | (1u << 13)))
        fail("modify_qp RTS", rc);
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
    Daemon d;
    auto conn = must(host::client::Connection::open("rnicbench", d.dir), "open");
    host::client::Connection& c = *conn;
    auto* pd = must(c.alloc_pd(), "alloc_pd");
    std::vector<uint8_t> buffer(1 << 16);
    auto* mr = must(c.reg_mr(pd, buffer.data(), buffer.size(), kAccessAll), "reg_mr");
    auto* cq = must(c.create_cq(256, nullptr, 0), "create_cq");
    host::client::QpInitAttr init{2 /* IBV_QPT_RC */, cq, cq, nullptr, {64, 64, 1, 1, 0}, false};
    auto* a = must(c.create_qp(pd, init), "create_qp");
    auto* b = must(c.create_qp(pd, init), "create_qp");
    const uint8_t* own_gid = c.hello().gids[0];
    connect(c, a, b->qpn, own_gid);
    connect(c, b, a->qpn, own_gid);

    const uint32_t depth = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 32;
    const uint32_t signal_every = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 16;
    if (depth == 0 || depth > 64 || signal_every == 0 || signal_every > depth)
        fail("DEPTH 1..64, SIGNAL_EVERY 1..DEPTH", EINVAL);
    abi::Sge sge{reinterpret_cast<uint64_t>(buffer.data()), 64, mr->lkey};
    host::client::SendWr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = kWrRdmaWrite;
    wr.remote_addr = reinterpret_cast<uint64_t>(buffer.data()) + 4096;
    wr.rkey = mr->rkey;
    std::vector<abi::Cqe> cqes(64);
    uint64_t posted = 0, completed = 0;
    const auto t0 = Clock::now();
    const auto warm = t0 + std::chrono::duration<double>(seconds / 5);
    const auto limit = t0 + std::chrono::duration<double>(seconds);
    bool counting = false;
    uint64_t allocations_at = 0, completed_at = 0;
    auto counted_from = t0;
    for (uint64_t spins = 0;; ++spins) {
        while (posted - completed < depth) {
            wr.wr_id = posted;
            wr.send_flags = posted % signal_every == signal_every - 1 ? kSignaled : 0;
            const host::client::SendWr* bad = nullptr;
            if (int rc = c.post_send(a, &wr, &bad)) fail("post_send", rc);
            ++posted;
        }
        const int n = c.poll_cq(cq, static_cast<int>(cqes.size()), cqes.data());
        if (n < 0) fail("poll_cq", -n);
        for (int i = 0; i < n; ++i) {
            if (cqes[i].status != 0) fail("completion", EIO);
            completed = cqes[i].wr_id + 1;
        }
        if ((spins & 255) == 0) {
            const auto t = Clock::now();
            if (!counting && t > warm) {
                counting = true;
                allocations_at = bench::allocations();
                completed_at = completed;
                counted_from = t;
            }
            if (t > limit) break;
        }
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - counted_from).count();
    const double ops = static_cast<double>(completed - completed_at);
    std::printf(
        "client library -> rnicd host path (in process, loopback), 64 B RDMA WRITE, %u in flight, 1 in %u signaled\n",
        depth, signal_every);
    std::printf("%10.0f ops/s  %.4f allocations/op (%llu allocations over %.0f operations)\n", ops / elapsed,
                static_cast<double>(bench::allocations() - allocations_at) / std::max(ops, 1.0),
                static_cast<unsigned long long>(bench::allocations() - allocations_at), ops);
    std::printf("daemon turns: %.0f/s\n", static_cast<double>(d.turns.load()) / seconds);
    if (std::getenv("HOST_PATH_BENCH_STATS")) std::printf("%s\n", must(c.stats(), "stats").c_str());
    return 0;
}
