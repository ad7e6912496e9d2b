// rnicd's loop (PollLoop) over FakePort and the real host service: when it naps, what ends a
// nap, and that a frame is never left waiting for the nap's cap.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "poll_loop.hpp"
#include "client_session.hpp"
#include "raw_client.hpp"
#include "sanitizer.hpp"

using namespace rnic;
using namespace rnic::host::test;

namespace {

uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Naps this long would fail the test by ctest's timeout, never pass it by luck.
constexpr uint64_t kLongNap = 30'000'000'000ull;

daemon::IdlePolicy::Config sleepy(uint64_t max_sleep_ns = kLongNap) {
    return {.busy_poll = false, .spin_ns = 0, .min_sleep_ns = 1000, .max_sleep_ns = max_sleep_ns};
}

// Runs `act` on another thread once the loop has advertised a nap (status page `sleeping`),
// as a peer's frame or a client would arrive while the daemon sleeps.
std::thread when_asleep(const Rig& rig, std::function<void()> act) {
    return std::thread([&rig, act = std::move(act)] {
        for (int i = 0; i < 10'000 && rig.host->status().sleeping.load() == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // well inside the nap, usually
        act();
    });
}

size_t echo_replies(Rig& rig) {
    size_t n = 0;
    for (const auto& f : rig.port.sent()) n += f.size() > 34 && f[23] == 1 && f[34] == 0;
    return n;
}

}  // namespace

TEST_CASE("poll loop: a frame ends a nap and one that came before the arming is found by the last look") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(), monotonic_ns);
    REQUIRE(loop.wakes_on_rx());

    SECTION("a frame arriving during the nap wakes the loop") {
        auto peer = when_asleep(rig, [&rig] { rig.port.inject(port::test::echo_request(56)); });
        loop.turn();  // naps until the frame
        peer.join();
        const auto& c = loop.counters();
        // Rarely the frame beats the nap and the last look finds it: fine as well.
        CHECK(c.woken_by_rx + c.last_look_work == 1);
        CHECK(c.naps_timed_out == 0);
        CHECK(rig.port.arms() >= 1);
        if (c.woken_by_rx) CHECK(rig.port.waits_done() == 1);
        loop.turn();
        CHECK(echo_replies(rig) == 1);
    }
    SECTION("a frame whose wake-up the arming cleared is found before sleeping") {
        bool once = true;
        rig.port.on_arm([&] {
            if (std::exchange(once, false)) rig.port.inject(port::test::echo_request(56));
        });
        loop.turn();
        const auto& c = loop.counters();
        CHECK(c.last_look_work == 1);
        CHECK(c.naps == 0);
        CHECK(echo_replies(rig) == 1);  // answered by the last look itself
    }
}

TEST_CASE("poll loop: a kick or a control message ends a nap") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(), monotonic_ns);
    RawClient c(rig.host->socket_path());
    Reply hello = rig.hello(c);
    REQUIRE(hello.fds.size() == 5);
    const int kick = hello.fds[1];

    auto client = when_asleep(rig, [kick] {
        const uint64_t one = 1;
        REQUIRE(write(kick, &one, sizeof one) == sizeof one);
    });
    loop.turn();
    client.join();
    CHECK(loop.counters().woken_by_kick + loop.counters().last_look_work == 1);

    // A request sent while the loop sleeps is answered from inside the nap, which then ends.
    auto query = when_asleep(rig, [&c] { c.send(host::abi::Op::QueryPort, nullptr, 0); });
    loop.turn();
    query.join();
    CHECK(loop.counters().woken_by_control + loop.counters().last_look_work >= 1);
    std::optional<Reply> r = c.try_receive();
    REQUIRE(r);
    CHECK(r->header.status == 0);
}

TEST_CASE("poll loop: --busy-poll never naps and a port without a wake fd naps on a timer") {
    SECTION("busy") {
        Rig rig;
        auto idle = sleepy();
        idle.busy_poll = true;
        daemon::PollLoop loop(rig.port, rig.dp, *rig.host, idle, monotonic_ns);
        CHECK_FALSE(loop.wakes_on_rx());
        for (int i = 0; i < 200; ++i) loop.turn();
        CHECK(loop.counters().naps == 0);
        CHECK(rig.port.arms() == 0);
    }
    SECTION("no wake fd: timed naps that start short and double") {
        Rig rig;
        rig.port.disable_rx_wakeup();
        daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(8'000), monotonic_ns);
        CHECK_FALSE(loop.wakes_on_rx());
        for (int i = 0; i < 10; ++i) loop.turn();
        CHECK(loop.counters().naps == 10);
        CHECK(loop.counters().naps_timed_out == 10);
        CHECK(rig.port.arms() == 0);
        rig.port.inject(port::test::echo_request(8));
        loop.turn();
        CHECK(echo_replies(rig) == 1);
        CHECK(loop.counters().rx_after_timeout == 0);  // only counted where a wake-up was due
    }
}

TEST_CASE("poll loop: a stream nap is not advertised, so clients post without kicking, and it ends on its timer") {
    Rig rig;
    auto idle = sleepy();
    idle.stream_work = 1;  // one frame makes a stream
    idle.stream_window_ns = kLongNap;
    idle.stream_nap_ns = 200'000'000;  // long enough to look at the status page inside it
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, idle, monotonic_ns);
    rig.port.inject(port::test::echo_request(8));
    loop.turn();  // serves the frame: now a stream
    REQUIRE(echo_replies(rig) == 1);
    std::atomic<bool> napping{true};
    std::atomic<int> advertised{0};
    std::thread watcher([&] {
        for (int i = 0; i < 100 && napping.load(); ++i) {
            advertised += rig.host->status().sleeping.load();
            // A frame during a stream nap does not end it either (the ring holds it).
            if (i == 20) rig.port.inject(port::test::echo_request(8));
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    const uint64_t start = monotonic_ns();
    loop.turn();
    const uint64_t slept = monotonic_ns() - start;
    napping = false;
    watcher.join();
    const auto& c = loop.counters();
    CHECK(c.stream_naps + c.last_look_work == 1);
    if (c.stream_naps == 1) {
        CHECK(advertised.load() == 0);  // `sleeping` stayed 0: no client was asked to kick
        CHECK(c.naps_timed_out == 1);
        CHECK(slept >= 150'000'000);
    }
    loop.turn();
    CHECK(echo_replies(rig) == 2);
}

TEST_CASE("poll loop: a lost wake-up costs one nap cap and is counted") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(100'000'000), monotonic_ns);
    auto peer = when_asleep(rig, [&rig] { rig.port.inject_without_wakeup(port::test::echo_request(8)); });
    loop.turn();
    peer.join();
    loop.turn();
    const auto& c = loop.counters();
    CHECK(c.rx_after_timeout + c.last_look_work == 1);
    CHECK(echo_replies(rig) == 1);
}

namespace {

nlohmann::json latency_doc(Rig& rig) {
    return nlohmann::json::parse(rig.host->stats_json()).at("latency");
}

}  // namespace

TEST_CASE("poll loop: latency tracing is off until asked, and then clients are asked to stamp") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(), monotonic_ns);
    CHECK(rig.host->status().latency_trace.load() == 0);
    CHECK(latency_doc(rig).at("trace") == false);
    loop.set_latency_trace(true);
    CHECK(rig.host->status().latency_trace.load() == 1);
    CHECK(latency_doc(rig).at("trace") == true);
    loop.set_latency_trace(false);
    CHECK(rig.host->status().latency_trace.load() == 0);
}

TEST_CASE("poll loop: a traced doorbell stamp becomes doorbell_to_seen, one from the future is dropped") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(1'000'000), monotonic_ns);
    loop.set_latency_trace(true);
    ClientSession s(rig);
    ClientQp qp = s.create_qp();
    const uint32_t slot = qp.reply.doorbell;

    s.doorbells->doorbell_ns.store(monotonic_ns());
    host::abi::ring_doorbell_slot(*s.doorbells, slot);
    loop.turn();
    auto doc = latency_doc(rig);
    const auto& seen = doc.at("hops").at("doorbell_to_seen");
    CHECK(seen.at("count") == 1);
    CHECK(seen.at("max_ns").get<uint64_t>() < 10'000'000'000ull);
    CHECK(doc.at("bogus_stamps") == 0);

    s.doorbells->doorbell_ns.store(monotonic_ns() + 3'600'000'000'000ull);  // an hour ahead
    host::abi::ring_doorbell_slot(*s.doorbells, slot);
    loop.turn();
    doc = latency_doc(rig);
    CHECK(doc.at("hops").at("doorbell_to_seen").at("count") == 1);
    CHECK(doc.at("bogus_stamps") == 1);

    // Untraced, the daemon leaves the stamp alone and records nothing.
    loop.set_latency_trace(false);
    s.doorbells->doorbell_ns.store(monotonic_ns());
    host::abi::ring_doorbell_slot(*s.doorbells, slot);
    loop.turn();
    CHECK(latency_doc(rig).at("hops").at("doorbell_to_seen").at("count") == 1);
    CHECK(s.doorbells->doorbell_ns.load() != 0);
}

TEST_CASE("poll loop: a traced kick that ends a nap is a kick wake-up, split by CPU") {
    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(), monotonic_ns);
    loop.set_latency_trace(true);
    ClientSession s(rig);
    const int kick = s.kick_fd;
    auto client = when_asleep(rig, [&s, kick] {
        s.doorbells->kick_cpu.store(static_cast<uint32_t>(sched_getcpu()));
        s.doorbells->kick_ns.store(monotonic_ns());
        const uint64_t one = 1;
        REQUIRE(write(kick, &one, sizeof one) == sizeof one);
    });
    loop.turn();
    client.join();
    const auto& h = loop.hops();
    if (loop.counters().woken_by_kick == 1) {
        CHECK(h.kick_wake_same_cpu.count() + h.kick_wake_other_cpu.count() == 1);
        CHECK(std::max(h.kick_wake_same_cpu.max(), h.kick_wake_other_cpu.max()) < kLongNap);
        const auto hops = latency_doc(rig).at("hops");
        CHECK(hops.at("kick_wake_same_cpu").at("count").get<uint64_t>() +
                  hops.at("kick_wake_other_cpu").at("count").get<uint64_t>() ==
              1);
    } else {
        CHECK(loop.counters().last_look_work == 1);  // the kick beat the nap
    }
}

TEST_CASE("poll loop: a traced nap that runs to its timer records how far it overshot") {
    Rig rig;
    rig.port.disable_rx_wakeup();
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(50'000), monotonic_ns);
    loop.set_latency_trace(true);
    for (int i = 0; i < 5; ++i) loop.turn();
    CHECK(loop.counters().naps_timed_out == 5);
    CHECK(loop.hops().nap_overshoot.count() == 5);
    CHECK(latency_doc(rig).at("hops").at("nap_overshoot").at("count") == 5);
    // The loop's hops with nothing to measure stay empty.
    CHECK(loop.hops().seen_to_wire.count() == 0);
}

TEST_CASE("poll loop: a kick from a client on the loop's own core stops the spin, one from another core does not") {
    // Pin the loop (this thread) so "its core" is one answer for the whole test.
    cpu_set_t before;
    REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
    const int core = sched_getcpu();
    REQUIRE(core >= 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);

    Rig rig;
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, sleepy(), monotonic_ns);
    ClientSession s(rig);
    auto kick_from = [&](uint32_t cpu) {
        auto client = when_asleep(rig, [&s, cpu] {
            s.doorbells->kick_cpu.store(cpu);
            const uint64_t one_kick = 1;
            REQUIRE(write(s.kick_fd, &one_kick, sizeof one_kick) == sizeof one_kick);
        });
        loop.turn();
        client.join();
    };
    kick_from(static_cast<uint32_t>(core));
    if (loop.counters().woken_by_kick == 1) {  // else the kick beat the nap: nothing to see
        CHECK(loop.counters().colocated_kicks == 1);
        CHECK(loop.idle().colocated(monotonic_ns()));
        kick_from(static_cast<uint32_t>(core) + 1);
        if (loop.counters().woken_by_kick == 2) {
            CHECK(loop.counters().colocated_kicks == 1);
            CHECK_FALSE(loop.idle().colocated(monotonic_ns()));
        }
    }
    sched_setaffinity(0, sizeof before, &before);
}

TEST_CASE("poll loop: a client lying about its CPU moves the loop at most once per settling time, and is served") {
    // Policy 9 takes the client's word for its CPU (kick_cpu). A client that always claims the
    // loop's own core, and streams WQEs that never complete, gets the loop moved; the bound is
    // one move per settling time, the loop keeps serving it, and it comes back once idle.
    cpu_set_t start;
    REQUIRE(sched_getaffinity(0, sizeof start, &start) == 0);
    if (CPU_COUNT(&start) < 2) {
        WARN("needs two CPUs: skipped");
        return;
    }
    struct RestoreAffinity {
        cpu_set_t set;
        ~RestoreAffinity() { sched_setaffinity(0, sizeof set, &set); }
    } restore{start};

    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect_pair(a, b, kOwnGid);

    auto idle = sleepy(50'000'000);  // every nap is ended by a kick; the cap only bounds the test
    idle.stream_work = 0;            // no stream: only policy 9 moves the loop
    daemon::PollLoop loop(rig.port, rig.dp, *rig.host, idle, monotonic_ns);
    constexpr uint64_t kSettle = 2'000'000;
    loop.set_placement(std::make_unique<daemon::LoopPlacement>(std::nullopt, kSettle));
    const auto moves = [&loop] {
        for (const auto& [name, value] : loop.counter_list())
            if (name == "loop_client_core_moves") return value;
        return uint64_t{0};
    };

    std::atomic<int> loop_cpu{sched_getcpu()};
    std::atomic<bool> done{false};
    std::atomic<uint64_t> posted{0};
    const uint64_t base = reinterpret_cast<uint64_t>(s.buf.data);
    std::memcpy(s.buf.data, "liarliar", 8);
    const uint64_t one = 1;
    std::thread liar([&] {
        const uint64_t until = monotonic_ns() + 300'000'000;
        for (int i = 0; i < 20'000 && monotonic_ns() < until; ++i) {
            if (a.sq.free_slots(a.sq_produced) > 0) {
                // Unsignaled WRITEs: no completion ever tells the loop this client waits on it.
                s.post_send(a, static_cast<uint64_t>(i), /*IBV_WR_RDMA_WRITE*/ 0, base, 8, 0, base + 8192);
                ++posted;
            }
            s.doorbells->kick_cpu.store(static_cast<uint32_t>(loop_cpu.load()));  // "I am on your core"
            (void)!write(s.kick_fd, &one, sizeof one);
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        done = true;
        s.doorbells->kick_cpu.store(UINT32_MAX);
        (void)!write(s.kick_fd, &one, sizeof one);  // ends the loop's last nap
    });
    const uint64_t began = monotonic_ns();
    for (int turns = 0; turns < 10'000'000 && !done.load(); ++turns) {
        loop.turn();
        loop_cpu = sched_getcpu();
    }
    liar.join();
    const uint64_t elapsed = monotonic_ns() - began;
    const uint64_t moved = moves();
    INFO("client moves " << moved << " in " << elapsed / 1000 << " us, " << posted.load() << " WQEs posted, "
                         << loop.counters().colocated_kicks << " co-located kicks");
#ifdef RNIC_TEST_ASAN
    // Under ASan a turn is slow enough that four kicks rarely fall within policy 9's 400 us: the
    // bound below is still checked, the lower one in the plain build (100-130 moves there).
    if (moved == 0) WARN("no move under the sanitizer: the kicks came too far apart");
#else
    CHECK(moved >= 1);  // the claim is acted on...
#endif
    CHECK(moved <= elapsed / kSettle + 1);  // ...at most once per settling time

    // Served all along: every WQE it posted was taken, and its WRITEs landed.
    for (int i = 0; i < 100 && rig.host->activity().wqes_posted != posted.load(); ++i) loop.turn();
    CHECK(rig.host->activity().wqes_posted == posted.load());
    CHECK(std::memcmp(s.buf.data + 8192, s.buf.data, 8) == 0);

    // Idle past the settling time (timed naps, no work): the loop may use every CPU again.
    for (int i = 0; i < 3; ++i) loop.turn();
    cpu_set_t now;
    REQUIRE(sched_getaffinity(0, sizeof now, &now) == 0);
    CHECK(CPU_EQUAL(&now, &start));
}
