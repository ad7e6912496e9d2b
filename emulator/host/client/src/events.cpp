// Completion events (channels) and asynchronous events: sockets the daemon writes a byte to
// ("look"), counters and a ring in shared memory that say what happened.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/verbs_values.hpp"
#include "socket_io.hpp"

namespace rnic::host::client {

int Connection::wait_event_fd(int fd) noexcept {
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return errno;
    const bool nonblocking = (flags & O_NONBLOCK) != 0;
    pollfd p[2] = {{fd, POLLIN, 0}, {socket_, POLLRDHUP, 0}};
    const int n = poll(p, dead() ? 1 : 2, nonblocking ? 0 : -1);
    if (n < 0) return errno;  // EINTR too: ibv_get_cq_event's read() would fail the same way
    if (!dead() && (p[1].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) mark_dead();
    if ((p[0].revents & POLLIN) != 0) {
        detail::drain(fd);
        return 0;
    }
    return n == 0 ? EAGAIN : 0;
}

void Connection::settle_event_fd(int fd, int wake_fd, bool more) noexcept {
    if (more) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 0) != 1 || (p.revents & POLLIN) == 0) detail::send_byte(wake_fd);
        return;
    }
    detail::drain(fd);
}

bool Connection::channel_has_events(const CompChannel* channel) const noexcept {
    return std::any_of(channel->cqs.begin(), channel->cqs.end(), [](const Cq* cq) {
        return cq->death_event_pending || cq->ring.header().events.load(std::memory_order_acquire) != cq->events_seen;
    });
}

int Connection::req_notify_cq(Cq* cq, bool solicited_only) noexcept {
    if (dead()) return EIO;
    // Under the CQ's lock: a resize swaps the ring under it (an arm in the old ring would be lost).
    std::lock_guard lock(cq->lock);
    abi::arm_cq(cq->ring.header(), solicited_only ? abi::kArmSolicited : abi::kArmNext);
    return 0;
}

Result<Cq*> Connection::get_cq_event(CompChannel* channel) try {
    if (channel == nullptr || channel->connection != this) return Error{EINVAL};
    for (;;) {
        Cq* found = nullptr;
        bool more = false;
        {
            std::lock_guard lock(objects_lock_);
            for (Cq* cq : channel->cqs) {
                if (cq->death_event_pending) {
                    cq->death_event_pending = false;
                } else if (cq->ring.header().events.load(std::memory_order_acquire) != cq->events_seen) {
                    ++cq->events_seen;  // one event per call, as the kernel queues them
                } else {
                    continue;
                }
                ++cq->events_delivered;
                found = cq;
                break;
            }
            if (found != nullptr) more = channel_has_events(channel);
        }
        if (found != nullptr) {
            settle_event_fd(channel->fd, channel->wake_fd, more);
            if (!more) {
                // An event that landed between the check and the drain must stay visible.
                std::lock_guard lock(objects_lock_);
                if (channel_has_events(channel)) settle_event_fd(channel->fd, channel->wake_fd, true);
            }
            return found;
        }
        if (dead()) return Error{EIO};
        if (const int rc = wait_event_fd(channel->fd); rc != 0) return Error{rc};
    }
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

void Connection::ack_cq_events(Cq* cq, uint32_t n) try {
    std::lock_guard lock(objects_lock_);
    cq->events_acked += n;
    acked_.notify_all();
} catch (...) {  // nothing to report from a void verb; never let it escape
}

void Connection::resolve(AsyncEvent& e) noexcept {
    using namespace verbs;
    switch (e.event_type) {
        case kEventCqErr:
            if (const auto it = cqs_.find(e.object); it != cqs_.end()) e.cq = it->second.get();
            break;
        case kEventSrqErr:
        case kEventSrqLimitReached:
            if (const auto it = srqs_.find(e.object); it != srqs_.end()) e.srq = it->second.get();
            break;
        case kEventQpFatal:
        case kEventQpReqErr:
        case kEventQpAccessErr:
        case kEventCommEst:
        case kEventSqDrained:
        case kEventPathMig:
        case kEventPathMigErr:
        case kEventQpLastWqeReached:
            if (const auto it = qps_.find(e.object); it != qps_.end()) e.qp = it->second.get();
            break;
        default:
            break;
    }
}

int Connection::get_async_event(AsyncEvent* event) try {
    for (;;) {
        bool got = false;
        bool more = false;
        {
            std::lock_guard lock(objects_lock_);
            const uint32_t ready = async_ring_.ready(async_consumed_);
            if (ready == abi::RingView::kCorrupt) return EIO;
            if (ready != 0) {
                abi::AsyncEventEntry entry;
                std::memcpy(&entry, async_ring_.entry(async_consumed_), sizeof entry);
                async_ring_.release(++async_consumed_);
                *event = AsyncEvent{entry.event_type, entry.object};
                resolve(*event);
                if (entry.event_type == verbs::kEventDeviceFatal) fatal_delivered_ = true;
                got = true;
                more = ready > 1 || (dead() && !fatal_delivered_);
            } else if (dead() && !fatal_delivered_) {
                // The daemon vanished without saying so: tell the application as a dying HCA would.
                fatal_delivered_ = true;
                *event = AsyncEvent{verbs::kEventDeviceFatal, 1};
                got = true;
            }
        }
        if (got) {
            settle_event_fd(async_fd_, async_wake_fd_, more);
            if (!more) {
                std::lock_guard lock(objects_lock_);
                if (async_ring_.ready(async_consumed_) != 0) settle_event_fd(async_fd_, async_wake_fd_, true);
            }
            return 0;
        }
        if (dead()) return EIO;
        if (const int rc = wait_event_fd(async_fd_); rc != 0) return rc;
    }
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

}  // namespace rnic::host::client
