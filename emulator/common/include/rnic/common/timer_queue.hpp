// Timers in one indexed binary min-heap: arming, moving and cancelling a timer cost O(log n) in
// the timers armed, finding the next deadline O(1), and a turn with nothing due costs one
// comparison, however many objects exist. Each Timer lives in the object it belongs to and knows
// its place in the heap, so nothing is searched and nothing stale is left behind. Ties fire in
// (owner, kind) order, which keeps simulated-time runs reproducible. The transport engine (ACK
// timeouts, RNR waits) and the CM (MAD retransmissions, timewait) each keep one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace rnic::common {

struct Timer {
    static constexpr uint32_t kIdle = UINT32_MAX;
    uint64_t deadline = 0;
    uint32_t heap_index = kIdle;
    uint32_t owner = 0;  // the object's number: a QPN, a CM id
    uint8_t kind = 0;

    bool armed() const noexcept { return heap_index != kIdle; }
};

class TimerQueue {
public:
    // Reserves room for `timers` armed at once, so arming never allocates below that.
    explicit TimerQueue(size_t timers = 0) { heap_.reserve(timers); }

    // Arms `t` (or moves it) to `deadline`. Throws std::bad_alloc only past the reservation.
    void arm(Timer& t, uint64_t deadline) {
        if (t.armed()) {
            const uint64_t old = t.deadline;
            t.deadline = deadline;
            if (deadline < old)
                sift_up(t.heap_index);
            else
                sift_down(t.heap_index);
            return;
        }
        t.deadline = deadline;
        heap_.push_back(&t);
        t.heap_index = static_cast<uint32_t>(heap_.size() - 1);
        sift_up(heap_.size() - 1);
    }
    void cancel(Timer& t) noexcept {
        if (t.armed()) remove_at(t.heap_index);
    }
    std::optional<uint64_t> earliest() const noexcept {
        if (heap_.empty()) return std::nullopt;
        return heap_.front()->deadline;
    }
    // The earliest timer due at `now`, disarmed; null when none is.
    Timer* pop_due(uint64_t now) noexcept {
        if (heap_.empty() || heap_.front()->deadline > now) return nullptr;
        Timer* t = heap_.front();
        remove_at(0);
        return t;
    }
    size_t size() const noexcept { return heap_.size(); }

private:
    static bool before(const Timer* a, const Timer* b) noexcept {
        if (a->deadline != b->deadline) return a->deadline < b->deadline;
        if (a->owner != b->owner) return a->owner < b->owner;
        return a->kind < b->kind;
    }
    void place(size_t i, Timer* t) noexcept {
        heap_[i] = t;
        t->heap_index = static_cast<uint32_t>(i);
    }
    void sift_up(size_t i) noexcept {
        Timer* t = heap_[i];
        while (i > 0) {
            const size_t parent = (i - 1) / 2;
            if (!before(t, heap_[parent])) break;
            place(i, heap_[parent]);
            i = parent;
        }
        place(i, t);
    }
    void sift_down(size_t i) noexcept {
        Timer* t = heap_[i];
        const size_t n = heap_.size();
        for (;;) {
            size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
            if (!before(heap_[child], t)) break;
            place(i, heap_[child]);
            i = child;
        }
        place(i, t);
    }
    void remove_at(size_t i) noexcept {
        Timer* gone = heap_[i];
        Timer* last = heap_.back();
        heap_.pop_back();
        gone->heap_index = Timer::kIdle;
        if (i == heap_.size()) return;
        place(i, last);
        sift_down(i);
        sift_up(last->heap_index);
    }

    std::vector<Timer*> heap_;
};

}  // namespace rnic::common
