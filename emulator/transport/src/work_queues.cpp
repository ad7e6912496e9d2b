#include "work_queues.hpp"

#include <algorithm>
#include <cstring>

namespace rnic::transport {
namespace {

uint32_t power_of_two_at_least(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

}  // namespace

void SendQueue::init(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline) {
    max_wr_ = max_wr;
    max_sge_ = max_sge;
    max_inline_ = max_inline;
    const uint32_t slots = power_of_two_at_least(std::max<uint32_t>(max_wr, 1));
    mask_ = slots - 1;
    wqes_.assign(slots, SendWqe{});
    sges_.assign(size_t{slots} * max_sge, Sge{});
    inline_.assign(size_t{slots} * max_inline, 0);
    head_ = tail_ = 0;
}

SendWqe& SendQueue::push(const SendWr& wr, uint32_t length) {
    const uint32_t pos = tail_++;
    SendWqe& w = at(pos);
    w = SendWqe{};
    w.wr_id = wr.wr_id;
    w.opcode = wr.opcode;
    w.send_flags = wr.send_flags;
    w.imm_data = wr.imm_data;
    w.invalidate_rkey = wr.invalidate_rkey;
    w.remote_addr = wr.remote_addr;
    w.rkey = wr.rkey;
    w.compare_add = wr.compare_add;
    w.swap = wr.swap;
    w.remote_qpn = wr.remote_qpn;
    w.remote_qkey = wr.remote_qkey;
    w.bind = wr.bind;
    w.length = length;
    if (wr.send_flags & SendFlag::Inline) {
        w.inline_length = static_cast<uint16_t>(wr.inline_data.size());
        if (!wr.inline_data.empty())
            std::memcpy(inline_.data() + size_t{pos & mask_} * max_inline_, wr.inline_data.data(),
                        wr.inline_data.size());
    } else {
        w.num_sge = static_cast<uint16_t>(wr.sg_list.size());
        std::copy(wr.sg_list.begin(), wr.sg_list.end(),
                  sges_.begin() + static_cast<std::ptrdiff_t>(size_t{pos & mask_} * max_sge_));
    }
    return w;
}

void RecvQueue::init(uint32_t max_wr, uint32_t max_sge) {
    max_wr_ = max_wr;
    max_sge_ = max_sge;
    wqes_.assign(max_wr, RecvWqe{});
    sges_.assign(size_t{max_wr} * max_sge, Sge{});
    posted_.clear();
    free_.clear();
    posted_.reserve(max_wr);
    free_.reserve(max_wr);
    for (uint32_t i = 0; i < max_wr; ++i) free_.push_back(i);
}

void RecvQueue::push(const RecvWr& wr) {
    if (free_.empty()) grow();
    const uint32_t slot = free_.front();
    free_.pop_front();
    wqes_[slot] = {wr.wr_id, static_cast<uint32_t>(wr.sg_list.size())};
    std::copy(wr.sg_list.begin(), wr.sg_list.end(),
              sges_.begin() + static_cast<std::ptrdiff_t>(size_t{slot} * max_sge_));
    posted_.push_back(slot);
}

void RecvQueue::grow() {
    // Only an SRQ gets here: QPs hold the WQEs of their messages in progress outside the FIFO,
    // and max_wr counts only the posted ones, so a few slots more are needed now and then.
    const auto old = static_cast<uint32_t>(wqes_.size());
    const uint32_t more = std::max<uint32_t>(old / 2, 1);
    wqes_.resize(size_t{old} + more);
    sges_.resize(wqes_.size() * max_sge_);
    for (uint32_t i = 0; i < more; ++i) free_.push_back(old + i);
}

uint32_t RecvQueue::take() noexcept {
    const uint32_t slot = posted_.front();
    posted_.pop_front();
    return slot;
}

void RecvQueue::clear() {
    posted_.clear();
    free_.clear();
    for (uint32_t i = 0; i < wqes_.size(); ++i) free_.push_back(i);  // within the capacity it had
}

}  // namespace rnic::transport
