// The one background thread of rsockets (rdma-core runs three: listen, connect, keepalive):
// it takes listeners' connection requests as they come (a connect completes whether or not the
// application is in raccept), watches connected sockets' CM events (a DISCONNECTED or an error
// ends the socket's connection and wakes whoever sleeps on it), and sends keepalives. It polls
// each watched socket's CM channel, whose descriptor is the socket's number; it handles a
// socket under its cm_mu and leaves alone one that rclose has begun closing.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <thread>

#include "rsocket.hpp"

namespace rnic::rdmacm::rsock {

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

class Service {
public:
    ~Service() {
        std::unique_lock lock(mu_);
        if (!thread_.joinable()) return;
        stop_ = true;
        lock.unlock();
        poke();
        thread_.join();
    }

    void watch(const RsocketPtr& rs) {
        std::lock_guard lock(mu_);
        if (std::find(watched_.begin(), watched_.end(), rs) == watched_.end()) watched_.push_back(rs);
        if (wake_fd_ < 0) wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (!thread_.joinable() && wake_fd_ >= 0) thread_ = std::thread([this] { run(); });
        poke();
    }

    void forget(Rsocket& rs) {
        std::lock_guard lock(mu_);
        std::erase_if(watched_, [&](const RsocketPtr& p) { return p.get() == &rs; });
        poke();
    }

    void poke() {
        if (wake_fd_ < 0) return;
        const uint64_t one = 1;
        (void)!write(wake_fd_, &one, sizeof one);
    }

private:
    void run();

    std::mutex mu_;
    std::vector<RsocketPtr, PageAllocator<RsocketPtr>> watched_;
    int wake_fd_ = -1;
    bool stop_ = false;
    std::thread thread_;
};

Service& the_service() {
    static Service s;
    return s;
}

void listener_failed(Rsocket& rs, int error) {
    rs.err.store(error);
    // raccept sleeping on the queue wakes to its end.
    if (rs.accept_queue[1] >= 0) shutdown(rs.accept_queue[1], SHUT_WR);
    the_service().forget(rs);
}

void handle(const RsocketPtr& rs) {
    std::lock_guard lock(rs->cm_mu);
    if (rs->closing.load()) return;
    if (rs->state_now() == st::listening) {
        int rc = 0;
        while ((rc = accept_one(rs)) > 0) {
        }
        if (rc < 0) listener_failed(*rs, errno);
        return;
    }
    handle_cm_event(*rs);
}

void keepalive(Rsocket& rs, int64_t now) {
    const int64_t due = rs.keepalive_due_ms.load();
    if (due == 0 || now < due) return;
    rs.keepalive_due_ms.store(now + int64_t{1000} * rs.keepalive_time.load());
    std::lock_guard lock(rs.mu);
    if (rs.closing.load() || !rs.in(st::connected) || !ctrl_avail(rs)) return;
    ++rs.ctrl_seqno;
    if (post_keepalive(rs) != 0) --rs.ctrl_seqno;
}

void Service::run() {
    std::vector<RsocketPtr, PageAllocator<RsocketPtr>> list;
    std::vector<pollfd> fds;
    for (;;) {
        {
            std::lock_guard lock(mu_);
            if (stop_) return;
            list = watched_;
        }
        fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
        int64_t next = INT64_MAX;
        for (const RsocketPtr& rs : list) {
            fds.push_back(pollfd{rs->index, POLLIN, 0});
            const int64_t due = rs->keepalive_due_ms.load();
            if (due != 0) next = std::min(next, due);
        }
        const int64_t now = now_ms();
        const int timeout = next == INT64_MAX ? -1 : static_cast<int>(std::clamp<int64_t>(next - now, 0, INT_MAX));
        if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) continue;
        if ((fds[0].revents & POLLIN) != 0) {
            uint64_t drained = 0;
            (void)!read(wake_fd_, &drained, sizeof drained);
        }
        for (size_t i = 0; i < list.size(); ++i)
            if (fds[i + 1].revents != 0) handle(list[i]);
        const int64_t later = now_ms();
        for (const RsocketPtr& rs : list) keepalive(*rs, later);
    }
}

}  // namespace

namespace service {

void watch(const RsocketPtr& rs) {
    the_service().watch(rs);
}

void forget(Rsocket& rs) {
    the_service().forget(rs);
}

void keepalive_changed() {
    the_service().poke();
}

}  // namespace service

void mark_down(Rsocket& rs, uint32_t new_state, int error) {
    std::lock_guard lock(rs.mu);
    const uint32_t s = rs.state_now();
    if ((s & st::connected) != 0 || (new_state == st::error && s == st::disconnected)) {
        rs.set_state(new_state);
        if (error != 0) rs.err.store(error);
    }
    // Flushed receives make a completion event: a sleeper in rpoll or rrecv wakes to the news.
    if (rs.cm_id->qp != nullptr) {
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        (void)ibv_modify_qp(rs.cm_id->qp, &attr, IBV_QP_STATE);
    }
    wake_waiters(rs);
}

void handle_cm_event(Rsocket& rs) {
    for (;;) {
        if (cm_complete(rs.cm_id) != 0) {
            if (errno == EAGAIN) return;
            const int error = errno;
            const bool taken = rs.cm_id->event != nullptr;
            mark_down(rs, st::error, error);
            if (!taken) {
                the_service().forget(rs);  // the channel itself failed: nothing more will come
                return;
            }
            continue;
        }
        switch (rs.cm_id->event->event) {
            case RDMA_CM_EVENT_DISCONNECTED:
                mark_down(rs, st::disconnected, 0);
                break;
            case RDMA_CM_EVENT_DEVICE_REMOVAL:
                mark_down(rs, st::error, ENODEV);
                break;
            default:  // ESTABLISHED (a late RTU), TIMEWAIT_EXIT
                break;
        }
    }
}

}  // namespace rnic::rdmacm::rsock
