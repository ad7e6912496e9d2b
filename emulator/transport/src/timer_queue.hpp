// The engine's timers (ACK timeouts, RNR waits): the indexed heap shared with the CM
// (rnic/common/timer_queue.hpp).
#pragma once

#include "rnic/common/timer_queue.hpp"

namespace rnic::transport {

using common::Timer;
using common::TimerQueue;

}  // namespace rnic::transport
