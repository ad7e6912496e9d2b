// The extended post-send API (ibv_wr_start ... ibv_wr_complete), what perftest uses by default.
// Work requests are collected between start and complete and posted as one batch, whole or not
// at all: an error in any request (an opcode the QP was not created for, a full queue, a bad SGE
// count) is returned by ibv_wr_complete and nothing of the batch reaches the queue.
#include <cstring>

#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

void begin(ibv_qp_ex* qpx, uint8_t opcode, uint64_t needed_op) {
    Qp* q = qp_of(qpx);
    WrBatch& b = q->batch;
    if ((q->send_ops & needed_op) == 0) {
        if (b.error == 0) b.error = EINVAL;  // not among the QP's send_ops_flags
        return;
    }
    client::SendWr& w = b.wrs.emplace_back();
    w = {};
    w.wr_id = qpx->wr_id;
    w.send_flags = qpx->wr_flags;
    w.opcode = opcode;
    b.sge_start.push_back(static_cast<uint32_t>(b.sges.size()));
    b.inline_start.push_back(WrBatch::kNoInline);
}

client::SendWr* last(ibv_qp_ex* qpx) {
    WrBatch& b = qp_of(qpx)->batch;
    if (b.wrs.empty()) {
        if (b.error == 0) b.error = EINVAL;  // a setter before any opcode
        return nullptr;
    }
    return &b.wrs.back();
}

void unsupported(ibv_qp_ex* qpx) {
    WrBatch& b = qp_of(qpx)->batch;
    if (b.error == 0) b.error = EOPNOTSUPP;
}

void wr_send(ibv_qp_ex* q) {
    begin(q, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
    begin(q, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
    if (auto* w = last(q)) w->imm_data = imm;
}

void wr_send_inv(ibv_qp_ex* q, uint32_t rkey) {
    begin(q, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV);
    if (auto* w = last(q)) w->imm_data = rkey;
}

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
    begin(q, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE);
    if (auto* w = last(q)) w->rkey = rkey, w->remote_addr = addr;
}

void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
    begin(q, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    if (auto* w = last(q)) w->rkey = rkey, w->remote_addr = addr, w->imm_data = imm;
}

void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
    begin(q, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ);
    if (auto* w = last(q)) w->rkey = rkey, w->remote_addr = addr;
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
    begin(q, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
    if (auto* w = last(q)) w->rkey = rkey, w->remote_addr = addr, w->compare_add = compare, w->swap = swap;
}

void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
    begin(q, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
    if (auto* w = last(q)) w->rkey = rkey, w->remote_addr = addr, w->compare_add = add;
}

void wr_local_inv(ibv_qp_ex* q, uint32_t rkey) {
    begin(q, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV);
    if (auto* w = last(q)) w->imm_data = rkey;
}

// Type 2 windows: `rkey` is the new key (ibv_inc_rkey of the window's); the application keeps
// ibv_mw.rkey itself, as with rdma-core's rxe. A NULL window or region fails in the daemon.
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
    begin(q, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);
    client::SendWr* w = last(q);
    if (w == nullptr) return;
    w->rkey = rkey;
    w->bind_mw_rkey = mw != nullptr ? mw->rkey : 0;
    if (info != nullptr) {
        w->bind_mr_lkey = info->mr != nullptr ? info->mr->lkey : 0;
        w->remote_addr = info->addr;
        w->bind_length = info->length;
        w->bind_access = info->mw_access_flags;
    }
}

// TSO, XRC and 8-byte atomic writes are not offered (create_qp_ex refuses their send_ops_flags);
// reaching them anyway fails the batch.
void wr_send_tso(ibv_qp_ex* q, void*, uint16_t, uint16_t) {
    unsupported(q);
}
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t) {
    unsupported(q);
}
void wr_atomic_write(ibv_qp_ex* q, uint32_t, uint64_t, const void*) {
    unsupported(q);
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
    if (auto* w = last(q)) {
        w->ah = ah != nullptr ? ah_of(ah)->impl : nullptr;
        w->remote_qpn = remote_qpn;
        w->remote_qkey = remote_qkey;
    }
}

// The last request's gather list starts over: a setter called twice replaces, as in rdma-core.
void restart_gather(WrBatch& b) {
    b.sges.resize(b.sge_start.back());
    b.inline_start.back() = WrBatch::kNoInline;
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
    if (last(q) == nullptr) return;
    WrBatch& b = qp_of(q)->batch;
    restart_gather(b);
    b.sges.push_back({addr, length, lkey});
}

void wr_set_sge_list(ibv_qp_ex* q, size_t num_sge, const ibv_sge* sg_list) {
    if (last(q) == nullptr) return;
    WrBatch& b = qp_of(q)->batch;
    restart_gather(b);
    for (size_t i = 0; i < num_sge; ++i) b.sges.push_back({sg_list[i].addr, sg_list[i].length, sg_list[i].lkey});
}

// Inline data is copied now: the application may reuse its buffer as soon as the setter returns.
void wr_set_inline_data_list(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* buf_list) {
    client::SendWr* w = last(q);
    if (w == nullptr) return;
    WrBatch& b = qp_of(q)->batch;
    restart_gather(b);
    size_t total = 0;
    for (size_t i = 0; i < num_buf; ++i) total += buf_list[i].length;
    if (total > qp_of(q)->impl->cap.max_inline_data) {
        if (b.error == 0) b.error = EINVAL;  // rdma-core providers: inline over the QP's cap
        return;
    }
    const size_t offset = b.inline_bytes.size();
    b.inline_bytes.resize(offset + total);
    size_t at = offset;
    for (size_t i = 0; i < num_buf; ++i) {
        if (buf_list[i].length != 0) std::memcpy(b.inline_bytes.data() + at, buf_list[i].addr, buf_list[i].length);
        at += buf_list[i].length;
    }
    b.inline_start.back() = static_cast<uint32_t>(offset);
    b.sges.push_back({0, static_cast<uint32_t>(total), 0});  // addr fixed up at complete
    w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
    const ibv_data_buf buf{addr, length};
    wr_set_inline_data_list(q, 1, &buf);
}

void clear(WrBatch& b) {
    b.wrs.clear();
    b.sge_start.clear();
    b.sges.clear();
    b.inline_bytes.clear();
    b.inline_start.clear();
    b.error = 0;
}

void wr_start(ibv_qp_ex* q) {
    Qp* qp = qp_of(q);
    qp->batch_lock.lock();
    clear(qp->batch);
}

int wr_complete(ibv_qp_ex* q) {
    Qp* qp = qp_of(q);
    WrBatch& b = qp->batch;
    int rc = b.error;
    if (rc == 0 && !b.wrs.empty()) {
        const size_t n = b.wrs.size();
        for (size_t i = 0; i < n; ++i) {
            client::SendWr& w = b.wrs[i];
            const uint32_t first = b.sge_start[i];
            const uint32_t end = i + 1 < n ? b.sge_start[i + 1] : static_cast<uint32_t>(b.sges.size());
            w.num_sge = end - first;
            w.sg_list = w.num_sge != 0 ? &b.sges[first] : nullptr;
            if (b.inline_start[i] != WrBatch::kNoInline)
                b.sges[first].addr = reinterpret_cast<uintptr_t>(b.inline_bytes.data() + b.inline_start[i]);
            w.next = i + 1 < n ? &b.wrs[i + 1] : nullptr;
        }
        const client::SendWr* bad = nullptr;
        rc = conn_of(qp->qpx.qp_base.context).post_send_all_or_nothing(qp->impl, b.wrs.data(), &bad);
    }
    clear(b);
    qp->batch_lock.unlock();
    return rc;
}

void wr_abort(ibv_qp_ex* q) {
    Qp* qp = qp_of(q);
    clear(qp->batch);
    qp->batch_lock.unlock();
}

}  // namespace

void install_wr_ops(ibv_qp_ex& x) {
    x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    x.wr_bind_mw = wr_bind_mw;
    x.wr_local_inv = wr_local_inv;
    x.wr_rdma_read = wr_rdma_read;
    x.wr_rdma_write = wr_rdma_write;
    x.wr_rdma_write_imm = wr_rdma_write_imm;
    x.wr_send = wr_send;
    x.wr_send_imm = wr_send_imm;
    x.wr_send_inv = wr_send_inv;
    x.wr_send_tso = wr_send_tso;
    x.wr_set_ud_addr = wr_set_ud_addr;
    x.wr_set_xrc_srqn = wr_set_xrc_srqn;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
    x.wr_atomic_write = wr_atomic_write;
}

}  // namespace rnic::shim
