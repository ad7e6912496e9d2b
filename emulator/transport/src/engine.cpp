// The engine's control path: objects and their validation (errno as rdma-core providers and
// uverbs return it), reference counts that decide EBUSY, and the QP state machine's side effects.
// Every entry point catches what it cannot handle: std::bad_alloc becomes ENOMEM.
#include "rnic/transport/engine.hpp"

#include <algorithm>
#include <cerrno>
#include <new>

#include "engine_core.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/qp_state_machine.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {
namespace {

constexpr uint32_t kMaxRnrTimer = 31;
constexpr uint32_t kMaxTimeout = 31;
constexpr uint32_t kMaxRetry = 7;

// The source GID decides the IP version of every frame (as rxe's network type follows the
// sgid): a destination of the other version could never be put on the wire.
bool valid_av(const EngineConfig& config, const AddressVector& av) noexcept {
    return av.sgid_index < config.gids.size() &&
           config.gids[av.sgid_index].is_ipv4_mapped() == av.dgid.is_ipv4_mapped();
}

}  // namespace

void QpCounters::add(const QpCounters& o) {
#define RNIC_ADD_COUNTER(name) name += o.name;
    RNIC_QP_COUNTERS(RNIC_ADD_COUNTER)
#undef RNIC_ADD_COUNTER
}

Engine::Engine(EngineConfig config) : core_(std::make_unique<EngineCore>(std::move(config))) {}

Engine::~Engine() = default;

DeviceAttributes Engine::query_device() const noexcept {
    DeviceAttributes d;
    d.limits = core_->config.limits;
    return d;
}

PortAttributes Engine::query_port() const noexcept {
    const EngineConfig& c = core_->config;
    PortAttributes p;
    p.max_mtu = c.limits.max_mtu;
    p.active_mtu = c.limits.active_mtu;
    p.gid_tbl_len = static_cast<uint32_t>(c.gids.size());
    p.max_msg_sz = c.limits.max_msg_size;
    return p;
}

const std::vector<wire::Gid>& Engine::gids() const noexcept {
    return core_->config.gids;
}
const EngineConfig& Engine::config() const noexcept {
    return core_->config;
}

// ---------------------------------------------------------------------------------------------
// Protection domains, memory regions, CQs, SRQs, AHs

Result<uint32_t> Engine::alloc_pd() noexcept try {
    const uint32_t h = core_->pds.insert(std::make_unique<ProtectionDomain>());
    if (h == 0) return wire::Unexpected{ENOMEM};
    return h;
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::dealloc_pd(uint32_t pd) noexcept {
    const ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return EINVAL;
    if (p->users != 0) return EBUSY;
    core_->pds.remove(pd);
    return 0;
}

Result<MrInfo> Engine::reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access) noexcept try {
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return wire::Unexpected{EINVAL};
    const mem::RegResult r = core_->memory->register_mr(pd, addr, length, iova, access);
    if (!r.ok()) return wire::Unexpected{r.error};
    ++p->users;
    return MrInfo{r.keys.lkey, r.keys.rkey};
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

Result<MrInfo> Engine::reg_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                    uint64_t length, uint64_t iova, uint32_t access) noexcept try {
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return wire::Unexpected{EINVAL};
    const mem::RegResult r = core_->memory->register_mr_pages(pd, pages, first_page_offset, length, iova, access);
    if (!r.ok()) return wire::Unexpected{r.error};
    ++p->users;
    return MrInfo{r.keys.lkey, r.keys.rkey};
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

Result<MrInfo> Engine::reg_mr_odp(uint32_t pd, uint64_t address, uint64_t length, uint64_t iova, uint32_t access,
                                  mem::OdpBackend* backend, bool implicit) noexcept try {
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return wire::Unexpected{EINVAL};
    const mem::RegResult r = core_->memory->register_odp(pd, address, length, iova, access, backend, implicit);
    if (!r.ok()) return wire::Unexpected{r.error};
    ++p->users;
    return MrInfo{r.keys.lkey, r.keys.rkey};
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::dereg_mr(uint32_t lkey) noexcept try {
    const auto entry = core_->memory->query(lkey);
    if (!entry) return EINVAL;
    const int rc = core_->memory->deregister_mr(lkey);
    if (rc == 0)
        if (ProtectionDomain* p = core_->pds.find(entry->pd)) --p->users;
    return rc;
} catch (const std::bad_alloc&) {
    return ENOMEM;
}

int Engine::rereg_mr(uint32_t lkey, const mem::MrRereg& change) noexcept try {
    const auto entry = core_->memory->query(lkey);
    if (!entry) return EINVAL;
    ProtectionDomain* to = change.change_pd ? core_->pds.find(change.pd) : nullptr;
    if (change.change_pd && to == nullptr) return EINVAL;
    const int rc = core_->memory->reregister_mr(lkey, change);
    if (rc == 0 && to != nullptr && change.pd != entry->pd) {
        if (ProtectionDomain* from = core_->pds.find(entry->pd)) --from->users;
        ++to->users;
    }
    return rc;
} catch (const std::bad_alloc&) {
    return ENOMEM;
}

Result<MwInfo> Engine::alloc_mw(uint32_t pd, uint32_t mw_type) noexcept try {
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return wire::Unexpected{EINVAL};
    const mem::MwAllocResult r = core_->memory->alloc_mw(pd, mw_type);
    if (!r.ok()) return wire::Unexpected{r.error};
    ++p->users;
    return MwInfo{r.index, r.rkey};
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::dealloc_mw(uint32_t handle) noexcept {
    const mem::MptEntry* w = core_->memory->window(handle);
    if (!w) return EINVAL;
    const uint32_t pd = w->pd;
    const int rc = core_->memory->dealloc_mw(handle);
    if (rc == 0)
        if (ProtectionDomain* p = core_->pds.find(pd)) --p->users;
    return rc;
}

Result<uint32_t> Engine::create_cq(uint32_t cqe) noexcept try {
    if (cqe == 0 || cqe > core_->config.limits.max_cqe) return wire::Unexpected{EINVAL};
    const uint32_t h = core_->cqs.insert(std::make_unique<CompletionQueue>(cqe));
    if (h == 0) return wire::Unexpected{ENOMEM};
    return h;
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::destroy_cq(uint32_t cq) noexcept {
    const CompletionQueue* c = core_->cqs.find(cq);
    if (!c) return EINVAL;
    if (c->users != 0) return EBUSY;
    if (c->updated) std::erase(core_->updated_cqs, cq);
    core_->cqs.remove(cq);
    return 0;
}

int Engine::resize_cq(uint32_t cq, uint32_t cqe, uint64_t held_elsewhere) noexcept {
    CompletionQueue* c = core_->cqs.find(cq);
    if (!c) return EINVAL;
    if (cqe == 0 || cqe > core_->config.limits.max_cqe) return EINVAL;
    if (cqe < c->size() + held_elsewhere) return EINVAL;
    c->set_capacity(cqe);
    return 0;
}

Result<uint32_t> Engine::create_srq(uint32_t pd, const SrqAttributes& attr) noexcept try {
    const DeviceLimits& l = core_->config.limits;
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p) return wire::Unexpected{EINVAL};
    if (attr.max_wr == 0 || attr.max_wr > l.max_srq_wr || attr.max_sge > l.max_srq_sge) return wire::Unexpected{EINVAL};
    auto srq = std::make_unique<SharedReceiveQueue>();
    srq->pd = pd;
    srq->attr = attr;
    srq->attr.max_sge = std::max<uint32_t>(attr.max_sge, 1);
    srq->limit_armed = attr.srq_limit != 0;
    srq->wqes.init(attr.max_wr, srq->attr.max_sge);
    const uint32_t h = core_->srqs.insert(std::move(srq));
    if (h == 0) return wire::Unexpected{ENOMEM};
    ++p->users;
    return h;
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::modify_srq(uint32_t srq, uint32_t srq_limit) noexcept {
    SharedReceiveQueue* s = core_->srqs.find(srq);
    if (!s || srq_limit > s->attr.max_wr) return EINVAL;
    s->attr.srq_limit = srq_limit;
    s->limit_armed = srq_limit != 0;  // arming, as IBV_SRQ_LIMIT does
    return 0;
}

int Engine::destroy_srq(uint32_t srq) noexcept {
    const SharedReceiveQueue* s = core_->srqs.find(srq);
    if (!s) return EINVAL;
    if (s->users != 0) return EBUSY;
    if (ProtectionDomain* p = core_->pds.find(s->pd)) --p->users;
    core_->srqs.remove(srq);
    return 0;
}

Result<uint32_t> Engine::create_ah(uint32_t pd, const AddressVector& av) noexcept try {
    ProtectionDomain* p = core_->pds.find(pd);
    if (!p || !valid_av(core_->config, av)) return wire::Unexpected{EINVAL};
    const uint32_t h = core_->ahs.insert(std::make_unique<AddressHandle>(AddressHandle{pd, av}));
    if (h == 0) return wire::Unexpected{ENOMEM};
    ++p->users;
    return h;
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::destroy_ah(uint32_t ah) noexcept {
    const AddressHandle* a = core_->ahs.find(ah);
    if (!a) return EINVAL;
    if (ProtectionDomain* p = core_->pds.find(a->pd)) --p->users;
    core_->ahs.remove(ah);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Queue pairs

Result<QpInfo> Engine::create_qp(const QpInitAttr& a) noexcept try {
    EngineCore& c = *core_;
    if (a.qp_type != QpType::Rc && a.qp_type != QpType::Uc && a.qp_type != QpType::Ud)
        return wire::Unexpected{EOPNOTSUPP};
    ProtectionDomain* pd = c.pds.find(a.pd);
    CompletionQueue* send_cq = c.cqs.find(a.send_cq);
    CompletionQueue* recv_cq = c.cqs.find(a.recv_cq);
    SharedReceiveQueue* srq = a.srq ? c.srqs.find(*a.srq) : nullptr;
    if (!pd || !send_cq || !recv_cq || (a.srq && !srq)) return wire::Unexpected{EINVAL};
    const DeviceLimits& l = c.config.limits;
    if (a.cap.max_send_wr > l.max_qp_wr || a.cap.max_recv_wr > l.max_qp_wr || a.cap.max_send_sge > l.max_sge ||
        a.cap.max_recv_sge > l.max_sge || a.cap.max_inline_data > l.max_inline_data)
        return wire::Unexpected{EINVAL};
    if (a.cap.max_send_wr == 0 && (a.cap.max_recv_wr == 0 && !a.srq)) return wire::Unexpected{EINVAL};
    if (c.qps.size() >= c.qps.capacity()) return wire::Unexpected{ENOMEM};

    auto qp = std::make_unique<QueuePair>();
    qp->init = a;
    qp->init.cap.max_send_sge = std::max<uint32_t>(a.cap.max_send_sge, 1);
    qp->init.cap.max_recv_sge = std::max<uint32_t>(a.cap.max_recv_sge, 1);
    qp->attr.cap = qp->init.cap;
    // UD has no path MTU attribute: its messages may be as large as the port's MTU.
    if (a.qp_type == QpType::Ud) qp->attr.path_mtu = l.active_mtu;
    qp->state = QpState::Reset;
    // The queues' storage is sized now, from the granted caps, so the data path never allocates.
    qp->sq.init(qp->init.cap.max_send_wr, qp->init.cap.max_send_sge, qp->init.cap.max_inline_data);
    if (!a.srq) qp->rq.init(qp->init.cap.max_recv_wr, qp->init.cap.max_recv_sge);
    qp->resp.resources.assign(1, {});
    qp->resp.responses.reserve(16);
    QueuePair* raw = qp.get();
    const uint32_t qpn = c.qps.insert(std::move(qp));
    if (qpn == 0) return wire::Unexpected{ENOMEM};
    raw->qpn = qpn;
    raw->comp.retransmit.owner = raw->comp.rnr.owner = qpn;
    raw->comp.retransmit.kind = static_cast<uint8_t>(TimerKind::Retransmit);
    raw->comp.rnr.kind = static_cast<uint8_t>(TimerKind::Rnr);
    raw->odp.bound.owner = qpn;
    raw->odp.bound.kind = static_cast<uint8_t>(TimerKind::OdpBound);
    raw->cc.emplace(c.config.congestion, c.config.port_rate_mbps);
    c.init_congestion_timers(*raw);
    ++pd->users;
    ++send_cq->users;
    ++recv_cq->users;
    if (srq) ++srq->users;
    return QpInfo{qpn, raw->init.cap};
} catch (const std::bad_alloc&) {
    return wire::Unexpected{ENOMEM};
}

int Engine::modify_qp(uint32_t qpn, const QpAttributes& a, uint32_t mask) noexcept try {
    EngineCore& c = *core_;
    QueuePair* qp = c.find_qp(qpn);
    if (!qp) return EINVAL;
    const auto [from, to] = resolve_modify_qp_states(qp->state, mask, a.cur_qp_state, a.qp_state);
    if (int rc = check_modify_qp(qp->init.qp_type, from, to, mask); rc != 0) return rc;

    // Values the mask check cannot judge.
    const DeviceLimits& l = c.config.limits;
    if ((mask & QpAttr::PathMtu) && (!is_known(a.path_mtu) || a.path_mtu > l.active_mtu)) return EINVAL;
    if ((mask & QpAttr::Port) && a.port_num != 1) return EINVAL;
    if ((mask & QpAttr::PkeyIndex) && a.pkey_index != 0) return EINVAL;
    if ((mask & QpAttr::MaxQpRdAtomic) && a.max_rd_atomic > l.max_qp_init_rd_atom) return EINVAL;
    if ((mask & QpAttr::MaxDestRdAtomic) && a.max_dest_rd_atomic > l.max_qp_rd_atom) return EINVAL;
    if ((mask & QpAttr::Timeout) && a.timeout > kMaxTimeout) return EINVAL;
    if ((mask & QpAttr::RetryCnt) && a.retry_cnt > kMaxRetry) return EINVAL;
    if ((mask & QpAttr::RnrRetry) && a.rnr_retry > kMaxRetry) return EINVAL;
    if ((mask & QpAttr::MinRnrTimer) && a.min_rnr_timer > kMaxRnrTimer) return EINVAL;
    if ((mask & QpAttr::Av) && !valid_av(c.config, a.ah_attr)) return EINVAL;
    if ((mask & QpAttr::DestQpn) && a.dest_qp_num > 0xFFFFFF) return EINVAL;
    if ((mask & QpAttr::AccessFlags) &&
        (a.qp_access_flags & ~(mem::kAccessLocalWrite | mem::kAccessRemoteAny | mem::kAccessMwBind |
                               mem::kAccessFlushGlobal | mem::kAccessFlushPersistent)))
        return EINVAL;
    // Accepted within the device's limits and not applied, as rxe does: the queues keep the
    // capacity they were created with.
    if ((mask & QpAttr::Cap) && (a.cap.max_send_wr > l.max_qp_wr || a.cap.max_recv_wr > l.max_qp_wr)) return EINVAL;

    if (to == QpState::Reset) {
        // RESET discards everything without completions (IBA 10.3.1); nothing else applies.
        if (qp->state != QpState::Reset) c.reset_qp(*qp);
        return 0;
    }

    QpAttributes& q = qp->attr;
    if (mask & QpAttr::AccessFlags) q.qp_access_flags = a.qp_access_flags;
    if (mask & QpAttr::PkeyIndex) q.pkey_index = a.pkey_index;
    if (mask & QpAttr::Port) q.port_num = a.port_num;
    if (mask & QpAttr::Qkey) q.qkey = a.qkey;
    if (mask & QpAttr::Av) q.ah_attr = a.ah_attr;
    if (mask & QpAttr::PathMtu) q.path_mtu = a.path_mtu;
    if (mask & QpAttr::Timeout) q.timeout = a.timeout;
    if (mask & QpAttr::RetryCnt) q.retry_cnt = a.retry_cnt;
    if (mask & QpAttr::RnrRetry) q.rnr_retry = a.rnr_retry;
    if (mask & QpAttr::RqPsn) q.rq_psn = a.rq_psn & wire::kPsnMask;
    if (mask & QpAttr::MaxQpRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
    if (mask & QpAttr::MinRnrTimer) q.min_rnr_timer = a.min_rnr_timer;
    if (mask & QpAttr::SqPsn) q.sq_psn = a.sq_psn & wire::kPsnMask;
    if (mask & QpAttr::MaxDestRdAtomic) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (mask & QpAttr::DestQpn) q.dest_qp_num = a.dest_qp_num;
    if (mask & QpAttr::EnSqdAsyncNotify) q.en_sqd_async_notify = a.en_sqd_async_notify;

    if (mask & QpAttr::RqPsn) {
        qp->resp.epsn = q.rq_psn;
        qp->resp.nak_sent = false;
    }
    if (mask & QpAttr::SqPsn) qp->req.next_psn = qp->comp.una_psn = q.sq_psn;
    if (mask & (QpAttr::RetryCnt | QpAttr::State)) qp->comp.retry_left = q.retry_cnt;
    if (mask & (QpAttr::RnrRetry | QpAttr::State)) qp->comp.rnr_retry_left = q.rnr_retry;
    if (mask & QpAttr::MaxDestRdAtomic) {
        qp->resp.resources.assign(std::max<uint32_t>(q.max_dest_rd_atomic, 1), {});
        qp->resp.next_resource = 0;
    }

    if (to != qp->state) {
        qp->state = to;
        q.qp_state = to;
        qp->comp.sqd_notified = false;
        if (to == QpState::Sqd) {
            c.requester.ask_again(*qp);  // the drain must not wait for the ACK timeout
            c.completer.retire(*qp);     // may already be drained
        }
        if (to == QpState::Err) c.flush_queues(*qp);
        if (to == QpState::Rts || to == QpState::Rtr) c.mark_ready(*qp);
    }
    return 0;
} catch (const std::bad_alloc&) {
    return ENOMEM;
}

int Engine::query_qp(uint32_t qpn, QpAttributes& attr) const noexcept {
    const QueuePair* qp = core_->find_qp(qpn);
    if (!qp) return EINVAL;
    attr = qp->attr;
    // The attributes keep the PSNs ModifyQp set; the IB spec's Query QP returns the current ones.
    attr.sq_psn = qp->req.next_psn;
    attr.rq_psn = qp->resp.epsn;
    attr.qp_state = qp->state;
    attr.cur_qp_state = qp->state;
    attr.cap = qp->init.cap;
    attr.sq_draining = qp->state == QpState::Sqd && qp->req.cursor != qp->sq.tail();
    return 0;
}

int Engine::destroy_qp(uint32_t qpn) noexcept try {
    EngineCore& c = *core_;
    QueuePair* qp = c.find_qp(qpn);
    if (!qp) return EINVAL;
    if (qp->resp.recv.active && qp->resp.recv.from_srq) c.give_back_recv(*qp);
    c.cancel(qp->comp.retransmit);
    c.cancel(qp->comp.rnr);
    c.cancel(qp->odp.bound);
    // A QP reusing this number must not find an entry it did not make (control path: a search).
    if (qp->odp.listed) std::erase(c.odp_parked, qpn);
    c.cancel_congestion_timers(*qp);
    c.release_qp_references(*qp);
    c.memory->forget_qp(qpn);  // its type 2 windows stay bound, to nobody (as in rxe)
    // Its place on the ready list (if any) is skipped: transmit() finds no QP by that number.
    c.qps.remove(qpn);
    return 0;
} catch (const std::bad_alloc&) {
    return ENOMEM;
}

// ---------------------------------------------------------------------------------------------
// Posting

int Engine::post_send(uint32_t qpn, const SendWr& wr) noexcept try {
    EngineCore& c = *core_;
    QueuePair* qp = c.find_qp(qpn);
    if (!qp) return EINVAL;
    if (qp->state == QpState::Reset || qp->state == QpState::Init || qp->state == QpState::Rtr) return EINVAL;
    const QpCap& cap = qp->init.cap;
    if (wr.sg_list.size() > cap.max_send_sge) return EINVAL;
    if (qp->sq.size() >= cap.max_send_wr) return ENOMEM;
    const bool inl = wr.send_flags & SendFlag::Inline;
    if (inl && wr.inline_data.size() > cap.max_inline_data) return EINVAL;

    const WrInfo& info = wr_info(wr.opcode);
    if (!info.allowed_on(qp->init.qp_type)) return EINVAL;
    if (inl && !info.inline_allowed) return EINVAL;
    const AddressHandle* ah = nullptr;
    if (qp->is_ud() && !(ah = c.ahs.find(wr.ah))) return EINVAL;

    uint64_t length = 0;
    if (inl) {
        length = wr.inline_data.size();
    } else {
        for (const Sge& s : wr.sg_list) length += s.length;
    }
    if (info.kind == WrClass::AtomicWrite && !inl && wr.sg_list.empty()) length = 8;  // the value is in compare_add
    if (info.kind == WrClass::Flush) {
        // FLUSH names a remote range only; rdma-core's wr_flush takes a 32-bit length.
        if (!wr.sg_list.empty() || wr.compare_add > UINT32_MAX) return EINVAL;
        if (wr.flush_level > 1 || (wr.flush_type & ~3u) != 0 || wr.flush_type == 0) return EINVAL;
        length = wr.compare_add;
    }
    if (length > c.config.limits.max_msg_size) return EINVAL;
    if ((info.kind == WrClass::Atomic || info.kind == WrClass::AtomicWrite) && length != 8) return EINVAL;
    if (qp->is_ud() && length > qp->mtu()) return EINVAL;
    SendWqe& w = qp->sq.push(wr, static_cast<uint32_t>(length));
    if (ah) w.av = ah->av;  // the AH may be destroyed before the WQE goes out
    if (qp->state == QpState::Err || qp->state == QpState::Sqe) {
        // rdma-core providers complete WRs posted in an error state with a flush error.
        if (qp->state == QpState::Err)
            c.flush_queues(*qp);
        else
            c.move_to_send_queue_error(*qp);
        return 0;
    }
    c.mark_ready(*qp);
    return 0;
} catch (...) {
    ++core_->counters.internal_errors;
    return ENOMEM;
}

int Engine::post_recv(uint32_t qpn, const RecvWr& wr) noexcept try {
    EngineCore& c = *core_;
    QueuePair* qp = c.find_qp(qpn);
    if (!qp || qp->init.srq) return EINVAL;
    if (qp->state == QpState::Reset) return EINVAL;
    if (wr.sg_list.size() > qp->init.cap.max_recv_sge) return EINVAL;
    if (qp->rq.full()) return ENOMEM;
    qp->rq.push(wr);
    if (qp->state == QpState::Err) c.flush_queues(*qp);
    return 0;
} catch (...) {
    ++core_->counters.internal_errors;
    return ENOMEM;
}

int Engine::post_srq_recv(uint32_t srq, const RecvWr& wr) noexcept try {
    SharedReceiveQueue* s = core_->srqs.find(srq);
    if (!s || wr.sg_list.size() > s->attr.max_sge) return EINVAL;
    if (s->wqes.full()) return ENOMEM;
    s->wqes.push(wr);
    return 0;
} catch (...) {
    ++core_->counters.internal_errors;
    return ENOMEM;
}

int Engine::poll_cq(uint32_t cq, std::span<WorkCompletion> out) noexcept {
    CompletionQueue* c = core_->cqs.find(cq);
    if (!c) return -EINVAL;
    return static_cast<int>(c->poll(out));
}

bool Engine::poll_async_event(AsyncEvent& event) noexcept {
    auto& events = core_->events;
    if (events.empty()) return false;
    event = events.front();
    events.pop_front();
    return true;
}

void Engine::take_updated_cqs(std::vector<uint32_t>& out) noexcept {
    out.clear();
    out.swap(core_->updated_cqs);
    for (uint32_t h : out)
        if (CompletionQueue* cq = core_->cqs.find(h)) cq->updated = false;
}

// ---------------------------------------------------------------------------------------------
// Introspection

const DeviceCounters& Engine::device_counters() const noexcept {
    return core_->counters;
}

const mem::MemoryTable& Engine::memory() const noexcept {
    return *core_->memory;
}

const QpCounters* Engine::qp_counters(uint32_t qpn) const noexcept {
    const QueuePair* qp = core_->find_qp(qpn);
    return qp ? &qp->counters : nullptr;
}

std::optional<QpSequence> Engine::qp_sequence(uint32_t qpn) const noexcept {
    const QueuePair* qp = core_->find_qp(qpn);
    if (!qp) return std::nullopt;
    // Only RC waits for acknowledgements: UC and UD never move una_psn.
    return QpSequence{qp->req.next_psn, qp->is_rc() ? qp->comp.una_psn : qp->req.next_psn, qp->resp.epsn};
}

QpCounters Engine::total_qp_counters() const {
    QpCounters total;
    core_->qps.for_each([&](uint32_t, const QueuePair& qp) { total.add(qp.counters); });
    return total;
}

std::vector<std::pair<std::string_view, uint64_t>> Engine::cache_counters() const {
    const EngineCore& c = *core_;
    return {
        {"qpc_cache_hits", c.qpc_cache->hits()},
        {"qpc_cache_misses", c.qpc_cache->misses()},
        {"qpc_cache_evictions", c.qpc_cache->evictions()},
        {"mpt_cache_hits", c.memory->mpt_cache().hits()},
        {"mpt_cache_misses", c.memory->mpt_cache().misses()},
        {"mpt_cache_evictions", c.memory->mpt_cache().evictions()},
        {"mtt_cache_hits", c.memory->mtt_cache().hits()},
        {"mtt_cache_misses", c.memory->mtt_cache().misses()},
        {"mtt_cache_evictions", c.memory->mtt_cache().evictions()},
    };
}

bool Engine::has_pending_work() const noexcept {
    return !core_->ready.empty() || !core_->pending_cnps.empty();
}

std::optional<std::string> Engine::set_congestion_param(std::string_view name, uint64_t value) noexcept {
    const cc::ParamAssignment one{name, value};
    return set_congestion_params(std::span(&one, 1));
}

std::optional<std::string> Engine::set_congestion_params(std::span<const cc::ParamAssignment> assignments) noexcept try {
    if (auto error = cc::set_params(core_->config.congestion, assignments)) return error;
    core_->on_congestion_params_changed();
    return std::nullopt;
} catch (const std::bad_alloc&) {
    return std::string("out of memory");
}

const cc::DcqcnParams& Engine::congestion_params() const noexcept {
    return core_->config.congestion;
}

std::optional<QpCongestionInfo> Engine::qp_congestion(uint32_t qpn) const noexcept {
    const QueuePair* qp = core_->find_qp(qpn);
    if (!qp || !qp->cc) return std::nullopt;
    const cc::ReactionPoint& rp = qp->cc->rp;
    QpCongestionInfo info;
    info.limited = rp.limited();
    info.rate_kbps = rp.current_rate_kbps();
    info.target_kbps = rp.target_rate_kbps();
    info.alpha = rp.alpha();
    info.cnps = rp.stats().cnps;
    info.cuts = rp.stats().cuts;
    info.cnps_sent = qp->counters.cnps_sent;
    return info;
}
uint64_t Engine::room_seq() const noexcept {
    return core_->room_seq;
}
bool Engine::has_async_events() const noexcept {
    return !core_->events.empty();
}
size_t Engine::qp_count() const noexcept {
    return core_->qps.size();
}
size_t Engine::cq_count() const noexcept {
    return core_->cqs.size();
}
size_t Engine::pd_count() const noexcept {
    return core_->pds.size();
}
size_t Engine::srq_count() const noexcept {
    return core_->srqs.size();
}
size_t Engine::ah_count() const noexcept {
    return core_->ahs.size();
}
size_t Engine::mr_count() const noexcept {
    return core_->memory->mr_count();
}
size_t Engine::armed_timers() const noexcept {
    return core_->timers.size();
}

size_t Engine::qp_storage_bytes(uint32_t qpn) const noexcept {
    const QueuePair* qp = core_->find_qp(qpn);
    return qp ? sizeof(QueuePair) + qp->sq.bytes() + qp->rq.bytes() : 0;
}

size_t Engine::srq_storage_bytes(uint32_t srq) const noexcept {
    const SharedReceiveQueue* s = core_->srqs.find(srq);
    return s ? sizeof(SharedReceiveQueue) + s->wqes.bytes() : 0;
}

size_t Engine::cq_storage_bytes(uint32_t cq) const noexcept {
    const CompletionQueue* c = core_->cqs.find(cq);
    return c ? sizeof(CompletionQueue) + size_t{c->capacity()} * sizeof(WorkCompletion) : 0;
}

}  // namespace rnic::transport
