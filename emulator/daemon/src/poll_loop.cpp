#include "poll_loop.hpp"

namespace rnic::daemon {

namespace {

// Frames the wake socket is meant to announce (what the daemon serves); other frames never wake it.
uint64_t served_rx(const Datapath& dp) {
    const auto& c = dp.counters().rx_by_class;
    return c[static_cast<size_t>(port::FrameClass::RoceForUs)] + c[static_cast<size_t>(port::FrameClass::Arp)] +
           c[static_cast<size_t>(port::FrameClass::IcmpForUs)];
}

// Control messages are served between turns while busy (at once while asleep: the nap runs
// inside Asio): every 64 turns or 50 us, whichever comes first.
constexpr uint64_t kControlEveryTurns = 64;
constexpr uint64_t kControlEveryNs = 50'000;

IdlePolicy::Config with_wake(IdlePolicy::Config c, bool wake) {
    c.wake_on_rx = wake;
    return c;
}

}  // namespace

PollLoop::PollLoop(port::PortIo& io, Datapath& dp, host::server::HostService& host, IdlePolicy::Config idle,
                   Clock clock)
    : io_(io),
      dp_(dp),
      host_(host),
      clock_(clock),
      wake_on_rx_(!idle.busy_poll && io.rx_wait_fd() >= 0),
      idle_(with_wake(idle, wake_on_rx_)) {
    if (wake_on_rx_) host_.set_wake_fd(io_.rx_wait_fd());
}

void PollLoop::turn() {
    const uint64_t now = clock_();
    size_t work = host_.poll(now);
    work += dp_.poll(now);
    if (check_rx_after_timeout_) {
        check_rx_after_timeout_ = false;
        if (served_rx(dp_) != rx_frames_at_timeout_) ++counters_.rx_after_timeout;
    }
    if ((++counters_.turns % kControlEveryTurns) == 0 || now - last_control_ >= kControlEveryNs) {
        host_.poll_control();
        last_control_ = now;
    }
    if (const uint64_t sleep_ns = idle_.after_poll(work, now, dp_.next_deadline())) nap(sleep_ns);
}

void PollLoop::nap(uint64_t sleep_ns) {
    if (!host_.begin_nap()) return;
    const bool wake_on_rx = wake_on_rx_ && !idle_.stream_nap();
    if (wake_on_rx) {
        // Arm, then look once more: a frame that came before the arming is found by this poll,
        // one that comes after makes the wake fd readable. Without the last look a frame that
        // arrived between the turn's rx_burst and the arming would wait for the cap.
        io_.arm_rx_wait();
        const uint64_t now = clock_();
        if (const size_t work = dp_.poll(now)) {
            host_.cancel_nap();
            idle_.note_work(now, work);
            ++counters_.last_look_work;
            return;
        }
    }
    ++counters_.naps;
    const auto end = host_.nap(sleep_ns, wake_on_rx);
    if (wake_on_rx) io_.rx_wait_done();
    switch (end) {
        case host::server::NapEnd::Wake: ++counters_.woken_by_rx; break;
        case host::server::NapEnd::Kick: ++counters_.woken_by_kick; break;
        case host::server::NapEnd::Control: ++counters_.woken_by_control; break;
        case host::server::NapEnd::Timer:
            ++counters_.naps_timed_out;
            if (wake_on_rx) {
                check_rx_after_timeout_ = true;
                rx_frames_at_timeout_ = served_rx(dp_);
            }
            break;
        case host::server::NapEnd::Skipped: break;
    }
}

std::vector<std::pair<std::string, uint64_t>> PollLoop::counter_list() const {
    const LoopCounters& c = counters_;
    return {
        {"loop_turns", c.turns},
        {"loop_naps", c.naps},
        {"loop_last_look_work", c.last_look_work},
        {"loop_woken_by_rx", c.woken_by_rx},
        {"loop_woken_by_kick", c.woken_by_kick},
        {"loop_woken_by_control", c.woken_by_control},
        {"loop_naps_timed_out", c.naps_timed_out},
        {"loop_rx_after_timeout", c.rx_after_timeout},
    };
}

}  // namespace rnic::daemon
