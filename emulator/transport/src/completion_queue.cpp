#include "completion_queue.hpp"

namespace rnic::transport {

bool CompletionQueue::push(const WorkCompletion& wc) {
    // IBA 11.4.2.1: a CQ overrun is an error of the CQ itself; later completions are lost too.
    if (overflowed_ || entries_.size() >= capacity_) {
        overflowed_ = true;
        ++lost_;
        return false;
    }
    entries_.push_back(wc);
    return true;
}

size_t CompletionQueue::poll(std::span<WorkCompletion> out) noexcept {
    size_t n = 0;
    while (n < out.size() && !entries_.empty()) {
        out[n++] = entries_.front();
        entries_.pop_front();
    }
    return n;
}

}  // namespace rnic::transport
