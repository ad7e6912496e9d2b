// The engine's timers (ACK timeouts, RNR waits) in one indexed binary min-heap: arming, moving
// and cancelling a timer cost O(log n) in the timers armed, finding the next deadline O(1), and a
// turn with nothing due costs one comparison, however many QPs exist. Each Timer lives in the
// object it belongs to and knows its place in the heap, so nothing is searched and nothing stale
// is left behind. Ties fire in (owner, kind) order, which keeps simulated-time runs reproducible.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace rnic::transport {

struct Timer {
    static constexpr uint32_t kIdle = UINT32_MAX;
    uint64_t deadline = 0;
    uint32_t heap_index = kIdle;
    uint32_t owner = 0;  // QPN
    uint8_t kind = 0;

    bool armed() const noexcept { return heap_index != kIdle; }
};

class TimerQueue {
public:
    // Reserves room for `timers` armed at once, so arming never allocates below that.
    explicit TimerQueue(size_t timers = 0) { heap_.reserve(timers); }

    // Arms `t` (or moves it) to `deadline`. Throws std::bad_alloc only past the reservation.
    void arm(Timer& t, uint64_t deadline);
    void cancel(Timer& t) noexcept;
    std::optional<uint64_t> earliest() const noexcept;
    // The earliest timer due at `now`, disarmed; null when none is.
    Timer* pop_due(uint64_t now) noexcept;
    size_t size() const noexcept { return heap_.size(); }

private:
    static bool before(const Timer* a, const Timer* b) noexcept;
    void place(size_t i, Timer* t) noexcept;
    void sift_up(size_t i) noexcept;
    void sift_down(size_t i) noexcept;
    void remove_at(size_t i) noexcept;

    std::vector<Timer*> heap_;
};

}  // namespace rnic::transport
