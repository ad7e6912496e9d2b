// When the poll loop sleeps. Spinning while frames flow costs a core but nothing in latency;
// an idle daemon should cost almost nothing. So: spin for a while after the last work, then
// sleep in growing steps up to a cap, never past the engine's next timer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace rnic::daemon {

class IdlePolicy {
public:
    struct Config {
        bool busy_poll = false;
        uint64_t spin_ns = 1'000'000;    // keep spinning this long after the last frame
        uint64_t min_sleep_ns = 16'000;  // first sleep; doubles while idle
        uint64_t max_sleep_ns = 1'000'000;
    };
    explicit IdlePolicy(Config config) : config_(config), next_sleep_(config.min_sleep_ns) {}

    // Nanoseconds to sleep before the next poll; 0 = poll again at once.
    uint64_t after_poll(size_t work, uint64_t now_ns, std::optional<uint64_t> deadline_ns) {
        if (work > 0) {
            last_work_ = now_ns;
            next_sleep_ = config_.min_sleep_ns;
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

private:
    Config config_;
    uint64_t next_sleep_;
    uint64_t last_work_ = 0;
};

}  // namespace rnic::daemon
