// An in-memory port for tests: frames injected are received, frames sent are kept.
#pragma once

#include <deque>
#include <vector>

#include "rnic/port/port_io.hpp"

namespace rnic::port {

class FakePort final : public PortIo, private transport::FrameSink {
public:
    explicit FakePort(wire::MacAddr mac, size_t buffer_size = 9216) : mac_(mac), buffer_size_(buffer_size) {}

    void inject(std::vector<uint8_t> frame) { incoming_.push_back(std::move(frame)); }
    std::vector<std::vector<uint8_t>>& sent() noexcept { return sent_; }
    size_t queued_tx() const noexcept { return staged_.size(); }
    void set_tx_buffers(size_t n) noexcept { tx_buffers_ = n; }  // simulate an empty pool

    wire::MacAddr mac() const override { return mac_; }
    size_t rx_burst(std::span<RxFrame> out) override;
    void release_rx() override { in_flight_.clear(); }
    transport::FrameSink& tx() override { return *this; }
    std::span<const uint8_t> last_committed() const override;
    size_t flush_tx() override;
    PortStats stats() const override { return stats_; }

private:
    std::span<uint8_t> allocate(size_t length) override;
    void commit(size_t length) override;

    wire::MacAddr mac_;
    size_t buffer_size_;
    size_t tx_buffers_ = SIZE_MAX;
    std::deque<std::vector<uint8_t>> incoming_;
    std::vector<std::vector<uint8_t>> in_flight_;
    std::vector<uint8_t> scratch_;
    std::vector<std::vector<uint8_t>> staged_;
    std::vector<std::vector<uint8_t>> sent_;
    PortStats stats_;
};

}  // namespace rnic::port
