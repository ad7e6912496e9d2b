// Engine control path: objects, their validation (errno as rdma-core providers return it), the
// QP state machine's side effects, completions and async events.
#include "rnic/transport/engine.hpp"

#include <algorithm>
#include <cerrno>

#include "completer.hpp"
#include "queue_pair.hpp"
#include "requester.hpp"
#include "responder.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/qp_state_machine.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::transport {
namespace {

mem::MemoryConfig memory_config(const EngineConfig& c) {
    mem::MemoryConfig m;
    m.max_mrs = c.limits.max_mr;
    m.max_mr_size = c.limits.max_mr_size;
    m.mpt_cache = c.caches.mpt;
    m.mtt_cache = c.caches.mtt;
    return m;
}

constexpr uint32_t kMaxRnrTimer = 31;
constexpr uint32_t kMaxTimeout = 31;
constexpr uint32_t kMaxRetry = 7;

}  // namespace

void QpCounters::add(const QpCounters& o) {
#define RNIC_ADD_COUNTER(name) name += o.name;
    RNIC_QP_COUNTERS(RNIC_ADD_COUNTER)
#undef RNIC_ADD_COUNTER
}

Engine::Engine(EngineConfig config)
    : config_(std::move(config)),
      memory_(std::make_unique<mem::MemoryTable>(memory_config(config_))),
      requester_(std::make_unique<Requester>(*this)),
      responder_(std::make_unique<Responder>(*this)),
      completer_(std::make_unique<Completer>(*this)),
      qpc_cache_(std::make_unique<mem::CacheModel>(config_.caches.qpc)),
      next_qpn_(config_.first_qpn) {}

Engine::~Engine() = default;

DeviceAttributes Engine::query_device() const {
    DeviceAttributes d;
    d.limits = config_.limits;
    return d;
}

PortAttributes Engine::query_port() const {
    PortAttributes p;
    p.max_mtu = config_.limits.max_mtu;
    p.active_mtu = config_.limits.active_mtu;
    p.gid_tbl_len = static_cast<uint32_t>(config_.gids.size());
    p.max_msg_sz = config_.limits.max_msg_size;
    return p;
}

// ---------------------------------------------------------------------------------------------
// Protection domains, memory regions, CQs, SRQs, AHs

Result<uint32_t> Engine::alloc_pd() {
    if (pds_.size() >= config_.limits.max_pd) return wire::Unexpected{ENOMEM};
    const uint32_t h = next_handle_++;
    pds_.emplace(h, ProtectionDomain{});
    return h;
}

int Engine::dealloc_pd(uint32_t pd) {
    if (!pds_.count(pd)) return EINVAL;
    for (const auto& [qpn, qp] : qps_)
        if (qp->init.pd == pd) return EBUSY;
    for (const auto& [h, srq] : srqs_)
        if (srq.pd == pd) return EBUSY;
    pds_.erase(pd);
    return 0;
}

Result<MrInfo> Engine::reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access) {
    if (!pds_.count(pd)) return wire::Unexpected{EINVAL};
    const mem::RegResult r = memory_->register_mr(pd, addr, length, iova, access);
    if (!r.ok()) return wire::Unexpected{r.error};
    return MrInfo{r.keys.lkey, r.keys.rkey};
}

Result<MrInfo> Engine::reg_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                    uint64_t length, uint64_t iova, uint32_t access) {
    if (!pds_.count(pd)) return wire::Unexpected{EINVAL};
    const mem::RegResult r = memory_->register_mr_pages(pd, pages, first_page_offset, length, iova, access);
    if (!r.ok()) return wire::Unexpected{r.error};
    return MrInfo{r.keys.lkey, r.keys.rkey};
}

int Engine::dereg_mr(uint32_t lkey) { return memory_->deregister_mr(lkey); }

Result<uint32_t> Engine::create_cq(uint32_t cqe) {
    if (cqe == 0 || cqe > config_.limits.max_cqe) return wire::Unexpected{EINVAL};
    if (cqs_.size() >= config_.limits.max_cq) return wire::Unexpected{ENOMEM};
    const uint32_t h = next_handle_++;
    cqs_.emplace(h, std::make_unique<CompletionQueue>(cqe));
    return h;
}

int Engine::destroy_cq(uint32_t cq) {
    if (!cqs_.count(cq)) return EINVAL;
    for (const auto& [qpn, qp] : qps_)
        if (qp->init.send_cq == cq || qp->init.recv_cq == cq) return EBUSY;
    cqs_.erase(cq);
    return 0;
}

Result<uint32_t> Engine::create_srq(uint32_t pd, const SrqAttributes& attr) {
    if (!pds_.count(pd)) return wire::Unexpected{EINVAL};
    if (attr.max_wr == 0 || attr.max_wr > config_.limits.max_srq_wr || attr.max_sge > config_.limits.max_srq_sge)
        return wire::Unexpected{EINVAL};
    if (srqs_.size() >= config_.limits.max_srq) return wire::Unexpected{ENOMEM};
    const uint32_t h = next_handle_++;
    SharedReceiveQueue srq;
    srq.pd = pd;
    srq.attr = attr;
    srq.limit_armed = attr.srq_limit != 0;
    srqs_.emplace(h, std::move(srq));
    return h;
}

int Engine::modify_srq(uint32_t srq, uint32_t srq_limit) {
    auto it = srqs_.find(srq);
    if (it == srqs_.end() || srq_limit > it->second.attr.max_wr) return EINVAL;
    it->second.attr.srq_limit = srq_limit;
    it->second.limit_armed = srq_limit != 0;  // arming, as IBV_SRQ_LIMIT does
    return 0;
}

int Engine::destroy_srq(uint32_t srq) {
    if (!srqs_.count(srq)) return EINVAL;
    for (const auto& [qpn, qp] : qps_)
        if (qp->init.srq == srq) return EBUSY;
    srqs_.erase(srq);
    return 0;
}

bool Engine::valid_av(const AddressVector& av) const noexcept {
    // The source GID decides the IP version of every frame (as rxe's network type follows the
    // sgid): a destination of the other version could never be put on the wire.
    return av.sgid_index < config_.gids.size() &&
           config_.gids[av.sgid_index].is_ipv4_mapped() == av.dgid.is_ipv4_mapped();
}

Result<uint32_t> Engine::create_ah(uint32_t pd, const AddressVector& av) {
    if (!pds_.count(pd) || !valid_av(av)) return wire::Unexpected{EINVAL};
    if (ahs_.size() >= config_.limits.max_ah) return wire::Unexpected{ENOMEM};
    const uint32_t h = next_handle_++;
    ahs_.emplace(h, av);
    return h;
}

int Engine::destroy_ah(uint32_t ah) { return ahs_.erase(ah) ? 0 : EINVAL; }

// ---------------------------------------------------------------------------------------------
// Queue pairs

Result<QpInfo> Engine::create_qp(const QpInitAttr& a) {
    if (a.qp_type != QpType::Rc && a.qp_type != QpType::Uc && a.qp_type != QpType::Ud)
        return wire::Unexpected{EOPNOTSUPP};
    if (!pds_.count(a.pd) || !cqs_.count(a.send_cq) || !cqs_.count(a.recv_cq)) return wire::Unexpected{EINVAL};
    if (a.srq && !srqs_.count(*a.srq)) return wire::Unexpected{EINVAL};
    const DeviceLimits& l = config_.limits;
    if (a.cap.max_send_wr > l.max_qp_wr || a.cap.max_recv_wr > l.max_qp_wr || a.cap.max_send_sge > l.max_sge ||
        a.cap.max_recv_sge > l.max_sge || a.cap.max_inline_data > l.max_inline_data)
        return wire::Unexpected{EINVAL};
    if (a.cap.max_send_wr == 0 && (a.cap.max_recv_wr == 0 && !a.srq)) return wire::Unexpected{EINVAL};
    if (qps_.size() >= l.max_qp) return wire::Unexpected{ENOMEM};

    auto qp = std::make_unique<QueuePair>();
    qp->qpn = next_qpn_;
    next_qpn_ = (next_qpn_ + 1) & 0xFFFFFF;
    if (next_qpn_ < config_.first_qpn) next_qpn_ = config_.first_qpn;
    qp->init = a;
    qp->init.cap.max_send_sge = std::max<uint32_t>(a.cap.max_send_sge, 1);
    qp->init.cap.max_recv_sge = std::max<uint32_t>(a.cap.max_recv_sge, 1);
    qp->attr.cap = qp->init.cap;
    // UD has no path MTU attribute: its messages may be as large as the port's MTU.
    if (a.qp_type == QpType::Ud) qp->attr.path_mtu = config_.limits.active_mtu;
    qp->state = QpState::Reset;
    const QpInfo info{qp->qpn, qp->init.cap};
    qps_.emplace(qp->qpn, std::move(qp));
    return info;
}

int Engine::modify_qp(uint32_t qpn, const QpAttributes& a, uint32_t mask) {
    QueuePair* qp = find_qp(qpn);
    if (!qp) return EINVAL;
    const auto [from, to] = resolve_modify_qp_states(qp->state, mask, a.cur_qp_state, a.qp_state);
    if (int rc = check_modify_qp(qp->init.qp_type, from, to, mask); rc != 0) return rc;

    // Values the mask check cannot judge.
    const DeviceLimits& l = config_.limits;
    if ((mask & QpAttr::PathMtu) && (!is_known(a.path_mtu) || a.path_mtu > l.active_mtu)) return EINVAL;
    if ((mask & QpAttr::Port) && a.port_num != 1) return EINVAL;
    if ((mask & QpAttr::PkeyIndex) && a.pkey_index != 0) return EINVAL;
    if ((mask & QpAttr::MaxQpRdAtomic) && a.max_rd_atomic > l.max_qp_init_rd_atom) return EINVAL;
    if ((mask & QpAttr::MaxDestRdAtomic) && a.max_dest_rd_atomic > l.max_qp_rd_atom) return EINVAL;
    if ((mask & QpAttr::Timeout) && a.timeout > kMaxTimeout) return EINVAL;
    if ((mask & QpAttr::RetryCnt) && a.retry_cnt > kMaxRetry) return EINVAL;
    if ((mask & QpAttr::RnrRetry) && a.rnr_retry > kMaxRetry) return EINVAL;
    if ((mask & QpAttr::MinRnrTimer) && a.min_rnr_timer > kMaxRnrTimer) return EINVAL;
    if ((mask & QpAttr::Av) && !valid_av(a.ah_attr)) return EINVAL;
    if ((mask & QpAttr::DestQpn) && a.dest_qp_num > 0xFFFFFF) return EINVAL;
    if ((mask & QpAttr::AccessFlags) &&
        (a.qp_access_flags & ~(mem::kAccessLocalWrite | mem::kAccessRemoteAny | mem::kAccessMwBind)))
        return EINVAL;
    if ((mask & QpAttr::Cap) && (a.cap.max_send_wr > l.max_qp_wr || a.cap.max_recv_wr > l.max_qp_wr))
        return EINVAL;

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
        qp->epsn = q.rq_psn;
        qp->nak_sent = false;
    }
    if (mask & QpAttr::SqPsn) {
        qp->next_psn = qp->una_psn = q.sq_psn;
    }
    if (mask & (QpAttr::RetryCnt | QpAttr::State)) qp->retry_left = q.retry_cnt;
    if (mask & (QpAttr::RnrRetry | QpAttr::State)) qp->rnr_retry_left = q.rnr_retry;
    if (mask & QpAttr::MaxDestRdAtomic) qp->resources.assign(std::max<uint32_t>(q.max_dest_rd_atomic, 1), {});
    if (qp->resources.empty()) qp->resources.assign(1, {});

    if (to != qp->state) {
        if (to == QpState::Reset) {
            // RESET discards everything without completions (IBA 10.3.1).
            auto fresh = std::make_unique<QueuePair>();
            fresh->qpn = qp->qpn;
            fresh->init = qp->init;
            fresh->attr.cap = qp->init.cap;
            qps_[qpn] = std::move(fresh);
            return 0;
        }
        qp->state = to;
        q.qp_state = to;
        qp->sqd_notified = false;
        if (to == QpState::Sqd) completer_->retire(*qp);  // may already be drained
        if (to == QpState::Err) flush_queues(*qp);
        if (to == QpState::Rts || to == QpState::Rtr) mark_ready(*qp);
    }
    return 0;
}

int Engine::query_qp(uint32_t qpn, QpAttributes& attr) const {
    const QueuePair* qp = find_qp(qpn);
    if (!qp) return EINVAL;
    attr = qp->attr;
    // The attributes keep the PSNs ModifyQp set; the IB spec's Query QP returns the current ones.
    attr.sq_psn = qp->next_psn;
    attr.rq_psn = qp->epsn;
    attr.qp_state = qp->state;
    attr.cur_qp_state = qp->state;
    attr.cap = qp->init.cap;
    attr.sq_draining = qp->state == QpState::Sqd && qp->cursor < qp->sq.size();
    return 0;
}

int Engine::destroy_qp(uint32_t qpn) {
    if (!qps_.erase(qpn)) return EINVAL;
    ready_.erase(std::remove(ready_.begin(), ready_.end(), qpn), ready_.end());
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Posting

int Engine::post_send(uint32_t qpn, const SendWr& wr) {
    QueuePair* qp = find_qp(qpn);
    if (!qp) return EINVAL;
    if (qp->state == QpState::Reset || qp->state == QpState::Init || qp->state == QpState::Rtr) return EINVAL;
    const QpCap& cap = qp->init.cap;
    if (wr.sg_list.size() > cap.max_send_sge) return EINVAL;
    if (qp->sq.size() >= cap.max_send_wr) return ENOMEM;
    const bool inl = wr.send_flags & SendFlag::Inline;
    if (inl && wr.inline_data.size() > cap.max_inline_data) return EINVAL;

    const WrOpcode op = wr.opcode;
    const bool sendish = op == WrOpcode::Send || op == WrOpcode::SendWithImm;
    const bool write = op == WrOpcode::RdmaWrite || op == WrOpcode::RdmaWriteWithImm;
    const bool rd_atomic = op == WrOpcode::RdmaRead || op == WrOpcode::AtomicCmpAndSwp ||
                           op == WrOpcode::AtomicFetchAndAdd;
    switch (qp->init.qp_type) {
        case QpType::Ud:
            if (!sendish) return EINVAL;
            if (!ahs_.count(wr.ah)) return EINVAL;
            break;
        case QpType::Uc:
            if (!sendish && !write && op != WrOpcode::LocalInv) return EINVAL;
            break;
        case QpType::Rc:
            if (!sendish && !write && !rd_atomic && op != WrOpcode::SendWithInv && op != WrOpcode::LocalInv)
                return EINVAL;
            break;
        default:
            return EINVAL;
    }
    if (inl && (rd_atomic || op == WrOpcode::LocalInv)) return EINVAL;

    SendWqe wqe;
    wqe.wr = wr;
    uint64_t length = 0;
    if (inl) {
        length = wr.inline_data.size();
        wqe.wr.sg_list.clear();
    } else {
        wqe.wr.inline_data.clear();
        for (const Sge& s : wr.sg_list) length += s.length;
    }
    if (length > config_.limits.max_msg_size) return EINVAL;
    if ((op == WrOpcode::AtomicCmpAndSwp || op == WrOpcode::AtomicFetchAndAdd) && length != 8) return EINVAL;
    if (qp->is_ud() && length > qp->mtu()) return EINVAL;
    wqe.length = static_cast<uint32_t>(length);
    qp->sq.push_back(std::move(wqe));
    if (qp->state == QpState::Err || qp->state == QpState::Sqe) {
        // rdma-core providers complete WRs posted in an error state with a flush error.
        if (qp->state == QpState::Err) flush_queues(*qp);
        else move_to_send_queue_error(*qp);
        return 0;
    }
    mark_ready(*qp);
    return 0;
}

int Engine::post_recv(uint32_t qpn, const RecvWr& wr) {
    QueuePair* qp = find_qp(qpn);
    if (!qp || qp->init.srq) return EINVAL;
    if (qp->state == QpState::Reset) return EINVAL;
    if (wr.sg_list.size() > qp->init.cap.max_recv_sge) return EINVAL;
    if (qp->rq.size() >= qp->init.cap.max_recv_wr) return ENOMEM;
    qp->rq.push_back(wr);
    if (qp->state == QpState::Err) flush_queues(*qp);
    return 0;
}

int Engine::post_srq_recv(uint32_t srq, const RecvWr& wr) {
    auto it = srqs_.find(srq);
    if (it == srqs_.end() || wr.sg_list.size() > it->second.attr.max_sge) return EINVAL;
    if (it->second.wqes.size() >= it->second.attr.max_wr) return ENOMEM;
    it->second.wqes.push_back(wr);
    return 0;
}

int Engine::poll_cq(uint32_t cq, std::span<WorkCompletion> out) {
    auto it = cqs_.find(cq);
    if (it == cqs_.end()) return -EINVAL;
    return static_cast<int>(it->second->poll(out));
}

bool Engine::poll_async_event(AsyncEvent& event) {
    if (events_.empty()) return false;
    event = events_.front();
    events_.pop_front();
    return true;
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

QueuePair* Engine::find_qp(uint32_t qpn) {
    auto it = qps_.find(qpn);
    return it == qps_.end() ? nullptr : it->second.get();
}

const QueuePair* Engine::find_qp(uint32_t qpn) const {
    auto it = qps_.find(qpn);
    return it == qps_.end() ? nullptr : it->second.get();
}

const QpCounters* Engine::qp_counters(uint32_t qpn) const {
    const QueuePair* qp = find_qp(qpn);
    return qp ? &qp->counters : nullptr;
}

std::optional<QpSequence> Engine::qp_sequence(uint32_t qpn) const {
    const QueuePair* qp = find_qp(qpn);
    if (!qp) return std::nullopt;
    // Only RC waits for acknowledgements: UC and UD never move una_psn.
    return QpSequence{qp->next_psn, qp->is_rc() ? qp->una_psn : qp->next_psn, qp->epsn};
}

size_t Engine::mr_count() const noexcept {
    return memory_->mr_count();
}

QpCounters Engine::total_qp_counters() const {
    QpCounters total;
    for (const auto& [qpn, qp] : qps_) total.add(qp->counters);
    return total;
}

std::vector<std::pair<std::string_view, uint64_t>> Engine::cache_counters() const {
    std::vector<std::pair<std::string_view, uint64_t>> out = {
        {"qpc_cache_hits", qpc_cache_->hits()},
        {"qpc_cache_misses", qpc_cache_->misses()},
        {"qpc_cache_evictions", qpc_cache_->evictions()},
        {"mpt_cache_hits", memory_->mpt_cache().hits()},
        {"mpt_cache_misses", memory_->mpt_cache().misses()},
        {"mpt_cache_evictions", memory_->mpt_cache().evictions()},
        {"mtt_cache_hits", memory_->mtt_cache().hits()},
        {"mtt_cache_misses", memory_->mtt_cache().misses()},
        {"mtt_cache_evictions", memory_->mtt_cache().evictions()},
    };
    return out;
}

void Engine::complete(QueuePair& qp, uint32_t cq, const WorkCompletion& wc) {
    ++qp.counters.completions;
    ++completion_seq_;
    if (wc.status != WcStatus::Success) ++qp.counters.error_completions;
    auto it = cqs_.find(cq);
    if (it == cqs_.end()) return;
    const bool was_overflowed = it->second->overflowed();
    if (!it->second->push(wc)) {
        ++counters_.cq_overflows;
        if (!was_overflowed) raise_event(EventType::CqErr, cq);
    }
}

void Engine::raise_event(EventType type, uint32_t object) {
    ++counters_.async_events;
    events_.push_back({type, object});
}

void Engine::move_to_send_queue_error(QueuePair& qp) {
    // UC and UD QPs keep receiving after a send-side error (IBA 10.3.1, SQE state): only the
    // send queue is flushed.
    if (qp.is_rc()) {
        move_to_error(qp);
        return;
    }
    qp.state = QpState::Sqe;
    qp.attr.qp_state = QpState::Sqe;
    flush_send_queue(qp);
}

// Outstanding send WRs complete in order: a failed one with its error, the rest flushed.
void Engine::flush_send_queue(QueuePair& qp) {
    while (!qp.sq.empty()) {
        const SendWqe& w = qp.sq.front();
        WorkCompletion wc;
        wc.wr_id = w.wr.wr_id;
        wc.status = w.done && w.status != WcStatus::Success ? w.status : WcStatus::WrFlushErr;
        wc.opcode = wc_opcode_for(w.wr.opcode).value_or(WcOpcode::Send);
        wc.qp_num = qp.qpn;
        complete(qp, qp.init.send_cq, wc);
        qp.sq.pop_front();
    }
    qp.cursor = 0;
    qp.cursor_pkt = 0;
    qp.outstanding_rd_atomic = 0;
    qp.retransmit_deadline.reset();
    qp.rnr_deadline.reset();
}

void Engine::move_to_error(QueuePair& qp) {
    if (qp.state == QpState::Err) return;
    qp.state = QpState::Err;
    qp.attr.qp_state = QpState::Err;
    flush_queues(qp);
}

// Every outstanding WR completes with IBV_WC_WR_FLUSH_ERR, in order (IBA 10.3.1 error state).
void Engine::flush_queues(QueuePair& qp) {
    flush_send_queue(qp);
    if (qp.recv_in_progress && !qp.recv_from_srq) qp.rq.push_front(*qp.recv_in_progress);
    qp.recv_in_progress.reset();
    while (!qp.rq.empty()) {
        WorkCompletion wc;
        wc.wr_id = qp.rq.front().wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = qp.qpn;
        complete(qp, qp.init.recv_cq, wc);
        qp.rq.pop_front();
    }
    qp.responses.clear();
}

void Engine::charge(uint64_t ns) { busy_until_ = std::max(busy_until_, now_) + ns; }

bool Engine::take_recv_wqe(QueuePair& qp, RecvWr& out, bool& from_srq) {
    if (qp.init.srq) {
        auto it = srqs_.find(*qp.init.srq);
        if (it == srqs_.end() || it->second.wqes.empty()) return false;
        out = std::move(it->second.wqes.front());
        it->second.wqes.pop_front();
        from_srq = true;
        after_srq_consume(*qp.init.srq);
        return true;
    }
    if (qp.rq.empty()) return false;
    out = std::move(qp.rq.front());
    qp.rq.pop_front();
    from_srq = false;
    return true;
}

void Engine::after_srq_consume(uint32_t srq) {
    SharedReceiveQueue& s = srqs_.at(srq);
    // IBA 11.5.2.5: once armed, the limit event fires when the WQE count drops below it.
    if (s.limit_armed && s.wqes.size() < s.attr.srq_limit) {
        s.limit_armed = false;
        raise_event(EventType::SrqLimitReached, srq);
    }
}

void Engine::mark_ready(QueuePair& qp) {
    if (std::find(ready_.begin(), ready_.end(), qp.qpn) == ready_.end()) ready_.push_back(qp.qpn);
}

}  // namespace rnic::transport
