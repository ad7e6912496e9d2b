// When the poll loop sleeps. Spinning right after work catches the next frame or doorbell of a
// burst without a wake-up; beyond a short window it only takes the core from applications (on a
// machine where daemons and applications share the cores, that delays the very answer the loop
// waits for). So: spin for a window after the last work, then sleep, never past the engine's
// next timer. When the port can wake the loop on a frame, a nap costs no latency and goes
// straight to the cap; without one, naps start short and double up to the cap.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace rnic::daemon {

class IdlePolicy {
public:
    struct Config {
        bool busy_poll = false;
        uint64_t spin_ns = 1'000'000;    // keep spinning this long after the last work
        uint64_t min_sleep_ns = 16'000;  // first timed nap; doubles while idle
        uint64_t max_sleep_ns = 1'000'000;
        bool wake_on_rx = false;  // a frame ends a nap (the port has a wake fd)
    };
    explicit IdlePolicy(Config config) : config_(config), next_sleep_(first_sleep()) {}

    const Config& config() const noexcept { return config_; }

    // Nanoseconds to sleep before the next poll; 0 = poll again at once.
    uint64_t after_poll(size_t work, uint64_t now_ns, std::optional<uint64_t> deadline_ns) {
        if (work > 0) {
            note_work(now_ns);
            return 0;
        }
        if (config_.busy_poll || now_ns - last_work_ < config_.spin_ns) return 0;
        uint64_t sleep = next_sleep_;
        next_sleep_ = std::min(next_sleep_ * 2, config_.max_sleep_ns);
        if (deadline_ns) {
            if (*deadline_ns <= now_ns) return 0;
            sleep = std::min(sleep, *deadline_ns - now_ns);
        }
        return sleep;
    }

    // Work found outside after_poll (the last look before a nap): the spin window starts again.
    void note_work(uint64_t now_ns) {
        last_work_ = now_ns;
        next_sleep_ = first_sleep();
    }

private:
    uint64_t first_sleep() const {
        return config_.wake_on_rx ? config_.max_sleep_ns : std::min(config_.min_sleep_ns, config_.max_sleep_ns);
    }

    Config config_;
    uint64_t next_sleep_;
    uint64_t last_work_ = 0;
};

}  // namespace rnic::daemon
