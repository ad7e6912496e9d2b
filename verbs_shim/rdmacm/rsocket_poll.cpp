// rpoll and rselect over rsockets and ordinary descriptors together. An rsocket is ready by
// its own state (data read, room to send, credits, a connect that finished); to sleep, rpoll
// waits in poll() on what can change that state: a connected socket's completion channel
// (its CQ armed after one last look), a connecting socket's CM channel, a listener's accept
// queue. Busy checks come first for config().polling_time_us, as rdma-core does; a sleep lasts
// at most wake_up_interval_ms before everything is looked at again (what another thread of
// the application consumed in between is then seen).
#include <poll.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <vector>

#include "export.hpp"
#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

using Clock = std::chrono::steady_clock;

bool stream_active(uint32_t s) {
    return (s & st::connected) != 0 || s == st::disconnected || (s & st::error) != 0;
}

// What `rs` reports for `events`; `arm` leaves its CQ armed (so a completion wakes poll()).
// `wait_fd` is what to sleep on when nothing is ready.
short poll_socket(const RsocketPtr& rs, short events, bool arm, int* wait_fd) {
    *wait_fd = -1;
    if (rs->in(st::opening)) {
        std::unique_lock lock(rs->cm_mu);
        if (connect_step(rs) != 0 && errno == EINPROGRESS) {
            *wait_fd = rs->index;  // the CM channel
            return 0;
        }
    }
    const uint32_t s = rs->state_now();
    if (stream_active(s) && rs->cm_id->qp != nullptr) {
        std::unique_lock lock(rs->mu);
        update_credits(*rs);
        poll_cq(*rs);
        if (arm && !rs->cq_armed) {
            ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
            rs->cq_armed = true;
            update_credits(*rs);
            poll_cq(*rs);
        }
        short revents = 0;
        if ((events & POLLIN) != 0 && conn_have_rdata(*rs)) revents |= POLLIN;
        if ((events & POLLOUT) != 0 && can_send(*rs)) revents |= POLLOUT;
        // The hang-up is told once the data that came before it is read (rdma-core tells it at
        // once, and rstream -T a, which takes POLLHUP for an error, then fails on its last reads).
        const uint32_t now = rs->state_now();
        if ((now & st::connected) == 0 && !have_rdata(*rs)) revents |= now == st::disconnected ? POLLHUP : POLLERR;
        *wait_fd = rs->cm_id->recv_cq_channel->fd;
        return revents;
    }
    if (s == st::listening) {
        pollfd p{rs->accept_queue[0], events, 0};
        (void)poll(&p, 1, 0);
        *wait_fd = rs->accept_queue[0];
        return p.revents;
    }
    if (s == st::connect_error) return static_cast<short>((events & (POLLIN | POLLOUT)) | POLLERR);
    return 0;
}

// A plain descriptor's readiness now.
short poll_plain(const pollfd& f) {
    pollfd p{f.fd, f.events, 0};
    return poll(&p, 1, 0) > 0 ? p.revents : 0;
}

// One pass over everything: the number ready. With `sleep`, fills `wait` for poll().
int check(pollfd* fds, nfds_t nfds, const std::vector<RsocketPtr>& socks, bool arm, std::vector<pollfd>* wait) {
    int ready = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
        int wait_fd = fds[i].fd;
        short wait_events = fds[i].events;
        if (socks[i] != nullptr) {
            fds[i].revents = poll_socket(socks[i], fds[i].events, arm, &wait_fd);
            wait_events = POLLIN;
        } else {
            fds[i].revents = fds[i].fd >= 0 ? poll_plain(fds[i]) : 0;
        }
        if (fds[i].revents != 0) ++ready;
        if (wait != nullptr) (*wait)[i] = pollfd{wait_fd, wait_events, 0};
    }
    return ready;
}

}  // namespace

}  // namespace rnic::rdmacm::rsock

using namespace rnic::rdmacm::rsock;

RNIC_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
    if (fds == nullptr && nfds != 0) return fail(EFAULT);
    std::vector<RsocketPtr> socks(nfds);
    for (nfds_t i = 0; i < nfds; ++i) socks[i] = fds[i].fd >= 0 ? find(fds[i].fd) : nullptr;
    const auto start = Clock::now();
    const auto spin_end = start + std::chrono::microseconds(config().polling_time_us);
    for (;;) {
        const int ready = check(fds, nfds, socks, false, nullptr);
        if (ready != 0 || timeout == 0) return ready;
        if (Clock::now() >= spin_end) break;
    }
    std::vector<pollfd> wait(nfds);
    for (;;) {
        const int ready = check(fds, nfds, socks, true, &wait);
        if (ready != 0) return ready;
        int sleep_ms = config().wake_up_interval_ms;
        if (timeout > 0) {
            const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
            if (spent >= timeout) return 0;
            sleep_ms = static_cast<int>(std::min<int64_t>(timeout - spent, sleep_ms));
        }
        const int n = poll(wait.data(), nfds, sleep_ms);
        if (n < 0) return -1;
        // A socket's completion event is taken here; check() then looks at what it brought.
        for (nfds_t i = 0; i < nfds; ++i) {
            if (socks[i] == nullptr || wait[i].revents == 0) continue;
            RsocketPtr& rs = socks[i];
            if (rs->cm_id != nullptr && rs->cm_id->recv_cq_channel != nullptr &&
                wait[i].fd == rs->cm_id->recv_cq_channel->fd) {
                std::lock_guard lock(rs->mu);
                take_cq_event(*rs);
                wake_waiters(*rs);
            }
        }
    }
}

RNIC_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
    if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
        short events = 0;
        const bool in_r = readfds != nullptr && FD_ISSET(fd, readfds);
        const bool in_w = writefds != nullptr && FD_ISSET(fd, writefds);
        const bool in_e = exceptfds != nullptr && FD_ISSET(fd, exceptfds);
        if (in_r) events |= POLLIN;
        if (in_w) events |= POLLOUT;
        if (in_r || in_w || in_e) fds.push_back(pollfd{fd, events, 0});
    }
    int ms = -1;
    if (timeout != nullptr) {
        if (timeout->tv_sec < 0 || timeout->tv_usec < 0) return fail(EINVAL);
        ms = static_cast<int>(std::min<int64_t>(int64_t{timeout->tv_sec} * 1000 + timeout->tv_usec / 1000, INT_MAX));
    }
    const int ret = rpoll(fds.data(), fds.size(), ms);
    if (readfds != nullptr) FD_ZERO(readfds);
    if (writefds != nullptr) FD_ZERO(writefds);
    if (exceptfds != nullptr) FD_ZERO(exceptfds);
    if (ret <= 0) return ret;
    int count = 0;
    for (const pollfd& f : fds) {
        if (readfds != nullptr && (f.revents & (POLLIN | POLLHUP)) != 0) {
            FD_SET(f.fd, readfds);
            ++count;
        }
        if (writefds != nullptr && (f.revents & POLLOUT) != 0) {
            FD_SET(f.fd, writefds);
            ++count;
        }
        if (exceptfds != nullptr && (f.revents & ~(POLLIN | POLLOUT)) != 0) {
            FD_SET(f.fd, exceptfds);
            ++count;
        }
    }
    return count;
}
