// Throughput and latency between the two rnicd through the client library, printed for
// tools/bench-host.sh, which measures the kernel's UDP path on the same veth in the same run.
// Hidden tag: never part of the test run, figures do not belong in pass/fail tests.
#include <sched.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "bed.hpp"

using namespace rnic::itest;
using Clock = std::chrono::steady_clock;

TEST_CASE("bench: 64 KiB RDMA WRITE bandwidth and 2 B WRITE round trip", "[.bench]") {
    const auto env = bed_env();
    constexpr uint32_t kChunk = 64 * 1024;
    constexpr int kInFlight = 32;
    auto a = open_side(env.at("sock_a"), 4 * 1024 * 1024);
    auto b = open_side(env.at("sock_b"), 4 * 1024 * 1024);
    QpOptions o;
    o.mtu = IBV_MTU_4096;
    const QpPair p = connect_pair(*a, *b, o);
    const uint64_t remote = reinterpret_cast<uintptr_t>(b->buf->data);

    // Bandwidth: keep kInFlight WRITEs posted for ~3 s.
    Cqe batch[32];
    uint64_t posted = 0, done = 0;
    const auto start = Clock::now();
    const auto stop_posting = start + std::chrono::seconds(3);
    while (true) {
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
    std::printf("BENCH write_64k_gbps %.3f (%llu WRITEs in %.2f s, %d in flight)\n", gbps,
                static_cast<unsigned long long>(done), secs, kInFlight);

    // Latency: ping-pong of 2 B WRITEs, each side polling its buffer (as ib_write_lat does).
    volatile uint8_t* a_flag = a->buf->data + 2 * 1024 * 1024;
    volatile uint8_t* b_flag = b->buf->data + 2 * 1024 * 1024;
    const uint64_t a_flag_addr = reinterpret_cast<uintptr_t>(a_flag);
    const uint64_t b_flag_addr = reinterpret_cast<uintptr_t>(b_flag);
    uint8_t* a_src = a->buf->data + 3 * 1024 * 1024;
    uint8_t* b_src = b->buf->data + 3 * 1024 * 1024;
    constexpr int kIters = 2000;
    std::vector<double> rtt_us;
    rtt_us.reserve(kIters);
    const auto wait_flag = [](volatile uint8_t* f, uint8_t v) {
        const auto limit = Clock::now() + std::chrono::seconds(5);
        // Yield while spinning: on a 2-core machine two busy-polling daemons already own the
        // cores, and a client that never yields waits for the scheduler's timeslice instead.
        while (f[0] != v || f[1] != v) {
            if (Clock::now() > limit) FAIL("no WRITE arrived within 5 s");
            sched_yield();
        }
    };
    for (int i = 1; i <= kIters; ++i) {
        const auto v = static_cast<uint8_t>(i & 0xFF ? i & 0xFF : 1);
        const auto t0 = Clock::now();
        a_src[0] = a_src[1] = v;
        REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE, i, a_src, 2, b_flag_addr, b->mr->rkey) == 0);
        wait_flag(b_flag, v);
        b_src[0] = b_src[1] = v;
        REQUIRE(post_send(*b, p.b, IBV_WR_RDMA_WRITE, i, b_src, 2, a_flag_addr, a->mr->rkey) == 0);
        wait_flag(a_flag, v);
        rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        // Reap both send completions so the queues never fill.
        REQUIRE(wait_completions(*a, 1).size() == 1);
        REQUIRE(wait_completions(*b, 1).size() == 1);
    }
    std::sort(rtt_us.begin(), rtt_us.end());
    const double median = rtt_us[rtt_us.size() / 2];
    std::printf("BENCH write_2b_rtt_median_us %.2f one_way_us %.2f p99_us %.2f (%d round trips)\n", median,
                median / 2, rtt_us[rtt_us.size() * 99 / 100], kIters);
}
