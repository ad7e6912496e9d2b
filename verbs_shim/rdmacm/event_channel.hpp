// rdma_event_channel: one descriptor for the application, whatever devices its ids are on.
//
// rnicd gives each of its channels a socket that is readable while events wait there; ids on
// several devices report to several daemons. The application's `fd` is an epoll descriptor over
// the channel's socket on each device it uses plus an eventfd of ours, so poll/epoll/select on it
// and O_NONBLOCK set with fcntl work as on the kernel's rdma_cm file, and a daemon that dies
// hangs up its socket, which wakes a waiting application (DEVICE_REMOVAL) instead of leaving it
// asleep. Events are fetched from the daemons into a queue here, in order per device; the
// eventfd is readable while that queue holds events, so the descriptor is readable exactly
// while rdma_get_cm_event has something to return.
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "cm_objects.hpp"

namespace rnic::rdmacm {

class Channel {
public:
    rdma_event_channel pub{};  // the application holds &pub; pub.fd is the epoll descriptor

    static Channel* of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }
    // 0, or what the descriptors' creation says. (Whether devices exist is the caller's
    // question: librdmacm asks it first.)
    static int create(Channel** out);
    // rdma_destroy_event_channel. A thread may still wait in rdma_get_cm_event on it (rping's
    // event thread does while its main thread tears down): as a read blocked on the kernel's
    // rdma_cm file stays blocked after another thread closes it, that thread is left waiting on
    // an epoll set emptied of everything that could wake it, and the last such thread to leave
    // frees the channel; none touches freed memory.
    static void destroy(Channel* c);
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;

    // Bracket a call that may wait on the channel (rdma_get_cm_event). enter() is false for a
    // destroyed channel; leave() may free it.
    bool enter();
    void leave();

    // The channel's handle on `dev`, made by the daemon on first use. ENODEV once that device
    // is gone.
    int member(CmDevice& dev, uint32_t* handle);
    // The oldest event, fetched from the daemons if none is queued here; EAGAIN when none.
    int take(RawEvent& out);
    // Waits until the descriptor is readable (EINTR is retried: the kernel restarts its read).
    int wait_readable();
    bool nonblocking() const;
    // The queued events `select` picks, taken out in order (purging a destroyed id, moving a
    // migrated id's events along with it).
    std::vector<RawEvent> extract(const std::function<bool(const RawEvent&)>& select);
    std::vector<RawEvent> extract_locked(const std::function<bool(const RawEvent&)>& select);
    void insert_locked(std::vector<RawEvent> events);
    // An event the library makes (DEVICE_REMOVAL of an id whose daemon is gone).
    void post(RawEvent event);

    // Held by rdma_migrate_id around moving an id between two channels (both, lower address
    // first), so neither fetches meanwhile.
    std::mutex& lock() { return lock_; }

private:
    struct Member {
        CmDevice* dev = nullptr;
        uint32_t handle = 0;
        int fd = -1;
        bool gone = false;
    };

    Channel() = default;
    ~Channel();
    // Lets go of everything but the epoll descriptor a waiter may still poll.
    void release_locked();
    void fetch_locked(Member& m);
    void gone_locked(Member& m);
    void settle_locked();

    int event_fd_ = -1;
    bool signalled_ = false;
    bool more_ = false;  // a fetch stopped at its bound: the daemon may hold more
    bool destroyed_ = false;
    int users_ = 0;  // threads between enter() and leave()
    std::mutex lock_;
    std::deque<RawEvent> queue_;
    std::vector<Member> members_;
};

}  // namespace rnic::rdmacm
