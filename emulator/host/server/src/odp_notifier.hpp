// How an ODP worker tells the poll loop that a copy it stopped waiting for is done, so the QPs
// parked on it try again (transport::Engine::odp_resume): a counter the loop reads every turn,
// and an eventfd that ends its nap. Shared by the service and its workers (a worker whose copy
// is stuck in a client's page fault may outlive the session, and then only bumps the counter).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace rnic::host::server {

class OdpNotifier {
public:
    OdpNotifier() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    ~OdpNotifier() {
        if (fd_ >= 0) ::close(fd_);
    }
    OdpNotifier(const OdpNotifier&) = delete;
    OdpNotifier& operator=(const OdpNotifier&) = delete;

    // From a worker thread.
    void notify() noexcept {
        news_.store(true, std::memory_order_release);
        const uint64_t one = 1;
        if (fd_ >= 0) (void)!::write(fd_, &one, sizeof one);
    }
    // From the poll loop: was there news since the last call?
    bool take() noexcept {
        return news_.load(std::memory_order_relaxed) && news_.exchange(false, std::memory_order_acq_rel);
    }
    int fd() const noexcept { return fd_; }

private:
    int fd_;
    std::atomic<bool> news_{false};
};

}  // namespace rnic::host::server
