// An in-memory port for tests: frames injected are received, frames sent are kept. Its RX
// wake-up is an eventfd that inject() signals, so the loop's sleeping is tested as rnicd runs it;
// inject() may be called from another thread (a frame arriving while the loop sleeps).
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "rnic/port/port_io.hpp"

namespace rnic::port {

class FakePort final : public PortIo, private common::FrameSink {
public:
    explicit FakePort(wire::MacAddr mac, size_t buffer_size = 9216);
    ~FakePort() override;
    FakePort(const FakePort&) = delete;
    FakePort& operator=(const FakePort&) = delete;

    void inject(std::vector<uint8_t> frame);
    // A frame whose wake-up is lost (a driver bug the loop's nap cap must bound).
    void inject_without_wakeup(std::vector<uint8_t> frame);
    // A port that cannot wake the loop: rx_wait_fd() is -1, naps are timed.
    void disable_rx_wakeup() noexcept { wake_enabled_ = false; }
    // Runs inside arm_rx_wait() before the old wake-ups are cleared: a frame injected there
    // arrived before the arming, and only the loop's last look can find it.
    void on_arm(std::function<void()> hook) { on_arm_ = std::move(hook); }
    std::vector<std::vector<uint8_t>>& sent() noexcept { return sent_; }
    size_t queued_tx() const noexcept { return staged_.size(); }
    void set_tx_buffers(size_t n) noexcept { tx_buffers_ = n; }  // simulate an empty pool

    wire::MacAddr mac() const override { return mac_; }
    size_t rx_burst(std::span<RxFrame> out) override;
    void release_rx() override { in_flight_.clear(); }
    common::FrameSink& tx() override { return *this; }
    std::span<const uint8_t> last_committed() const override;
    size_t flush_tx() override;
    PortStats stats() const override { return stats_; }
    int rx_wait_fd() const override { return wake_enabled_ ? wake_fd_ : -1; }
    void arm_rx_wait() override;
    void rx_wait_done() override { ++wait_done_; }

    uint64_t arms() const noexcept { return arms_; }
    uint64_t waits_done() const noexcept { return wait_done_; }

private:
    std::span<uint8_t> allocate(size_t length) override;
    void commit(size_t length) override;

    wire::MacAddr mac_;
    size_t buffer_size_;
    size_t tx_buffers_ = SIZE_MAX;
    int wake_fd_ = -1;
    bool wake_enabled_ = true;
    std::function<void()> on_arm_;
    uint64_t arms_ = 0;
    uint64_t wait_done_ = 0;
    std::mutex incoming_lock_;
    std::deque<std::vector<uint8_t>> incoming_;
    std::vector<std::vector<uint8_t>> in_flight_;
    std::vector<uint8_t> scratch_;
    std::vector<std::vector<uint8_t>> staged_;
    std::vector<std::vector<uint8_t>> sent_;
    PortStats stats_;
};

}  // namespace rnic::port
