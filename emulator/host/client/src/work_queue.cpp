#include "rnic/host/client/work_queue.hpp"

#include <cerrno>
#include <cstring>

#include "rnic/host/client/verbs_values.hpp"

namespace rnic::host::client {

namespace {

using namespace verbs;

// Which opcodes each transport carries (IBA 11.4.1.1, the table rdma-core providers check).
bool opcode_allowed(uint32_t qp_type, uint8_t op) {
    switch (qp_type) {
        case kQptRc:
            return op <= kWrBindMw || op == kWrSendWithInv;
        case kQptUc:
            return op == kWrRdmaWrite || op == kWrRdmaWriteWithImm || op == kWrSend || op == kWrSendWithImm ||
                   op == kWrLocalInv || op == kWrBindMw || op == kWrSendWithInv;
        case kQptUd:
            return op == kWrSend || op == kWrSendWithImm;
        default:
            return false;
    }
}

bool is_atomic(uint8_t op) {
    return op == kWrAtomicCmpAndSwp || op == kWrAtomicFetchAndAdd;
}

uint32_t outstanding(const WorkQueue& q) {
    return q.produced.load(std::memory_order_relaxed) - q.retired.load(std::memory_order_acquire);
}

}  // namespace

uint32_t wc_opcode_for(uint8_t op) noexcept {
    switch (op) {
        case kWrRdmaWrite:
        case kWrRdmaWriteWithImm:
            return kWcRdmaWrite;
        case kWrRdmaRead:
            return kWcRdmaRead;
        case kWrAtomicCmpAndSwp:
            return kWcCompSwap;
        case kWrAtomicFetchAndAdd:
            return kWcFetchAdd;
        case kWrLocalInv:
            return kWcLocalInv;
        case kWrBindMw:
            return kWcBindMw;
        default:
            return kWcSend;
    }
}

int encode_send(WorkQueue& sq, uint32_t qp_type, const SendWr& wr, uint32_t ah_handle) noexcept {
    if (!opcode_allowed(qp_type, wr.opcode)) return EINVAL;
    if (wr.num_sge > sq.max_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) return EINVAL;
    const bool inl = (wr.send_flags & kSendInline) != 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (inl) {
        // Inline data is only a payload the HCA sends: not for READ or atomics (rxe, mlx5).
        if (wr.opcode == kWrRdmaRead || is_atomic(wr.opcode) || wr.opcode == kWrLocalInv || wr.opcode == kWrBindMw)
            return EINVAL;
        if (total > sq.max_inline || abi::kSendWqeHeader + total > sq.ring.entry_size()) return EINVAL;
    }
    if (is_atomic(wr.opcode) && (wr.num_sge != 1 || wr.sg_list[0].length < 8 || (wr.remote_addr & 7) != 0))
        return EINVAL;
    if (qp_type == kQptUd && ah_handle == 0) return EINVAL;
    if (outstanding(sq) >= sq.max_wr) return ENOMEM;

    const uint32_t index = sq.produced.load(std::memory_order_relaxed);
    auto* slot = static_cast<uint8_t*>(sq.ring.entry(index));
    abi::SendWqe w{};
    w.wr_id = wr.wr_id;
    w.opcode = wr.opcode;
    w.send_flags = wr.send_flags;
    w.imm_data = wr.imm_data;
    w.rkey = wr.rkey;
    w.remote_addr = wr.remote_addr;
    w.compare_add = wr.compare_add;
    w.swap = wr.swap;
    if (wr.opcode == kWrBindMw) {  // the bind's fields in the WQE (abi/queue_entries.hpp)
        w.imm_data = wr.bind_mw_rkey;
        w.compare_add = wr.bind_length;
        w.swap = uint64_t{wr.bind_mr_lkey} | uint64_t{wr.bind_access} << 32;
    }
    if (qp_type == kQptUd) {
        w.ah = ah_handle;
        w.remote_qpn = wr.remote_qpn;
        w.remote_qkey = wr.remote_qkey;
    }
    uint8_t* payload = slot + abi::kSendWqeHeader;
    if (inl) {
        w.num_sge = 0;
        w.inline_length = static_cast<uint32_t>(total);
        for (uint32_t i = 0; i < wr.num_sge; ++i) {
            const abi::Sge& g = wr.sg_list[i];
            if (g.length != 0) std::memcpy(payload, reinterpret_cast<const void*>(g.addr), g.length);
            payload += g.length;
        }
    } else {
        w.num_sge = wr.num_sge;
        if (wr.num_sge != 0) std::memcpy(payload, wr.sg_list, size_t{wr.num_sge} * sizeof(abi::Sge));
    }
    std::memcpy(slot, &w, sizeof w);
    sq.produced.store(index + 1, std::memory_order_relaxed);
    return 0;
}

int encode_recv(WorkQueue& rq, const RecvWr& wr, bool srq) noexcept {
    if (wr.num_sge > rq.max_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) return EINVAL;
    const uint32_t index = rq.produced.load(std::memory_order_relaxed);
    if (srq) {
        const uint32_t used = index - rq.ring.header().consumer.load(std::memory_order_acquire);
        if (used >= rq.max_wr || used > rq.ring.size()) return ENOMEM;  // a lying consumer: full
    } else if (outstanding(rq) >= rq.max_wr) {
        return ENOMEM;
    }
    auto* slot = static_cast<uint8_t*>(rq.ring.entry(index));
    abi::RecvWqe w{};
    w.wr_id = wr.wr_id;
    w.num_sge = wr.num_sge;
    std::memcpy(slot, &w, sizeof w);
    if (wr.num_sge != 0) std::memcpy(slot + sizeof w, wr.sg_list, size_t{wr.num_sge} * sizeof(abi::Sge));
    rq.produced.store(index + 1, std::memory_order_relaxed);
    return 0;
}

void retire(WorkQueue& q, uint32_t wqe_index) noexcept {
    const uint32_t retired = q.retired.load(std::memory_order_relaxed);
    if (wqe_index - retired >= q.produced.load(std::memory_order_relaxed) - retired) return;
    q.retired.store(wqe_index + 1, std::memory_order_release);
}

uint32_t flush(WorkQueue& q, bool send, uint32_t qpn, abi::Cqe* out, uint32_t max) noexcept {
    uint32_t from = q.retired.load(std::memory_order_relaxed);
    const uint32_t produced = q.produced.load(std::memory_order_relaxed);
    uint32_t n = 0;
    for (; from != produced && n < max; ++from, ++n) {
        const auto* slot = static_cast<const uint8_t*>(q.ring.entry(from));
        abi::Cqe& c = out[n];
        c = abi::Cqe{};
        c.status = kWcWrFlushErr;
        c.qp_num = qpn;
        c.wqe_index = from;
        if (send) {
            abi::SendWqe w;
            std::memcpy(&w, slot, sizeof w);
            c.wr_id = w.wr_id;
            c.opcode = wc_opcode_for(w.opcode);
        } else {
            abi::RecvWqe w;
            std::memcpy(&w, slot, sizeof w);
            c.wr_id = w.wr_id;
            c.opcode = kWcRecv;
        }
    }
    q.retired.store(from, std::memory_order_release);
    return n;
}

}  // namespace rnic::host::client
