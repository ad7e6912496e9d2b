// Spaces one QP's frames so it never sends faster than its current rate: each frame moves the
// earliest departure of the next by its wire time at that rate. An idle QP does not bank credit
// (a rate-limited sender that paused may not burst), as NICs' per-QP rate limiters behave.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rnic::cc {

class TxPacer {
public:
    uint64_t earliest_departure_ns() const noexcept { return next_ns_; }
    bool may_send(uint64_t now_ns) const noexcept { return now_ns >= next_ns_; }

    void on_sent(uint64_t frame_bytes, uint64_t now_ns, uint64_t rate_kbps) noexcept {
        const uint64_t start = std::max(now_ns, next_ns_);
        // bits / (kbit/s) = ms; * 1e6 = ns. rate_kbps >= 1000 (rp_min_rate >= 1 Mb/s).
        next_ns_ = start + frame_bytes * 8'000'000ull / std::max<uint64_t>(rate_kbps, 1);
    }
    void reset() noexcept { next_ns_ = 0; }

private:
    uint64_t next_ns_ = 0;
};

}  // namespace rnic::cc
