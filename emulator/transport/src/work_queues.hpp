// The engine's copies of posted work requests. Each queue's storage (WQE slots, their SGEs and
// inline bytes) is sized once from the QP's or SRQ's capabilities when it is created, the way a
// NIC's WQE buffers are, so posting, sending and completing allocate nothing. Positions are
// free-running 32-bit counters; a slot is position & mask.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rnic/common/ring_buffer.hpp"
#include "rnic/transport/work_request.hpp"
#include "wr_table.hpp"

namespace rnic::transport {

using common::RingBuffer;

// Where a send WQE is in its life. Posted: waiting for the requester. Started: PSNs assigned,
// packets going out (or some still to go). Sent: every packet left at least once. Done: the
// operation succeeded (acknowledged, data placed). Failed: it completed with `status`.
enum class WqeState : uint8_t { Posted, Started, Sent, Done, Failed };

struct SendWqe {
    uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    uint32_t send_flags = 0;
    uint32_t imm_data = 0;
    uint32_t invalidate_rkey = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t remote_qpn = 0;   // UD
    uint32_t remote_qkey = 0;  // UD
    AddressVector av;          // UD: the AH's address vector, copied at post time as providers do
    MwBindInfo bind;           // BIND_MW
    uint16_t num_sge = 0;
    uint16_t inline_length = 0;
    uint32_t length = 0;  // bytes of the message (READ: bytes to fetch)

    WqeState state = WqeState::Posted;
    WcStatus status = WcStatus::Success;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;       // PSNs the operation consumes (READ: one per response packet)
    uint32_t read_bytes = 0;  // READ data placed so far

    const WrInfo& info() const noexcept { return wr_info(opcode); }
    bool started() const noexcept { return state != WqeState::Posted; }
    bool finished() const noexcept { return state == WqeState::Done || state == WqeState::Failed; }
    uint32_t last_psn() const noexcept { return (first_psn + npkts - 1) & 0xFFFFFF; }
    void fail(WcStatus s) noexcept {
        state = WqeState::Failed;
        status = s;
    }
};

class SendQueue {
public:
    // Throws std::bad_alloc (control path).
    void init(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline);

    uint32_t head() const noexcept { return head_; }  // oldest WQE not yet retired
    uint32_t tail() const noexcept { return tail_; }  // where the next post goes
    uint32_t size() const noexcept { return tail_ - head_; }
    bool empty() const noexcept { return head_ == tail_; }
    uint32_t max_wr() const noexcept { return max_wr_; }

    SendWqe& at(uint32_t pos) noexcept { return wqes_[pos & mask_]; }
    const SendWqe& at(uint32_t pos) const noexcept { return wqes_[pos & mask_]; }
    std::span<const Sge> sges(uint32_t pos) const noexcept {
        return {sges_.data() + size_t{pos & mask_} * max_sge_, at(pos).num_sge};
    }
    std::span<const uint8_t> inline_data(uint32_t pos) const noexcept {
        return {inline_.data() + size_t{pos & mask_} * max_inline_, at(pos).inline_length};
    }

    // Copies `wr` (whose SGE count and inline length the caller checked against the caps) into
    // the next slot. The queue must not be full.
    SendWqe& push(const SendWr& wr, uint32_t length);
    void pop_front() noexcept { ++head_; }
    void clear() noexcept { head_ = tail_ = 0; }
    size_t bytes() const noexcept {
        return wqes_.capacity() * sizeof(SendWqe) + sges_.capacity() * sizeof(Sge) + inline_.capacity();
    }

private:
    uint32_t max_wr_ = 0;
    uint32_t max_sge_ = 0;
    uint32_t max_inline_ = 0;
    uint32_t mask_ = 0;
    uint32_t head_ = 0;
    uint32_t tail_ = 0;
    std::vector<SendWqe> wqes_;
    std::vector<Sge> sges_;
    std::vector<uint8_t> inline_;
};

struct RecvWqe {
    uint64_t wr_id = 0;
    uint32_t num_sge = 0;
};

// A receive WQE as the responder uses it: its wr_id and scatter list.
struct RecvView {
    uint64_t wr_id = 0;
    std::span<const Sge> sges;
    uint64_t capacity() const noexcept {
        uint64_t n = 0;
        for (const Sge& s : sges) n += s.length;
        return n;
    }
};

// Receive WQEs in slots, with the positions in use kept in a FIFO: a QP's RQ consumes them in
// order, an SRQ's are taken by many QPs and released in whatever order their messages end, and a
// WQE a UC QP gave back goes to the front again.
class RecvQueue {
public:
    // Throws std::bad_alloc (control path).
    void init(uint32_t max_wr, uint32_t max_sge);

    uint32_t size() const noexcept { return static_cast<uint32_t>(posted_.size()); }
    bool empty() const noexcept { return posted_.empty(); }
    bool full() const noexcept { return posted_.size() >= max_wr_; }
    uint32_t max_wr() const noexcept { return max_wr_; }
    uint32_t max_sge() const noexcept { return max_sge_; }

    // The queue must not be full; the caller checked the SGE count. Throws std::bad_alloc only
    // when an SRQ needs more slots than max_wr (see grow()).
    void push(const RecvWr& wr);
    // The oldest posted WQE's slot (the queue must not be empty), without taking it.
    uint32_t front_slot() const noexcept { return posted_.front(); }
    // Takes the oldest WQE out of the FIFO; its slot stays valid until release().
    uint32_t take() noexcept;
    void give_back(uint32_t slot) { posted_.push_front(slot); }
    void release(uint32_t slot) { free_.push_back(slot); }
    void clear();

    size_t bytes() const noexcept {
        return wqes_.capacity() * sizeof(RecvWqe) + sges_.capacity() * sizeof(Sge) +
               (posted_.capacity() + free_.capacity()) * sizeof(uint32_t);
    }

    RecvView view(uint32_t slot) const noexcept {
        return {wqes_[slot].wr_id, {sges_.data() + size_t{slot} * max_sge_, wqes_[slot].num_sge}};
    }

private:
    void grow();

    uint32_t max_wr_ = 0;
    uint32_t max_sge_ = 0;
    std::vector<RecvWqe> wqes_;
    std::vector<Sge> sges_;
    RingBuffer<uint32_t> posted_;  // slots, oldest first
    RingBuffer<uint32_t> free_;
};

}  // namespace rnic::transport
