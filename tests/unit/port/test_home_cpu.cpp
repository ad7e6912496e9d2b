// rnicd --home-cpu against the real kernel: each case runs on a thread of its own, so the
// affinity it changes is that thread's and the test process keeps its own.
#include <sched.h>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "home_cpu.hpp"

using rnic::daemon::HomeCpu;

namespace {

cpu_set_t current_affinity() {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    return set;
}

std::vector<int> cpus_of(const cpu_set_t& set) {
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

template <typename Fn>
void on_own_thread(Fn fn) {
    std::thread t(fn);
    t.join();
}

constexpr uint64_t kSettle = 2'000'000;

}  // namespace

TEST_CASE("home cpu: home outside streams, every allowed CPU during one, home again once it settled") {
    const std::vector<int> allowed = cpus_of(current_affinity());
    REQUIRE_FALSE(allowed.empty());
    const int home_cpu = allowed.back();
    on_own_thread([&] {
        HomeCpu home(home_cpu, kSettle);
        CHECK(cpus_of(current_affinity()) == std::vector<int>{home_cpu});
        CHECK(home.at_home());

        CHECK_FALSE(home.follow(false, 1'000));  // no stream: stays, no syscall
        CHECK(home.follow(true, 2'000));         // a stream: leaves at once
        CHECK_FALSE(home.at_home());
        CHECK(cpus_of(current_affinity()) == allowed);
        CHECK_FALSE(home.follow(true, 3'000));  // still streaming: nothing to change

        // The stream ended at 3,000 ns: home only after settling, not at the first quiet turn.
        CHECK_FALSE(home.follow(false, 3'000 + kSettle - 1));
        CHECK(cpus_of(current_affinity()) == allowed);
        CHECK(home.follow(false, 3'000 + kSettle));
        CHECK(home.at_home());
        CHECK(cpus_of(current_affinity()) == std::vector<int>{home_cpu});
        CHECK(home.moves() == 2);
        CHECK(home.refused() == 0);
    });
}

TEST_CASE("home cpu: a stream that pauses shorter than the settling time keeps the loop away") {
    const int home_cpu = cpus_of(current_affinity()).front();
    on_own_thread([&] {
        HomeCpu home(home_cpu, kSettle);
        uint64_t now = 1'000;
        CHECK(home.follow(true, now));
        for (int i = 0; i < 100; ++i) {  // streaming, then quiet for half the settling time, again and again
            now += kSettle / 2;
            CHECK_FALSE(home.follow(false, now));
            now += 1'000;
            CHECK_FALSE(home.follow(true, now));
        }
        CHECK(home.moves() == 1);
        CHECK_FALSE(home.at_home());
    });
}

TEST_CASE("home cpu: a CPU the daemon may not run on is refused with its reason") {
    const cpu_set_t allowed = current_affinity();
    int outside = -1;
    for (int c = 0; c < CPU_SETSIZE && outside < 0; ++c)
        if (!CPU_ISSET(c, &allowed)) outside = c;
    REQUIRE(outside >= 0);
    on_own_thread([&] {
        CHECK_THROWS_WITH(HomeCpu(outside), Catch::Contains("--home-cpu " + std::to_string(outside)) &&
                                                Catch::Contains("not among the"));
        CHECK_THROWS_WITH(HomeCpu(-1), Catch::Contains("not among the"));
        CHECK(HomeCpu::unusable(outside) == "--home-cpu " + std::to_string(outside) + ": not among the " +
                                                std::to_string(cpus_of(allowed).size()) + " CPUs rnicd may run on");
        CHECK(HomeCpu::unusable(cpus_of(allowed).front()).empty());
        CHECK(cpus_of(current_affinity()) == cpus_of(allowed));  // left as it was
    });
}
