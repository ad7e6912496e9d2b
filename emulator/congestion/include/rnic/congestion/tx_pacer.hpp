// Spaces one QP's frames so it never sends faster than its current rate: the next frame may
// leave once the last one's wire time at the current rate has passed since it left. The gap is
// worked out at the rate in force when it is asked for, not when the last frame left: a QP
// that sent one frame at rp_min_rate (4 KB at 1 Mb/s is 33 ms) and then recovered must not
// stay silent for the old gap, as a NIC's rate limiter applies a new rate at once. An idle QP
// does not bank credit (a rate-limited sender that paused may not burst), as NICs' per-QP rate
// limiters behave.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rnic::cc {

class TxPacer {
public:
    uint64_t earliest_departure_ns(uint64_t rate_kbps) const noexcept {
        if (last_bytes_ == 0) return 0;
        // bits / (kbit/s) = ms; * 1e6 = ns. rate_kbps >= 1000 (rp_min_rate >= 1 Mb/s).
        return last_start_ns_ + last_bytes_ * 8'000'000ull / std::max<uint64_t>(rate_kbps, 1);
    }
    bool may_send(uint64_t now_ns, uint64_t rate_kbps) const noexcept {
        return now_ns >= earliest_departure_ns(rate_kbps);
    }

    void on_sent(uint64_t frame_bytes, uint64_t now_ns, uint64_t rate_kbps) noexcept {
        last_start_ns_ = std::max(now_ns, earliest_departure_ns(rate_kbps));
        last_bytes_ = frame_bytes;
    }
    void reset() noexcept { last_start_ns_ = last_bytes_ = 0; }

private:
    uint64_t last_start_ns_ = 0;  // when the last frame was allowed to leave
    uint64_t last_bytes_ = 0;
};

}  // namespace rnic::cc
