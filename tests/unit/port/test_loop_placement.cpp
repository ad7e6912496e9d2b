// The poll loop's placement against the real kernel (rnicd --home-cpu, and leaving a streaming
// client's core): each case runs on a thread of its own, so the affinity it changes is that
// thread's and the test process keeps its own.
#include <sched.h>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "loop_placement.hpp"

using rnic::daemon::LoopPlacement;

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
        LoopPlacement home(home_cpu, kSettle);
        CHECK(cpus_of(current_affinity()) == std::vector<int>{home_cpu});
        CHECK(home.at_home());

        CHECK_FALSE(home.follow(false, false, 1'000));  // no stream: stays, no syscall
        CHECK(home.follow(true, true, 2'000));         // a stream: leaves at once
        CHECK_FALSE(home.at_home());
        CHECK(cpus_of(current_affinity()) == allowed);
        CHECK_FALSE(home.follow(true, true, 3'000));  // still streaming: nothing to change

        // The stream ended at 3,000 ns: home only after settling, not at the first quiet turn.
        CHECK_FALSE(home.follow(false, false, 3'000 + kSettle - 1));
        CHECK(cpus_of(current_affinity()) == allowed);
        CHECK(home.follow(false, false, 3'000 + kSettle));
        CHECK(home.at_home());
        CHECK(cpus_of(current_affinity()) == std::vector<int>{home_cpu});
        CHECK(home.home_moves() == 2);
        CHECK(home.refused() == 0);
    });
}

TEST_CASE("home cpu: a stream that pauses shorter than the settling time keeps the loop away") {
    const int home_cpu = cpus_of(current_affinity()).front();
    on_own_thread([&] {
        LoopPlacement home(home_cpu, kSettle);
        uint64_t now = 1'000;
        CHECK(home.follow(true, true, now));
        for (int i = 0; i < 100; ++i) {  // streaming, then quiet for half the settling time, again and again
            now += kSettle / 2;
            CHECK_FALSE(home.follow(false, false, now));
            now += 1'000;
            CHECK_FALSE(home.follow(true, true, now));
        }
        CHECK(home.home_moves() == 1);
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
        CHECK_THROWS_WITH(LoopPlacement(outside), Catch::Contains("--home-cpu " + std::to_string(outside)) &&
                                                      Catch::Contains("not among the"));
        CHECK_THROWS_WITH(LoopPlacement(-1), Catch::Contains("not among the"));
        CHECK(LoopPlacement::unusable(outside) == "--home-cpu " + std::to_string(outside) + ": not among the " +
                                                std::to_string(cpus_of(allowed).size()) + " CPUs rnicd may run on");
        CHECK(LoopPlacement::unusable(cpus_of(allowed).front()).empty());
        CHECK(cpus_of(current_affinity()) == cpus_of(allowed));  // left as it was
    });
}

namespace {

std::vector<int> without(std::vector<int> cpus, int cpu) {
    std::erase(cpus, cpu);
    return cpus;
}

}  // namespace

TEST_CASE("client core: without a home, the loop leaves a streaming client's CPU until it has been idle") {
    const std::vector<int> allowed = cpus_of(current_affinity());
    if (allowed.size() < 2) {
        WARN("one CPU: there is no other core to leave for");
        return;
    }
    const int client = allowed.front();
    on_own_thread([&] {
        LoopPlacement placement(std::nullopt, kSettle);
        CHECK_FALSE(placement.has_home());
        CHECK(cpus_of(current_affinity()) == allowed);  // no home: left where it was
        CHECK_FALSE(placement.follow(true, true, 1'000));

        placement.leave_client_cpu(client, 2'000);
        CHECK(placement.follow(false, true, 2'000));
        CHECK(cpus_of(current_affinity()) == without(allowed, client));
        CHECK(placement.client_moves() == 1);

        // Work keeps it away however long the stream lasts; a pause shorter than the settling
        // time does too, and the same client seen again changes nothing.
        uint64_t now = 2'000;
        for (int i = 0; i < 50; ++i) {
            now += kSettle / 2;
            CHECK_FALSE(placement.follow(false, i % 2 == 1, now));  // the last turn found work
            placement.leave_client_cpu(client, now);
        }
        CHECK(placement.avoiding_client());
        CHECK(cpus_of(current_affinity()) == without(allowed, client));

        // Idle for the settling time: the client's stream is over, every CPU again.
        CHECK_FALSE(placement.follow(false, false, now + kSettle - 1));
        CHECK(placement.follow(false, false, now + kSettle));
        CHECK_FALSE(placement.avoiding_client());
        CHECK(cpus_of(current_affinity()) == allowed);
        CHECK(placement.client_moves() == 1);
        CHECK(placement.home_moves() == 0);
        CHECK(placement.refused() == 0);
    });
}

TEST_CASE("client core: a client on the home core sends the loop away, home again after it, and a client that follows waits") {
    const std::vector<int> allowed = cpus_of(current_affinity());
    if (allowed.size() < 2) {
        WARN("one CPU: there is no other core to leave for");
        return;
    }
    const int home_cpu = allowed.front(), other = allowed.back();
    on_own_thread([&] {
        LoopPlacement placement(home_cpu, kSettle);
        CHECK(placement.at_home());
        placement.leave_client_cpu(home_cpu, 1'000);  // the client shares the home core and streams
        CHECK(placement.follow(false, true, 1'000));
        CHECK_FALSE(placement.at_home());
        CHECK(cpus_of(current_affinity()) == without(allowed, home_cpu));

        // The client followed the loop to `other`: within the settling time the loop stays put.
        placement.leave_client_cpu(other, 1'000 + kSettle - 1);
        CHECK_FALSE(placement.follow(false, true, 1'000 + kSettle - 1));
        CHECK(cpus_of(current_affinity()) == without(allowed, home_cpu));
        // After it, the loop leaves `other` in turn.
        placement.leave_client_cpu(other, 1'000 + kSettle);
        CHECK(placement.follow(false, true, 1'000 + kSettle));
        CHECK(cpus_of(current_affinity()) == without(allowed, other));
        CHECK(placement.client_moves() == 2);

        // Idle: home again, and its moves pair up (left once, came back once).
        const uint64_t quiet = 1'000 + 2 * kSettle;
        CHECK(placement.follow(false, false, quiet));
        CHECK(placement.at_home());
        CHECK(cpus_of(current_affinity()) == std::vector<int>{home_cpu});
        CHECK(placement.home_moves() == 2);
    });
}

TEST_CASE("client core: with a single CPU allowed, or a CPU the loop may not use, nothing moves") {
    const std::vector<int> allowed = cpus_of(current_affinity());
    on_own_thread([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(allowed.front(), &one);
        REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
        LoopPlacement placement(std::nullopt, kSettle);
        placement.leave_client_cpu(allowed.front(), 1'000);
        placement.leave_client_cpu(-1, 1'000);
        placement.leave_client_cpu(CPU_SETSIZE, 1'000);
        CHECK_FALSE(placement.avoiding_client());
        CHECK_FALSE(placement.follow(true, true, 1'000));
        CHECK(cpus_of(current_affinity()) == std::vector<int>{allowed.front()});
        CHECK(placement.client_moves() == 0);
    });
}
