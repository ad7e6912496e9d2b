// Per-packet warnings are rate-limited: a flood of bad frames must not become a flood of log
// lines (or a disk full). A token bucket per message kind; what was suppressed is reported
// with the next line that gets through.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rnic::daemon {

class RateLimit {
public:
    explicit RateLimit(uint32_t per_second = 5, uint32_t burst = 10)
        : interval_ns_(1'000'000'000ull / std::max<uint32_t>(per_second, 1)), burst_(burst), tokens_(burst) {}

    // True if a line may be logged now; suppressed() then tells how many were held back.
    bool allow(uint64_t now_ns) {
        if (now_ns > last_ns_) {
            const uint64_t earned = (now_ns - last_ns_) / interval_ns_;
            if (earned > 0) {
                tokens_ = static_cast<uint32_t>(std::min<uint64_t>(burst_, tokens_ + earned));
                last_ns_ += earned * interval_ns_;
            }
        }
        if (tokens_ == 0) {
            ++suppressed_;
            return false;
        }
        --tokens_;
        reported_ = suppressed_;
        suppressed_ = 0;
        return true;
    }
    uint64_t suppressed() const noexcept { return reported_; }

private:
    uint64_t interval_ns_;
    uint32_t burst_;
    uint32_t tokens_;
    uint64_t last_ns_ = 0;
    uint64_t suppressed_ = 0;
    uint64_t reported_ = 0;
};

}  // namespace rnic::daemon
