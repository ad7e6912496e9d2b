#include "rnic/congestion/notification_point.hpp"

namespace rnic::cc {

bool NotificationPoint::on_ce_marked(const DcqcnParams& params, uint64_t now_ns) noexcept {
    const uint64_t gap_ns = uint64_t{params.np_min_time_between_cnps} * 1000;
    if (sent_any_ && now_ns - last_cnp_ns_ < gap_ns) return false;
    sent_any_ = true;
    last_cnp_ns_ = now_ns;
    return true;
}

}  // namespace rnic::cc
