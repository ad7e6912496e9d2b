#include "rnic/port/fake_port.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

namespace rnic::port {

FakePort::FakePort(wire::MacAddr mac, size_t buffer_size) : mac_(mac), buffer_size_(buffer_size) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw std::runtime_error("FakePort: eventfd failed");
}

FakePort::~FakePort() { close(wake_fd_); }

void FakePort::inject(std::vector<uint8_t> frame) {
    {
        std::lock_guard lock(incoming_lock_);
        incoming_.push_back(std::move(frame));
    }
    // After the frame is queued, as a driver's ring holds a frame before its wake-up fires.
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
}

void FakePort::inject_without_wakeup(std::vector<uint8_t> frame) {
    std::lock_guard lock(incoming_lock_);
    incoming_.push_back(std::move(frame));
}

void FakePort::arm_rx_wait() {
    ++arms_;
    if (on_arm_) on_arm_();
    uint64_t v;
    (void)!read(wake_fd_, &v, sizeof v);
}

size_t FakePort::rx_burst(std::span<RxFrame> out) {
    in_flight_.clear();
    size_t n = 0;
    {
        std::lock_guard lock(incoming_lock_);
        while (n < out.size() && !incoming_.empty()) {
            in_flight_.push_back(std::move(incoming_.front()));
            incoming_.pop_front();
            ++n;
        }
    }
    stats_.rx_bursts += n != 0;
    // Spans are taken after the vector stops growing so none dangles.
    for (size_t i = 0; i < n; ++i) {
        out[i] = in_flight_[i];
        ++stats_.rx_frames;
        stats_.rx_bytes += in_flight_[i].size();
    }
    return n;
}

std::span<uint8_t> FakePort::allocate(size_t length) {
    if (length > buffer_size_ || staged_.size() >= tx_buffers_) {
        ++stats_.tx_no_buffer;
        return {};
    }
    scratch_.assign(length, 0);
    return scratch_;
}

void FakePort::commit(size_t length) {
    scratch_.resize(length);
    staged_.push_back(std::move(scratch_));
    scratch_.clear();
}

std::span<const uint8_t> FakePort::last_committed() const {
    if (staged_.empty()) return {};
    return staged_.back();
}

size_t FakePort::flush_tx() {
    const size_t n = staged_.size();
    stats_.tx_bursts += n != 0;
    for (auto& f : staged_) {
        ++stats_.tx_frames;
        stats_.tx_bytes += f.size();
        sent_.push_back(std::move(f));
    }
    staged_.clear();
    return n;
}

}  // namespace rnic::port
