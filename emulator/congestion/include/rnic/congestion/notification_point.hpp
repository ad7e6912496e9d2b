// The DCQCN notification point of one QP: the receiver answers CE-marked frames with CNPs to
// the sender's QP, at most one per np_min_time_between_cnps (ConnectX's pacing: a marked
// burst costs the sender one cut per period, not one per frame).
#pragma once

#include <cstdint>

#include "rnic/congestion/dcqcn_params.hpp"

namespace rnic::cc {

class NotificationPoint {
public:
    // A CE-marked frame of this QP arrived at now_ns: true when a CNP is to be sent for it.
    bool on_ce_marked(const DcqcnParams& params, uint64_t now_ns) noexcept;

private:
    bool sent_any_ = false;
    uint64_t last_cnp_ns_ = 0;
};

}  // namespace rnic::cc
