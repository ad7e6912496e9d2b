// The control verbs: one request each, objects kept with what the daemon granted.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/verbs_values.hpp"
#include "socket_io.hpp"

namespace rnic::host::client {

namespace {

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
    return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

template <class T>
bool parse(const std::vector<uint8_t>& reply, T& out) {
    if (reply.size() != sizeof out) return false;
    std::memcpy(&out, reply.data(), sizeof out);
    return true;
}

// Maps a ring memfd the daemon sent; the fd is closed either way.
int map_ring(int fd, size_t bytes, RingMapping& m) {
    struct stat st {};
    int rc = 0;
    if (bytes < sizeof(abi::RingHeader) || fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) {
        rc = EPROTO;
    } else {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            rc = errno;
        } else {
            m.base = p;
            m.bytes = bytes;
        }
    }
    close(fd);
    return rc;
}

// After the daemon is gone, destroying objects must still work so applications can clean up
// (the kernel behaves the same on a disassociated device).
int destroyed(int rc, const Connection& c) {
    return (rc == EIO || rc == ETIMEDOUT) && c.dead() ? 0 : rc;
}

}  // namespace

// ---- PD ----

Result<Pd*> Connection::alloc_pd() try {
    std::lock_guard v(verbs_lock_);
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::AllocPd, {}, {}, &reply, nullptr); rc != 0) return Error{rc};
    abi::HandleReply r{};
    if (!parse(reply, r)) return Error{EPROTO};
    auto pd = std::make_unique<Pd>(Pd{this, r.handle});
    Pd* raw = pd.get();
    std::lock_guard lock(objects_lock_);
    pds_[r.handle] = std::move(pd);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::dealloc_pd(Pd* pd) try {
    if (pd == nullptr || pd->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{pd->handle, 0};
    if (const int rc = destroyed(call(abi::Op::DeallocPd, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    std::lock_guard lock(objects_lock_);
    pds_.erase(pd->handle);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

// ---- MR ----

Result<Mr*> Connection::reg_mr(Pd* pd, void* addr, size_t length, uint32_t access) try {
    return reg_mr_iova(pd, addr, length, reinterpret_cast<uintptr_t>(addr), access);
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

Result<Mr*> Connection::reg_mr_iova(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access) try {
    if (pd == nullptr || pd->connection != this || length == 0) return Error{EINVAL};
    if (dead()) return Error{EIO};
    std::lock_guard v(verbs_lock_);
    auto shared = PageSharer::instance().acquire(addr, length);
    if (!shared) return Error{shared.error()};

    std::vector<uint32_t> shared_now;  // segments this call sent, to take back on failure
    auto undo = [&](int rc) -> Result<Mr*> {
        for (uint32_t id : shared_now) {
            const abi::HandleRequest rel{id, 0};
            call(abi::Op::ReleaseSegment, bytes_of(rel), {}, nullptr, nullptr);
        }
        PageSharer::instance().release(*shared);
        return Error{rc};
    };
    for (const auto& seg : shared->segments) {
        if (segment_users_.count(seg->id) != 0) continue;
        const abi::ShareSegmentRequest req{seg->id, 0, seg->share_length()};
        const int fd[1] = {seg->fd};
        if (const int rc = call(abi::Op::ShareSegment, bytes_of(req), fd, nullptr, nullptr); rc != 0) return undo(rc);
        shared_now.push_back(seg->id);
    }

    abi::RegMrRequest req{};
    req.pd = pd->handle;
    req.access = access;
    req.addr = reinterpret_cast<uintptr_t>(addr);
    req.length = length;
    req.iova = iova;
    req.page_offset = static_cast<uint32_t>(req.addr & (page_size() - 1));
    req.run_count = static_cast<uint32_t>(shared->runs.size());
    std::vector<uint8_t> body(sizeof req + shared->runs.size() * sizeof(abi::SegmentRun));
    if (body.size() + sizeof(abi::MessageHeader) > abi::kMaxMessage) return undo(ENOMEM);
    std::memcpy(body.data(), &req, sizeof req);
    for (size_t i = 0; i < shared->runs.size(); ++i) {
        const SharedRun& run = shared->runs[i];
        const abi::SegmentRun r{run.segment->id, 0, run.offset, run.length};
        std::memcpy(body.data() + sizeof req + i * sizeof r, &r, sizeof r);
    }
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::RegMr, body, {}, &reply, nullptr); rc != 0) return undo(rc);
    abi::RegMrReply r{};
    if (!parse(reply, r)) return undo(EPROTO);

    for (const auto& seg : shared->segments) ++segment_users_[seg->id];
    auto mr = std::make_unique<Mr>(Mr{this, pd, addr, length, iova, access, r.lkey, r.rkey, std::move(*shared)});
    Mr* raw = mr.get();
    std::lock_guard lock(objects_lock_);
    mrs_[r.lkey] = std::move(mr);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::dereg_mr(Mr* mr) try {
    if (mr == nullptr || mr->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{mr->lkey, 0};
    if (const int rc = destroyed(call(abi::Op::DeregMr, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    for (const auto& seg : mr->shared.segments) {
        const auto it = segment_users_.find(seg->id);
        if (it == segment_users_.end() || --it->second != 0) continue;
        segment_users_.erase(it);
        const abi::HandleRequest rel{seg->id, 0};
        if (!dead()) call(abi::Op::ReleaseSegment, bytes_of(rel), {}, nullptr, nullptr);
    }
    PageSharer::instance().release(mr->shared);
    std::lock_guard lock(objects_lock_);
    mrs_.erase(mr->lkey);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

// ---- memory windows ----

Result<abi::AllocMwReply> Connection::alloc_mw(Pd* pd, uint32_t type) try {
    if (pd == nullptr || pd->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    const abi::AllocMwRequest req{pd->handle, type};
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::AllocMw, bytes_of(req), {}, &reply, nullptr); rc != 0) return Error{rc};
    abi::AllocMwReply r{};
    if (!parse(reply, r)) return Error{EPROTO};
    return r;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::dealloc_mw(uint32_t handle) try {
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{handle, 0};
    return destroyed(call(abi::Op::DeallocMw, bytes_of(req), {}, nullptr, nullptr), *this);
} catch (...) {
    return ENOMEM;
}

// ---- completion channels and CQs ----

Result<CompChannel*> Connection::create_comp_channel() try {
    std::lock_guard v(verbs_lock_);
    std::vector<uint8_t> reply;
    std::vector<int> fds;
    abi::HandleReply r{};
    int rc = call(abi::Op::CreateCompChannel, {}, {}, &reply, &fds);
    if (rc == 0 && (!parse(reply, r) || fds.size() != 2)) rc = EPROTO;
    if (rc != 0) {
        detail::close_all(fds);
        return Error{rc};
    }
    auto ch = std::make_unique<CompChannel>(CompChannel{this, r.handle, fds[0], fds[1], {}});
    CompChannel* raw = ch.get();
    std::lock_guard lock(objects_lock_);
    channels_[r.handle] = std::move(ch);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::destroy_comp_channel(CompChannel* channel) try {
    if (channel == nullptr || channel->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    {
        std::lock_guard lock(objects_lock_);
        if (!channel->cqs.empty()) return EBUSY;
    }
    const abi::HandleRequest req{channel->handle, 0};
    if (const int rc = destroyed(call(abi::Op::DestroyCompChannel, bytes_of(req), {}, nullptr, nullptr), *this);
        rc != 0)
        return rc;
    std::lock_guard lock(objects_lock_);
    close(channel->fd);
    close(channel->wake_fd);
    channels_.erase(channel->handle);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

Result<Cq*> Connection::create_cq(uint32_t cqe, CompChannel* channel, uint32_t comp_vector) try {
    if (channel != nullptr && channel->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    const abi::CreateCqRequest req{cqe, channel != nullptr ? channel->handle : 0, comp_vector, 0};
    std::vector<uint8_t> reply;
    std::vector<int> fds;
    if (const int rc = call(abi::Op::CreateCq, bytes_of(req), {}, &reply, &fds); rc != 0) return Error{rc};
    abi::CreateCqReply r{};
    auto cq = std::make_unique<Cq>();
    int rc = 0;
    if (!parse(reply, r) || fds.size() != 1 || !abi::is_power_of_two(r.ring_size) || r.ring_size < r.cqe ||
        r.ring_bytes < abi::ring_bytes(r.ring_size, sizeof(abi::Cqe))) {
        detail::close_all(fds);
        rc = EPROTO;
    } else {
        rc = map_ring(fds[0], r.ring_bytes, cq->memory);
    }
    if (rc != 0) {
        const abi::HandleRequest d{r.handle, 0};
        if (r.handle != 0) call(abi::Op::DestroyCq, bytes_of(d), {}, nullptr, nullptr);
        return Error{rc};
    }
    cq->connection = this;
    cq->channel = channel;
    cq->handle = r.handle;
    cq->cqe = r.cqe;
    cq->ring = abi::RingView(cq->memory.base, r.ring_size, sizeof(abi::Cqe));
    cq->consumed = cq->ring.header().consumer.load(std::memory_order_acquire);
    cq->events_seen = cq->ring.header().events.load(std::memory_order_acquire);
    Cq* raw = cq.get();
    std::lock_guard lock(objects_lock_);
    if (channel != nullptr) channel->cqs.push_back(raw);
    cqs_[r.handle] = std::move(cq);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::destroy_cq(Cq* cq) try {
    if (cq == nullptr || cq->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    {
        std::lock_guard cl(cq->lock);
        if (!cq->qps.empty()) return EBUSY;
    }
    const abi::HandleRequest req{cq->handle, 0};
    if (const int rc = destroyed(call(abi::Op::DestroyCq, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    std::unique_lock lock(objects_lock_);
    // ibv_destroy_cq waits until every event it handed out was acknowledged.
    acked_.wait(lock, [cq] { return cq->events_acked >= cq->events_delivered; });
    if (cq->channel != nullptr) std::erase(cq->channel->cqs, cq);
    cqs_.erase(cq->handle);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

// ---- SRQ ----

Result<Srq*> Connection::create_srq(Pd* pd, uint32_t max_wr, uint32_t max_sge, uint32_t srq_limit) try {
    if (pd == nullptr || pd->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    const abi::CreateSrqRequest req{pd->handle, max_wr, max_sge, srq_limit};
    std::vector<uint8_t> reply;
    std::vector<int> fds;
    if (const int rc = call(abi::Op::CreateSrq, bytes_of(req), {}, &reply, &fds); rc != 0) return Error{rc};
    abi::CreateSrqReply r{};
    auto srq = std::make_unique<Srq>();
    int rc = 0;
    if (!parse(reply, r) || fds.size() != 1 || !abi::is_power_of_two(r.ring_size) || r.ring_size < r.max_wr ||
        r.ring_stride < abi::recv_stride(r.max_sge) || r.ring_bytes < abi::ring_bytes(r.ring_size, r.ring_stride) ||
        r.doorbell >= abi::kDoorbellSlots) {
        detail::close_all(fds);
        rc = EPROTO;
    } else {
        rc = map_ring(fds[0], r.ring_bytes, srq->memory);
    }
    if (rc != 0) {
        const abi::HandleRequest d{r.handle, 0};
        if (r.handle != 0) call(abi::Op::DestroySrq, bytes_of(d), {}, nullptr, nullptr);
        return Error{rc};
    }
    srq->connection = this;
    srq->pd = pd;
    srq->handle = r.handle;
    srq->srq_limit = srq_limit;
    srq->wq.ring = abi::RingView(srq->memory.base, r.ring_size, r.ring_stride);
    srq->wq.max_wr = r.max_wr;
    srq->wq.max_sge = r.max_sge;
    srq->doorbell = r.doorbell;
    srq->wq.produced.store(srq->wq.ring.header().producer.load(std::memory_order_acquire));
    Srq* raw = srq.get();
    std::lock_guard lock(objects_lock_);
    srqs_[r.handle] = std::move(srq);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::modify_srq(Srq* srq, uint32_t attr_mask, uint32_t max_wr, uint32_t srq_limit) try {
    if (srq == nullptr || srq->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::ModifySrqRequest req{srq->handle, attr_mask, max_wr, srq_limit};
    if (const int rc = call(abi::Op::ModifySrq, bytes_of(req), {}, nullptr, nullptr); rc != 0) return rc;
    constexpr uint32_t kSrqMaxWr = 1u << 0;
    constexpr uint32_t kSrqLimit = 1u << 1;
    if ((attr_mask & kSrqLimit) != 0) srq->srq_limit = srq_limit;
    if ((attr_mask & kSrqMaxWr) != 0) {
        std::lock_guard q(srq->wq.lock);
        srq->wq.max_wr = std::min(max_wr, srq->wq.ring.size());
    }
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

Result<abi::QuerySrqReply> Connection::query_srq(Srq* srq) try {
    if (srq == nullptr || srq->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{srq->handle, 0};
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::QuerySrq, bytes_of(req), {}, &reply, nullptr); rc != 0) return Error{rc};
    abi::QuerySrqReply r{};
    if (!parse(reply, r)) return Error{EPROTO};
    return r;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::destroy_srq(Srq* srq) try {
    if (srq == nullptr || srq->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{srq->handle, 0};
    if (const int rc = destroyed(call(abi::Op::DestroySrq, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    std::lock_guard lock(objects_lock_);
    srqs_.erase(srq->handle);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

// ---- QP ----

Result<Qp*> Connection::create_qp(Pd* pd, const QpInitAttr& attr) try {
    if (pd == nullptr || pd->connection != this || attr.send_cq == nullptr || attr.recv_cq == nullptr ||
        attr.send_cq->connection != this || attr.recv_cq->connection != this ||
        (attr.srq != nullptr && attr.srq->connection != this))
        return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    abi::CreateQpRequest req{};
    req.qp_type = attr.qp_type;
    req.pd = pd->handle;
    req.send_cq = attr.send_cq->handle;
    req.recv_cq = attr.recv_cq->handle;
    req.srq = attr.srq != nullptr ? attr.srq->handle : 0;
    req.sq_sig_all = attr.sq_sig_all ? 1 : 0;
    req.cap = attr.cap;
    std::vector<uint8_t> reply;
    std::vector<int> fds;
    if (const int rc = call(abi::Op::CreateQp, bytes_of(req), {}, &reply, &fds); rc != 0) return Error{rc};
    abi::CreateQpReply r{};
    auto qp = std::make_unique<Qp>();
    const bool has_rq = attr.srq == nullptr;
    bool sane = parse(reply, r) && fds.size() == 1 && r.doorbell < abi::kDoorbellSlots &&
                abi::is_power_of_two(r.sq_size) && r.sq_size >= r.cap.max_send_wr &&
                r.sq_stride >= abi::send_stride(r.cap.max_send_sge, 0) &&
                r.sq_stride >= abi::kSendWqeHeader + r.cap.max_inline_data &&
                r.ring_bytes >= abi::ring_bytes(r.sq_size, r.sq_stride);
    if (sane && has_rq)
        sane = abi::is_power_of_two(r.rq_size) && r.rq_size >= r.cap.max_recv_wr &&
               r.rq_stride >= abi::recv_stride(r.cap.max_recv_sge) && r.rq_offset % page_size() == 0 &&
               r.rq_offset >= abi::ring_bytes(r.sq_size, r.sq_stride) &&
               uint64_t{r.rq_offset} + abi::ring_bytes(r.rq_size, r.rq_stride) <= r.ring_bytes;
    int rc = 0;
    if (!sane) {
        detail::close_all(fds);
        rc = EPROTO;
    } else {
        rc = map_ring(fds[0], r.ring_bytes, qp->memory);
    }
    if (rc != 0) {
        const abi::HandleRequest d{r.qpn, 0};
        if (r.qpn != 0) call(abi::Op::DestroyQp, bytes_of(d), {}, nullptr, nullptr);
        return Error{rc};
    }
    qp->connection = this;
    qp->pd = pd;
    qp->qpn = r.qpn;
    qp->qp_type = attr.qp_type;
    qp->send_cq = attr.send_cq;
    qp->recv_cq = attr.recv_cq;
    qp->srq = attr.srq;
    qp->sq_sig_all = attr.sq_sig_all;
    qp->cap = r.cap;
    qp->doorbell = r.doorbell;
    qp->state.store(verbs::kQpsReset);
    qp->sq.ring = abi::RingView(qp->memory.base, r.sq_size, r.sq_stride);
    qp->sq.max_wr = r.cap.max_send_wr;
    qp->sq.max_sge = r.cap.max_send_sge;
    qp->sq.max_inline = r.cap.max_inline_data;
    if (has_rq) {
        qp->rq.ring = abi::RingView(static_cast<uint8_t*>(qp->memory.base) + r.rq_offset, r.rq_size, r.rq_stride);
        qp->rq.max_wr = r.cap.max_recv_wr;
        qp->rq.max_sge = r.cap.max_recv_sge;
    }
    Qp* raw = qp.get();
    {
        std::lock_guard cl(attr.send_cq->lock);
        attr.send_cq->qps[r.qpn] = raw;
    }
    if (attr.recv_cq != attr.send_cq) {
        std::lock_guard cl(attr.recv_cq->lock);
        attr.recv_cq->qps[r.qpn] = raw;
    }
    std::lock_guard lock(objects_lock_);
    qps_[r.qpn] = std::move(qp);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::modify_qp(Qp* qp, const abi::QpAttr& attr, uint32_t attr_mask) try {
    if (qp == nullptr || qp->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    abi::ModifyQpRequest req{};
    req.qpn = qp->qpn;
    req.attr_mask = attr_mask;
    req.attr = attr;
    if (const int rc = call(abi::Op::ModifyQp, bytes_of(req), {}, nullptr, nullptr); rc != 0) return rc;
    if ((attr_mask & verbs::kQpState) != 0) {
        qp->state.store(attr.qp_state, std::memory_order_release);
        if (attr.qp_state == verbs::kQpsReset) {
            // The daemon zeroed both rings' indices; start over with it.
            std::scoped_lock ql(qp->sq.lock, qp->rq.lock);
            qp->sq.produced.store(0, std::memory_order_relaxed);
            qp->sq.retired.store(0, std::memory_order_release);
            qp->rq.produced.store(0, std::memory_order_relaxed);
            qp->rq.retired.store(0, std::memory_order_release);
        }
    }
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

Result<abi::QueryQpReply> Connection::query_qp(Qp* qp, uint32_t attr_mask) try {
    if (qp == nullptr || qp->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    const abi::QueryQpRequest req{qp->qpn, attr_mask};
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::QueryQp, bytes_of(req), {}, &reply, nullptr); rc != 0) return Error{rc};
    abi::QueryQpReply r{};
    if (!parse(reply, r)) return Error{EPROTO};
    qp->state.store(r.attr.qp_state, std::memory_order_release);
    return r;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::destroy_qp(Qp* qp) try {
    if (qp == nullptr || qp->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{qp->qpn, 0};
    if (const int rc = destroyed(call(abi::Op::DestroyQp, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    {
        std::lock_guard cl(qp->send_cq->lock);
        qp->send_cq->qps.erase(qp->qpn);
    }
    if (qp->recv_cq != qp->send_cq) {
        std::lock_guard cl(qp->recv_cq->lock);
        qp->recv_cq->qps.erase(qp->qpn);
    }
    std::lock_guard lock(objects_lock_);
    qps_.erase(qp->qpn);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

// ---- AH ----

Result<Ah*> Connection::create_ah(Pd* pd, const abi::AddressVector& av) try {
    if (pd == nullptr || pd->connection != this) return Error{EINVAL};
    std::lock_guard v(verbs_lock_);
    abi::CreateAhRequest req{};
    req.pd = pd->handle;
    req.av = av;
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::CreateAh, bytes_of(req), {}, &reply, nullptr); rc != 0) return Error{rc};
    abi::HandleReply r{};
    if (!parse(reply, r)) return Error{EPROTO};
    auto ah = std::make_unique<Ah>(Ah{this, pd, r.handle});
    Ah* raw = ah.get();
    std::lock_guard lock(objects_lock_);
    ahs_[r.handle] = std::move(ah);
    return raw;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::destroy_ah(Ah* ah) try {
    if (ah == nullptr || ah->connection != this) return EINVAL;
    std::lock_guard v(verbs_lock_);
    const abi::HandleRequest req{ah->handle, 0};
    if (const int rc = destroyed(call(abi::Op::DestroyAh, bytes_of(req), {}, nullptr, nullptr), *this); rc != 0)
        return rc;
    std::lock_guard lock(objects_lock_);
    ahs_.erase(ah->handle);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

}  // namespace rnic::host::client
