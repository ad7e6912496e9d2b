// Event channels (event_channel.hpp), rdma_create_event_channel, rdma_destroy_event_channel.
#include "event_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "daemon_calls.hpp"
#include "devices.hpp"
#include "export.hpp"

namespace rnic::rdmacm {

namespace {

// Events taken from one daemon in one go before the others get their turn; past it the
// channel stays readable and the next call goes on.
constexpr size_t kFetchMax = 256;

void drain(int fd) {
    uint8_t buf[256];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}

}  // namespace

int Channel::create(Channel** out) try {
    auto* c = new Channel();
    c->pub.fd = epoll_create1(EPOLL_CLOEXEC);
    c->event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = c->event_fd_;
    if (c->pub.fd < 0 || c->event_fd_ < 0 || epoll_ctl(c->pub.fd, EPOLL_CTL_ADD, c->event_fd_, &e) != 0) {
        const int err = errno;
        destroy(c);
        return err;
    }
    *out = c;
    return 0;
} catch (...) {
    return ENOMEM;
}

Channel::~Channel() {
    if (pub.fd >= 0) close(pub.fd);
}

void Channel::release_locked() {
    // Our ends go first, out of the epoll set, so the daemon's closing of its ends wakes nobody.
    for (Member& m : members_) {
        if (m.gone) continue;
        epoll_ctl(pub.fd, EPOLL_CTL_DEL, m.fd, nullptr);
        close(m.fd);
        (void)calls::destroy_channel(*m.dev, m.handle);
    }
    members_.clear();
    // Connection requests nobody took: their ids go, which rejects the peers (as the kernel
    // does for the requests queued on a closed rdma_cm file).
    for (const RawEvent& r : queue_)
        if (r.dev != nullptr && r.target == nullptr && r.ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && !is_dead(*r.dev))
            (void)calls::destroy_id(*r.dev, r.ev.id);
    queue_.clear();
    more_ = false;
    if (event_fd_ >= 0) {
        epoll_ctl(pub.fd, EPOLL_CTL_DEL, event_fd_, nullptr);
        close(event_fd_);
        event_fd_ = -1;
    }
    signalled_ = false;
}

void Channel::destroy(Channel* c) {
    bool last = false;
    {
        std::lock_guard lock(c->lock_);
        c->destroyed_ = true;
        c->release_locked();
        last = c->users_ == 0;
    }
    if (last) delete c;
}

bool Channel::enter() {
    std::lock_guard lock(lock_);
    if (destroyed_) return false;
    ++users_;
    return true;
}

void Channel::leave() {
    bool last = false;
    {
        std::lock_guard lock(lock_);
        last = --users_ == 0 && destroyed_;
    }
    if (last) delete this;
}

int Channel::member(CmDevice& dev, uint32_t* handle) try {
    std::lock_guard lock(lock_);
    for (Member& m : members_) {
        if (m.dev != &dev) continue;
        if (m.gone) return ENODEV;
        *handle = m.handle;
        return 0;
    }
    Member m;
    m.dev = &dev;
    if (const int rc = calls::create_channel(dev, &m.handle, &m.fd); rc != 0) return device_error(rc);
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.fd = m.fd;
    if (epoll_ctl(pub.fd, EPOLL_CTL_ADD, m.fd, &e) != 0) {
        const int err = errno;
        (void)calls::destroy_channel(dev, m.handle);
        close(m.fd);
        return err;
    }
    members_.push_back(m);
    *handle = m.handle;
    return 0;
} catch (...) {
    return ENOMEM;
}

// Drain the socket, then take events until the daemon has none: a byte the daemon sends for a
// later event lands after the drain, so the socket is readable again exactly when it must be.
// Taking events made the daemon send bytes too, hence the second round that ends the loop.
void Channel::fetch_locked(Member& m) try {
    size_t taken = 0;
    for (;;) {
        drain(m.fd);
        size_t round = 0;
        for (;;) {
            RawEvent r;
            r.dev = m.dev;
            const int rc = calls::get_event(*m.dev, m.handle, &r.ev);
            if (rc == EAGAIN) break;
            if (rc == ENOMEM) {
                more_ = true;
                return;
            }
            if (rc != 0) {  // the daemon is gone (EIO), or answers nonsense for our own channel
                gone_locked(m);
                return;
            }
            queue_.push_back(r);
            ++round;
            if (++taken >= kFetchMax) {
                more_ = true;
                return;
            }
        }
        if (round == 0) return;
    }
} catch (...) {  // the queue could not grow: try again on the next call
    more_ = true;
}

void Channel::gone_locked(Member& m) {
    m.gone = true;
    epoll_ctl(pub.fd, EPOLL_CTL_DEL, m.fd, nullptr);
    close(m.fd);
    m.fd = -1;
    mark_dead(*m.dev);
    // Every id of this channel bound to that device gets DEVICE_REMOVAL; an id listening on
    // every device loses that one silently, as the kernel's wildcard listeners do.
    std::lock_guard ids(m.dev->ids_lock);
    for (const auto& [handle, id] : m.dev->ids) {
        if (Channel::of(id->pub.channel) != this || id->device != m.dev) continue;
        RawEvent r;
        r.dev = m.dev;
        r.ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
        r.ev.id = handle;
        r.target = id;
        queue_.push_back(r);
    }
}

void Channel::settle_locked() {
    const bool want = !queue_.empty() || more_;
    if (want == signalled_ || event_fd_ < 0) return;
    if (want) {
        const uint64_t one = 1;
        (void)!write(event_fd_, &one, sizeof one);
    } else {
        uint64_t count;
        (void)!read(event_fd_, &count, sizeof count);
    }
    signalled_ = want;
}

int Channel::take(RawEvent& out) try {
    std::lock_guard lock(lock_);
    // Only the daemons whose socket says something (an event, or a hang-up) are asked, and all
    // of them after a fetch stopped at its bound.
    const bool again = std::exchange(more_, false);
    std::vector<pollfd> fds;
    for (const Member& m : members_)
        if (!m.gone) fds.push_back({m.fd, POLLIN | POLLRDHUP, 0});
    if (!fds.empty() && (poll(fds.data(), fds.size(), 0) > 0 || again)) {
        size_t i = 0;
        for (Member& m : members_) {
            if (m.gone) continue;
            const short revents = fds[i++].revents;
            if ((revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0 || is_dead(*m.dev))
                gone_locked(m);
            else if ((revents & POLLIN) != 0 || again)
                fetch_locked(m);
        }
    }
    int rc = EAGAIN;
    if (!queue_.empty()) {
        out = queue_.front();
        queue_.pop_front();
        rc = 0;
    }
    settle_locked();
    return rc;
} catch (...) {
    return ENOMEM;
}

int Channel::wait_readable() {
    pollfd p{pub.fd, POLLIN, 0};
    for (;;) {
        const int n = poll(&p, 1, -1);
        if (n > 0) return 0;
        if (n < 0 && errno != EINTR) return errno;
    }
}

bool Channel::nonblocking() const {
    const int flags = fcntl(pub.fd, F_GETFL);
    return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

std::vector<RawEvent> Channel::extract(const std::function<bool(const RawEvent&)>& select) {
    std::lock_guard lock(lock_);
    return extract_locked(select);
}

std::vector<RawEvent> Channel::extract_locked(const std::function<bool(const RawEvent&)>& select) {
    std::vector<RawEvent> out;
    std::deque<RawEvent> keep;
    for (RawEvent& r : queue_) (select(r) ? out.push_back(r) : keep.push_back(r));
    queue_.swap(keep);
    settle_locked();
    return out;
}

void Channel::insert_locked(std::vector<RawEvent> events) {
    for (RawEvent& r : events) queue_.push_back(r);
    settle_locked();
}

void Channel::post(RawEvent event) {
    std::lock_guard lock(lock_);
    queue_.push_back(event);
    settle_locked();
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT rdma_event_channel* rdma_create_event_channel() {
    Channel* c = nullptr;
    int rc = init_devices();  // librdmacm's ucma_init: ENODEV without a device
    if (rc == 0) rc = Channel::create(&c);
    if (rc != 0) {
        errno = rc;
        return nullptr;
    }
    return &c->pub;
}

RNIC_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
    if (channel != nullptr) Channel::destroy(Channel::of(channel));
}
