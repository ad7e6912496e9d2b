// A completion queue: a bounded FIFO of completions. Overflow is never silent: the CQ enters
// an error state, the completion is counted as lost, and the engine raises IBV_EVENT_CQ_ERR.
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "rnic/transport/work_request.hpp"

namespace rnic::transport {

class CompletionQueue {
public:
    explicit CompletionQueue(uint32_t capacity) : capacity_(capacity) {}

    // False when the CQ was full (or already overflowed): the caller raises the async event.
    bool push(const WorkCompletion& wc);
    size_t poll(std::span<WorkCompletion> out);

    uint32_t capacity() const noexcept { return capacity_; }
    size_t size() const noexcept { return entries_.size(); }
    bool overflowed() const noexcept { return overflowed_; }
    uint64_t lost() const noexcept { return lost_; }
    void resize(uint32_t capacity) noexcept { capacity_ = capacity; }

private:
    uint32_t capacity_;
    std::deque<WorkCompletion> entries_;
    bool overflowed_ = false;
    uint64_t lost_ = 0;
};

}  // namespace rnic::transport
