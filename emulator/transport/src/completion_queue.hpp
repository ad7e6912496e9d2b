// A completion queue: a bounded FIFO of completions. Overflow is never silent: the CQ enters
// an error state, the completion is counted as lost, and the engine raises IBV_EVENT_CQ_ERR.
#pragma once

#include <cstdint>
#include <span>

#include "rnic/common/ring_buffer.hpp"
#include "rnic/transport/work_request.hpp"

namespace rnic::transport {

using common::RingBuffer;

class CompletionQueue {
public:
    explicit CompletionQueue(uint32_t capacity) : capacity_(capacity) {}

    // False when the CQ was full (or already overflowed): the caller raises the async event.
    // Grows its storage (std::bad_alloc) only up to the capacity, and only the first time the
    // CQ holds that many: a CQ that is polled reuses its entries.
    bool push(const WorkCompletion& wc);
    size_t poll(std::span<WorkCompletion> out) noexcept;

    uint32_t capacity() const noexcept { return capacity_; }
    // ibv_resize_cq: the caller checked that the entries held fit.
    void set_capacity(uint32_t capacity) noexcept { capacity_ = capacity; }
    size_t size() const noexcept { return entries_.size(); }
    bool overflowed() const noexcept { return overflowed_; }
    uint64_t lost() const noexcept { return lost_; }

    // QPs that complete on this CQ (send or receive side): a CQ in use cannot be destroyed.
    uint32_t users = 0;
    // On the engine's list of CQs with new completions (Engine::take_updated_cqs).
    bool updated = false;

private:
    uint32_t capacity_;
    RingBuffer<WorkCompletion> entries_;
    bool overflowed_ = false;
    uint64_t lost_ = 0;
};

}  // namespace rnic::transport
