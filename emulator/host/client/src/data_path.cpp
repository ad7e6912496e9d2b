// Posting and polling: loads and stores on the shared rings, no syscall except the kick of a
// sleeping daemon and, rarely, a look at whether the daemon is still there.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/verbs_values.hpp"
#include "rnic/host/client/work_queue.hpp"

namespace rnic::host::client {

namespace {

constexpr uint32_t kProbeEveryEmptyPolls = 1024;
constexpr uint64_t kProbeEveryNs = 10'000'000;

uint64_t coarse_now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t monotonic_now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

void Connection::ring_doorbell(uint32_t slot, bool kick) noexcept {
    // Stamped before the bits, so the daemon that takes them also sees the stamp (the fence in
    // ring_doorbell_slot orders the two).
    const bool trace = status_->latency_trace.load(std::memory_order_relaxed) != 0;
    if (trace) doorbells_->doorbell_ns.store(monotonic_now_ns(), std::memory_order_relaxed);
    abi::ring_doorbell_slot(*doorbells_, slot);
    if (!kick) return;
    // Pairs with the daemon's fence between `sleeping = 1` and its last doorbell look.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (status_->sleeping.load(std::memory_order_relaxed) != 0) {
        const int cpu = sched_getcpu();  // the vDSO's: no system call
        doorbells_->kick_cpu.store(cpu < 0 ? UINT32_MAX : static_cast<uint32_t>(cpu), std::memory_order_relaxed);
        if (trace) doorbells_->kick_ns.store(monotonic_now_ns(), std::memory_order_release);
        const uint64_t one = 1;
        (void)!write(kick_fd_, &one, sizeof one);
    }
}

uint32_t Connection::ah_handle(const Ah* ah) const noexcept {
    return ah != nullptr && ah->connection == this ? ah->handle : 0;
}

int Connection::post_send(Qp* qp, const SendWr* wr, const SendWr** bad_wr) noexcept {
    return post_sends(qp, wr, bad_wr, false);
}

int Connection::post_send_all_or_nothing(Qp* qp, const SendWr* wr, const SendWr** bad_wr) noexcept {
    return post_sends(qp, wr, bad_wr, true);
}

int Connection::post_sends(Qp* qp, const SendWr* wr, const SendWr** bad_wr, bool all_or_nothing) noexcept {
    if (dead()) {
        if (bad_wr != nullptr) *bad_wr = wr;
        return EIO;
    }
    std::lock_guard lock(qp->sq.lock);
    const uint32_t before = qp->sq.produced.load(std::memory_order_relaxed);
    int rc = 0;
    for (const SendWr* w = wr; w != nullptr; w = w->next) {
        rc = encode_send(qp->sq, qp->qp_type, *w, ah_handle(w->ah));
        if (rc != 0) {
            if (bad_wr != nullptr) *bad_wr = w;
            break;
        }
    }
    // WQEs written but not yet published are invisible to the daemon: taking the producer
    // index back un-writes them.
    if (rc != 0 && all_or_nothing) qp->sq.produced.store(before, std::memory_order_relaxed);
    if (const uint32_t now = qp->sq.produced.load(std::memory_order_relaxed); now != before) {
        qp->sq.ring.publish(now);
        ring_doorbell(qp->doorbell);
    }
    return rc;
}

namespace {

template <class Post>
int post_receives(WorkQueue& q, const RecvWr* wr, const RecvWr** bad_wr, bool srq, Post&& doorbell) noexcept {
    std::lock_guard lock(q.lock);
    const uint32_t before = q.produced.load(std::memory_order_relaxed);
    int rc = 0;
    for (const RecvWr* w = wr; w != nullptr; w = w->next) {
        rc = encode_recv(q, *w, srq);
        if (rc != 0) {
            if (bad_wr != nullptr) *bad_wr = w;
            break;
        }
    }
    if (const uint32_t now = q.produced.load(std::memory_order_relaxed); now != before) {
        q.ring.publish(now);
        doorbell();
    }
    return rc;
}

}  // namespace

int Connection::post_recv(Qp* qp, const RecvWr* wr, const RecvWr** bad_wr) noexcept {
    if (dead() || qp->srq != nullptr) {
        if (bad_wr != nullptr) *bad_wr = wr;
        return dead() ? EIO : EINVAL;  // a QP with an SRQ has no RQ
    }
    // A sleeping daemon is kicked only when this RQ had nothing outstanding: receive WQEs are
    // consumed by arriving frames alone, an arriving frame wakes the daemon, and its turn reads
    // the queues whose doorbell bits are set before the frame. So while the engine still holds a
    // receive for this QP, new ones can wait for that wake-up (the bit is set all the same); a
    // kick per post would cost the application a syscall and
    // the daemon a wake-up for nothing (ib_send_bw's server reposts after every completion).
    // The one delay: receives posted to a QP that went to ERR meanwhile are flushed at the
    // daemon's next wake-up (at most its nap cap) instead of at once.
    const bool engine_has_one =
        qp->rq.produced.load(std::memory_order_relaxed) != qp->rq.retired.load(std::memory_order_acquire);
    return post_receives(qp->rq, wr, bad_wr, false,
                         [this, qp, engine_has_one] { ring_doorbell(qp->doorbell, !engine_has_one); });
}

int Connection::post_srq_recv(Srq* srq, const RecvWr* wr, const RecvWr** bad_wr) noexcept {
    if (dead()) {
        if (bad_wr != nullptr) *bad_wr = wr;
        return EIO;
    }
    return post_receives(srq->wq, wr, bad_wr, true, [this, srq] { ring_doorbell(srq->doorbell); });
}

int Connection::poll_cq(Cq* cq, int n, abi::Cqe* out) noexcept {
    if (n <= 0) return 0;
    std::lock_guard lock(cq->lock);
    const uint32_t ready = cq->ring.ready(cq->consumed);
    if (ready == abi::RingView::kCorrupt) return -EIO;
    const uint32_t take = std::min<uint32_t>(ready, static_cast<uint32_t>(n));
    for (uint32_t i = 0; i < take; ++i) {
        abi::Cqe& c = out[i];
        std::memcpy(&c, cq->ring.entry(cq->consumed++), sizeof c);
        const auto it = cq->qps.find(c.qp_num);
        if (it == cq->qps.end()) continue;  // a destroyed QP's late completion
        Qp* qp = it->second;
        if ((c.opcode & verbs::kWcRecv) != 0) {
            if (qp->srq == nullptr && qp->recv_cq == cq) retire(qp->rq, c.wqe_index);
        } else if (qp->send_cq == cq) {
            retire(qp->sq, c.wqe_index);
        }
    }
    if (take != 0) cq->ring.release(cq->consumed);
    uint32_t got = take;
    if (got == static_cast<uint32_t>(n)) return n;

    if (!dead()) {
        if (got != 0) return static_cast<int>(got);
        // The watchdog marks the connection dead the moment the daemon hangs up; only without it
        // (a forked child) does an empty poll look for itself, rate-limited.
        if (!needs_probe()) return 0;
        const uint64_t now = coarse_now_ns();
        if (++cq->empty_polls < kProbeEveryEmptyPolls && now - cq->last_probe_ns < kProbeEveryNs) return 0;
        cq->empty_polls = 0;
        cq->last_probe_ns = now;
        if (!probe_dead()) return 0;
    }
    // The daemon is gone: nothing will complete what is still posted, so flush it, as the QP
    // going to the error state would.
    for (auto& [qpn, qp] : cq->qps) {
        if (got == static_cast<uint32_t>(n)) break;
        if (qp->send_cq == cq) {
            std::lock_guard ql(qp->sq.lock);
            got += flush(qp->sq, true, qpn, out + got, static_cast<uint32_t>(n) - got);
        }
        if (qp->srq == nullptr && qp->recv_cq == cq && got < static_cast<uint32_t>(n)) {
            std::lock_guard ql(qp->rq.lock);
            got += flush(qp->rq, false, qpn, out + got, static_cast<uint32_t>(n) - got);
        }
    }
    return static_cast<int>(got);
}

}  // namespace rnic::host::client
