#include "timer_queue.hpp"

namespace rnic::transport {

bool TimerQueue::before(const Timer* a, const Timer* b) noexcept {
    if (a->deadline != b->deadline) return a->deadline < b->deadline;
    if (a->owner != b->owner) return a->owner < b->owner;
    return a->kind < b->kind;
}

void TimerQueue::place(size_t i, Timer* t) noexcept {
    heap_[i] = t;
    t->heap_index = static_cast<uint32_t>(i);
}

void TimerQueue::sift_up(size_t i) noexcept {
    Timer* t = heap_[i];
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!before(t, heap_[parent])) break;
        place(i, heap_[parent]);
        i = parent;
    }
    place(i, t);
}

void TimerQueue::sift_down(size_t i) noexcept {
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

void TimerQueue::arm(Timer& t, uint64_t deadline) {
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

void TimerQueue::remove_at(size_t i) noexcept {
    Timer* gone = heap_[i];
    Timer* last = heap_.back();
    heap_.pop_back();
    gone->heap_index = Timer::kIdle;
    if (i == heap_.size()) return;
    place(i, last);
    sift_down(i);
    sift_up(last->heap_index);
}

void TimerQueue::cancel(Timer& t) noexcept {
    if (t.armed()) remove_at(t.heap_index);
}

std::optional<uint64_t> TimerQueue::earliest() const noexcept {
    if (heap_.empty()) return std::nullopt;
    return heap_.front()->deadline;
}

Timer* TimerQueue::pop_due(uint64_t now) noexcept {
    if (heap_.empty() || heap_.front()->deadline > now) return nullptr;
    Timer* t = heap_.front();
    remove_at(0);
    return t;
}

}  // namespace rnic::transport
