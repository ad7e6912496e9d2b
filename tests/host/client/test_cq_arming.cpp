// The CQ arming handshake of the shared rings (abi::arm_cq on the client, abi::take_arm_after_publish
// in the daemon), run by two threads released together, round after round: in every round
// either the client's look at `producer` after arming finds the daemon's entry, or the daemon
// sees the arm and fires the event. A round where both miss is an ibv_get_cq_event that never
// returns. With release/acquire alone instead of the fences, x86 loses both in some rounds of
// this test (the loads pass the stores in the store buffers).
#include <catch2/catch.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "rnic/host/abi/ring.hpp"

using namespace rnic::host;

namespace {

// Both threads arrive, then both leave together. Spins, and yields now and then so the test also
// finishes where the two threads share one core.
class RoundGate {
public:
    void arrive_and_wait(uint32_t round) {
        arrived_.fetch_add(1, std::memory_order_acq_rel);
        const uint32_t all = 2 * (round + 1);
        for (uint32_t spins = 0; arrived_.load(std::memory_order_acquire) < all; ++spins)
            if ((spins & 1023) == 1023) std::this_thread::yield();
    }

private:
    std::atomic<uint32_t> arrived_{0};
};

}  // namespace

TEST_CASE("CQ arming: a client that arms and then finds the CQ empty is always woken") {
    constexpr uint32_t kPasses = 5;
    constexpr uint32_t kRounds = 200'000;
    // One header per round, so no round has to be reset while the other thread may still look.
    auto headers = std::make_unique<abi::RingHeader[]>(kRounds);
    std::vector<uint8_t> daemon_fired(kRounds), client_saw(kRounds);
    uint32_t lost = 0, fired = 0, both = 0;
    for (uint32_t pass = 0; pass < kPasses; ++pass) {
        for (uint32_t r = 0; r < kRounds; ++r) {
            headers[r].producer.store(0);
            headers[r].arm.store(abi::kArmNone);
        }
        RoundGate gate;
        std::thread daemon([&] {
            for (uint32_t r = 0; r < kRounds; ++r) {
                abi::RingHeader& h = headers[r];
                gate.arrive_and_wait(r);
                h.producer.store(1, std::memory_order_release);  // RingView::publish
                daemon_fired[r] = abi::take_arm_after_publish(h, false);
            }
        });
        std::thread client([&] {
            for (uint32_t r = 0; r < kRounds; ++r) {
                abi::RingHeader& h = headers[r];
                gate.arrive_and_wait(r);
                abi::arm_cq(h, abi::kArmNext);
                client_saw[r] = h.producer.load(std::memory_order_acquire) != 0;  // RingView::ready
            }
        });
        daemon.join();
        client.join();
        for (uint32_t r = 0; r < kRounds; ++r) {
            lost += !daemon_fired[r] && !client_saw[r];
            fired += daemon_fired[r];
            both += daemon_fired[r] && client_saw[r];
        }
    }
    INFO(fired << " of " << kPasses * kRounds << " rounds fired the event, " << both
               << " also found the entry by polling");
    CHECK(lost == 0);
}

TEST_CASE("CQ arming: a solicited-only arm fires on solicited entries and stays armed otherwise") {
    abi::RingHeader h{};
    abi::arm_cq(h, abi::kArmSolicited);
    CHECK_FALSE(abi::take_arm_after_publish(h, false));
    CHECK(h.arm.load() == abi::kArmSolicited);
    CHECK(abi::take_arm_after_publish(h, true));
    CHECK(h.arm.load() == abi::kArmNone);
    CHECK_FALSE(abi::take_arm_after_publish(h, true));  // one event per arming
    abi::arm_cq(h, abi::kArmNext);
    CHECK(abi::take_arm_after_publish(h, false));
}
