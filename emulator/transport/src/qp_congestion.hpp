// A QP's congestion-control state (docs/congestion.md): the DCQCN reaction point that sets its
// send rate, the notification point that paces the CNPs it sends back, the pacer that spaces its
// requests at that rate, and the two timers that drive them. Lives inside the QP, so nothing is
// allocated when congestion starts.
#pragma once

#include <cstdint>

#include "rnic/congestion/notification_point.hpp"
#include "rnic/congestion/reaction_point.hpp"
#include "rnic/congestion/tx_pacer.hpp"
#include "timer_queue.hpp"

namespace rnic::transport {

struct QpCongestion {
    QpCongestion(const cc::DcqcnParams& params, uint64_t port_rate_mbps) : rp(params, port_rate_mbps) {}

    cc::ReactionPoint rp;
    cc::NotificationPoint np;
    cc::TxPacer pacer;
    Timer rate_timer;  // the reaction point's next event (deferred cut, rate increase)
    Timer pace_timer;  // the earliest departure of the next request while rate-limited
};

}  // namespace rnic::transport
