// Throughput and latency between the two rnicd through the client library, printed for
// tools/bench-host.sh, which measures the kernel's UDP path on the same veth in the same run.
// Hidden tag: never part of the test run, figures do not belong in pass/fail tests.
// Environment: RNIC_BENCH=latency|bandwidth (one part only), RNIC_BENCH_INFLIGHT=1..32 (WRITEs
// in flight, default 32), RNIC_BENCH_YIELD=1 (the ping-pong threads yield while they spin).
#include <sched.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "bed.hpp"

using namespace rnic::itest;
using Clock = std::chrono::steady_clock;

TEST_CASE("bench: 64 KiB RDMA WRITE bandwidth and 2 B WRITE round trip", "[.bench]") {
    const auto env = bed_env();
    constexpr uint32_t kChunk = 64 * 1024;
    const char* inflight_env = std::getenv("RNIC_BENCH_INFLIGHT");
    const auto kInFlight = static_cast<uint64_t>(inflight_env ? std::clamp(std::atoi(inflight_env), 1, 32) : 32);
    auto a = open_side(env.at("sock_a"), 4 * 1024 * 1024);
    auto b = open_side(env.at("sock_b"), 4 * 1024 * 1024);
    QpOptions o;
    o.mtu = IBV_MTU_4096;
    const QpPair p = connect_pair(*a, *b, o);
    const uint64_t remote = reinterpret_cast<uintptr_t>(b->buf->data);

    // RNIC_BENCH=latency or bandwidth runs one part only (as ib_write_lat and ib_write_bw are
    // separate runs).
    const char* part = std::getenv("RNIC_BENCH");
    const bool want_bw = !part || std::strcmp(part, "latency") != 0;
    const bool want_lat = !part || std::strcmp(part, "bandwidth") != 0;

    // Bandwidth: keep kInFlight WRITEs posted for ~3 s.
    Cqe batch[32];
    uint64_t posted = 0, done = 0;
    const auto start = Clock::now();
    const auto stop_posting = start + std::chrono::seconds(3);
    while (want_bw) {
        const bool posting = Clock::now() < stop_posting;
        while (posting && posted - done < kInFlight) {
            REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE, posted, a->buf->data + (posted % 32) * kChunk, kChunk,
                              remote + (posted % 32) * kChunk, b->mr->rkey) == 0);
            ++posted;
        }
        const int k = a->conn->poll_cq(a->cq, 32, batch);
        REQUIRE(k >= 0);
        for (int i = 0; i < k; ++i) REQUIRE(batch[i].status == IBV_WC_SUCCESS);
        done += static_cast<uint64_t>(k);
        if (!posting && done == posted) break;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const double gbps = static_cast<double>(done) * kChunk * 8 / secs / 1e9;
    if (want_bw) {
        auto ca = counters(*a->conn);
        auto cb = counters(*b->conn);
        std::printf("BENCH write_64k_gbps %.3f (%llu WRITEs in %.2f s, %d in flight; retransmits %llu, receiver "
                    "ring drops %llu)\n",
                    gbps, static_cast<unsigned long long>(done), secs, static_cast<int>(kInFlight),
                    static_cast<unsigned long long>(ca["retransmits"]),
                    static_cast<unsigned long long>(cb["port_rx_missed"]));
    }
    if (!want_lat) return;

    // Latency: ping-pong of 2 B WRITEs as ib_write_lat runs it: two threads (perftest: two
    // processes), one per side, each spinning on its buffer until the peer's WRITE lands there,
    // then writing back, never yielding the core. RNIC_BENCH_YIELD=1 yields while spinning.
    const bool yield = std::getenv("RNIC_BENCH_YIELD") != nullptr;
    volatile uint8_t* a_flag = a->buf->data + 2 * 1024 * 1024;
    volatile uint8_t* b_flag = b->buf->data + 2 * 1024 * 1024;
    const uint64_t a_flag_addr = reinterpret_cast<uintptr_t>(a_flag);
    const uint64_t b_flag_addr = reinterpret_cast<uintptr_t>(b_flag);
    uint8_t* a_src = a->buf->data + 3 * 1024 * 1024;
    uint8_t* b_src = b->buf->data + 3 * 1024 * 1024;
    constexpr int kIters = 2000;
    // Never 0 (the buffer's initial contents) and never equal on consecutive iterations.
    const auto value = [](int i) { return static_cast<uint8_t>(1 + i % 255); };
    // Spins until the flag holds v (false after 5 s: a lost WRITE must fail, not hang).
    const auto wait_flag = [yield](volatile uint8_t* f, uint8_t v) {
        const auto limit = Clock::now() + std::chrono::seconds(5);
        for (uint32_t spins = 0; f[0] != v || f[1] != v; ++spins) {
            if ((spins & 1023) == 0 && Clock::now() > limit) return false;
            if (yield) sched_yield();
        }
        return true;
    };
    // The send completion is reaped by spinning as well (perftest polls its CQ the same way).
    const auto reap = [](Side& s) {
        Cqe c[4];
        const auto limit = Clock::now() + std::chrono::seconds(5);
        for (uint32_t spins = 0;; ++spins) {
            const int k = s.conn->poll_cq(s.cq, 4, c);
            if (k > 0) return c[0].status == IBV_WC_SUCCESS;
            if (k < 0 || ((spins & 1023) == 0 && Clock::now() > limit)) return false;
        }
    };
    std::atomic<int> b_failed{0};
    std::thread responder([&] {
        for (int i = 1; i <= kIters; ++i) {
            const uint8_t v = value(i);
            if (!wait_flag(b_flag, v)) return void(b_failed = i);
            b_src[0] = b_src[1] = v;
            if (post_send(*b, p.b, IBV_WR_RDMA_WRITE, i, b_src, 2, a_flag_addr, a->mr->rkey) != 0 || !reap(*b))
                return void(b_failed = -i);
        }
    });
    std::vector<double> rtt_us;
    rtt_us.reserve(kIters);
    int a_failed = 0;
    for (int i = 1; i <= kIters && !a_failed && !b_failed; ++i) {
        const uint8_t v = value(i);
        const auto t0 = Clock::now();
        a_src[0] = a_src[1] = v;
        if (post_send(*a, p.a, IBV_WR_RDMA_WRITE, i, a_src, 2, b_flag_addr, b->mr->rkey) != 0) a_failed = -i;
        if (!a_failed && !wait_flag(a_flag, v)) a_failed = i;
        if (a_failed) break;
        rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!reap(*a)) a_failed = -i;
    }
    if (a_failed || b_failed) {
        // Unblock the responder: it gives up after 5 s without a WRITE.
        responder.join();
        FAIL("latency ping-pong stopped: A at " << a_failed << ", B at " << b_failed.load());
    }
    responder.join();
    std::sort(rtt_us.begin(), rtt_us.end());
    const double median = rtt_us[rtt_us.size() / 2];
    std::printf("BENCH write_2b_rtt_median_us %.2f one_way_us %.2f p99_us %.2f (%d round trips, %s)\n", median,
                median / 2, rtt_us[rtt_us.size() * 99 / 100], kIters, yield ? "yielding" : "spinning");
}
