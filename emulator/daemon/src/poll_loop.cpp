#include "poll_loop.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>

namespace rnic::daemon {

namespace {

// Control messages are served between turns while busy (at once while asleep: the nap runs
// inside Asio): every 64 turns or 50 us, whichever comes first.
constexpr uint64_t kControlEveryTurns = 64;
constexpr uint64_t kControlEveryNs = 50'000;

// Policy 9 (loop_placement.hpp): how many kicks in a row from the loop's own core, each after WQEs
// and no completion delivered, and within how long, make the loop leave that core (64 B WRITEs
// throttled this way kicked every 30-40 us; a 64 KiB stream's client every few ms).
constexpr uint32_t kStreamingKicks = 4;
constexpr uint64_t kStreamingKicksWithinNs = 400'000;

IdlePolicy::Config with_wake(IdlePolicy::Config c, bool wake) {
    c.wake_on_rx = wake;
    return c;
}

std::optional<uint64_t> earliest(std::optional<uint64_t> a, std::optional<uint64_t> b) {
    if (!a) return b;
    if (!b) return a;
    return std::min(*a, *b);
}

}  // namespace

bool PollLoop::frames_end_naps(const std::vector<Lane>& lanes, bool busy_poll) {
    return !busy_poll && !lanes.empty() &&
           std::all_of(lanes.begin(), lanes.end(), [](const Lane& l) { return l.io.rx_wait_fd() >= 0; });
}

PollLoop::PollLoop(std::vector<Lane> lanes, IdlePolicy::Config idle, Clock clock)
    : lanes_(std::move(lanes)),
      clock_(clock),
      wake_on_rx_(frames_end_naps(lanes_, idle.busy_poll)),
      idle_(with_wake(idle, wake_on_rx_)) {
    for (Lane& l : lanes_) {
        services_.push_back(&l.host);
        if (wake_on_rx_) l.host.set_wake_fd(l.io.rx_wait_fd());
        l.host.set_histogram_source([this] { return histogram_list(); });
    }
}

PollLoop::~PollLoop() {
    detach();
}

void PollLoop::detach() {
    for (Lane& l : lanes_) l.host.set_histogram_source({});
    lanes_.clear();
    services_.clear();
}

// Frames the wake fds are meant to announce (what the daemon serves); other frames never wake it.
uint64_t PollLoop::served_rx() const {
    uint64_t n = 0;
    for (const Lane& l : lanes_) {
        const auto& c = l.dp.counters().rx_by_class;
        n += c[static_cast<size_t>(port::FrameClass::RoceForUs)] + c[static_cast<size_t>(port::FrameClass::Arp)] +
             c[static_cast<size_t>(port::FrameClass::IcmpForUs)];
    }
    return n;
}

size_t PollLoop::poll_ports(uint64_t now) {
    size_t work = 0;
    for (Lane& l : lanes_) work += l.dp.poll(now);
    return work;
}

void PollLoop::turn() {
    const uint64_t now = clock_();
    size_t work = 0;
    if (trace_) {
        for (Lane& l : lanes_) work += traced_lane_turn(l, now);
        if (work > 0) hops_.busy_turn.record(clock_() - now);
    } else {
        for (Lane& l : lanes_) {
            work += l.host.poll(now);
            work += l.dp.poll(now);
        }
    }
    if (check_rx_after_timeout_) {
        check_rx_after_timeout_ = false;
        if (served_rx() != rx_frames_at_timeout_) ++counters_.rx_after_timeout;
    }
    if ((++counters_.turns % kControlEveryTurns) == 0 || now - last_control_ >= kControlEveryNs) {
        lanes_.front().host.poll_control();  // one io_context serves every device's control socket
        last_control_ = now;
    }
    const auto deadline = [this] {
        std::optional<uint64_t> d;
        for (const Lane& l : lanes_) d = earliest(d, l.dp.next_deadline());
        return d;
    };
    if (placement_) placement_->follow(idle_.streaming(now), work > 0, now);
    if (const uint64_t sleep_ns = idle_.after_poll(work, now, deadline)) {
        nap(sleep_ns);
    } else if (work == 0 && placement_ && placement_->at_home()) {
        // An empty turn of the spin on the home core: the loop that shares it (the other daemon
        // of a bed, just woken by our frame) waits behind us at the same FIFO priority, and
        // sched_yield() lets it run now rather than after our spin window; with none waiting it
        // returns at once. Applications (CFS) never get the core from a FIFO task's yield.
        sched_yield();
        ++counters_.home_yields;
    }
}

// The untraced turn's two calls, with the clock read around them that the hops need: a few
// vDSO clock reads per turn, paid only while tracing.
size_t PollLoop::traced_lane_turn(Lane& l, uint64_t now) {
    const auto before = l.host.activity();
    size_t work = l.host.poll(now);
    const auto after = l.host.activity();
    if (after.cqes_delivered != before.cqes_delivered && last_rx_ns_ != 0) {
        hops_.rx_to_completion.record(clock_() - last_rx_ns_);
        last_rx_ns_ = 0;
    }
    const bool took_wqes = after.wqes_posted != before.wqes_posted;
    const auto& c = l.dp.counters();
    const uint64_t rx_before = c.roce_rx, tx_before = c.roce_tx;
    const uint64_t dp_start = clock_();
    work += l.dp.poll(now);
    if (c.roce_rx != rx_before) last_rx_ns_ = dp_start;
    if (took_wqes && c.roce_tx != tx_before) hops_.seen_to_wire.record(clock_() - now);
    return work;
}

void PollLoop::set_latency_trace(bool on) {
    trace_ = on;
    for (Lane& l : lanes_) {
        l.host.set_latency_trace(on);
        l.io.set_arrival_stamps(on);
    }
}

// Read back to back, so the difference is off by at most the time between the two reads.
int64_t PollLoop::realtime_minus_monotonic() {
    timespec rt{}, mono{};
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
    return ns(rt) - ns(mono);
}

host::server::HistogramList PollLoop::histogram_list() const {
    return {
        {"seen_to_wire", &hops_.seen_to_wire},
        {"rx_to_completion", &hops_.rx_to_completion},
        {"rx_wake", &hops_.rx_wake},
        {"kick_wake_same_cpu", &hops_.kick_wake_same_cpu},
        {"kick_wake_other_cpu", &hops_.kick_wake_other_cpu},
        {"nap_overshoot", &hops_.nap_overshoot},
        {"busy_turn", &hops_.busy_turn},
    };
}

void PollLoop::nap(uint64_t sleep_ns) {
    const bool stream = idle_.stream_nap();
    // A stream nap is not advertised: clients see the loop awake and post without kicking. In a
    // stream of doorbells (a message-rate test) nearly every nap was otherwise ended by a kick,
    // each an eventfd write by the application and a cross-core wake-up (an IPI, a VM exit
    // here); the nap is short and timed, so a doorbell waits at most its length.
    for (size_t i = 0; !stream && i < lanes_.size(); ++i) {
        if (!lanes_[i].host.begin_nap()) {
            for (size_t j = 0; j < i; ++j) lanes_[j].host.cancel_nap();
            return;
        }
    }
    const bool wake_on_rx = wake_on_rx_ && !stream;
    if (wake_on_rx) {
        // Arm, then look once more: a frame that came before the arming is found by this poll,
        // one that comes after makes the wake fd readable. Without the last look a frame that
        // arrived between the turn's rx_burst and the arming would wait for the cap.
        for (Lane& l : lanes_) l.io.arm_rx_wait();
        const uint64_t now = clock_();
        if (const size_t work = poll_ports(now)) {
            for (Lane& l : lanes_) l.host.cancel_nap();
            idle_.note_work(now, work);
            ++counters_.last_look_work;
            return;
        }
    }
    ++counters_.naps;
    if (stream) {
        // A plain sleep, not the reactor's: nothing ends a stream nap early anyway, and a port whose
        // wake-up is its own ring socket (--ring-port) signals every frame it takes, so a nap in
        // epoll_wait would be woken by each frame of the stream only to sleep again. It also
        // spares the timerfd a timed epoll nap reprograms.
        ++counters_.stream_naps;
        ++counters_.naps_timed_out;
        const timespec length{static_cast<time_t>(sleep_ns / 1'000'000'000u), static_cast<long>(sleep_ns % 1'000'000'000u)};
        const uint64_t start = trace_ ? clock_() : 0;
        clock_nanosleep(CLOCK_MONOTONIC, 0, &length, nullptr);
        if (trace_) trace_nap(host::server::NapEnd::Timer, start, clock_(), sleep_ns);
        return;
    }
    const uint64_t nap_start = trace_ ? clock_() : 0;
    const auto end = host::server::HostService::nap_all(services_, sleep_ns, wake_on_rx);
    const uint64_t woke = trace_ ? clock_() : 0;
    if (wake_on_rx)
        for (Lane& l : lanes_) l.io.rx_wait_done();
    if (trace_) trace_nap(end, nap_start, woke, sleep_ns);
    switch (end) {
        case host::server::NapEnd::Wake: ++counters_.woken_by_rx; break;
        case host::server::NapEnd::Kick: note_kick(); break;
        case host::server::NapEnd::Control: ++counters_.woken_by_control; break;
        case host::server::NapEnd::Timer:
            ++counters_.naps_timed_out;
            if (wake_on_rx) {
                check_rx_after_timeout_ = true;
                rx_frames_at_timeout_ = served_rx();
            }
            break;
        case host::server::NapEnd::Skipped: break;
    }
}

// Whether the client that kicked shares our core decides whether the loop spins after its work
// (IdlePolicy::note_kick). A client may claim any CPU: it can only make the loop spin less.
void PollLoop::note_kick() {
    ++counters_.woken_by_kick;
    uint32_t kicker = UINT32_MAX;
    for (const Lane& l : lanes_)
        if (const uint32_t c = l.host.last_kick_cpu(); c != UINT32_MAX) kicker = c;
    if (kicker == UINT32_MAX) return;
    const int cpu = sched_getcpu();
    const bool same = cpu >= 0 && static_cast<uint32_t>(cpu) == kicker;
    counters_.colocated_kicks += same;
    const uint64_t now = clock_();
    idle_.note_kick(now, same);
    // Policy 9: a client on our core that keeps posting while no completion reaches it (none
    // between its doorbells: a stream, signalled every hundredth WQE or so), kicking every few
    // tens of microseconds, runs only while we nap, one doorbell per nap: the loop leaves its
    // core. A latency test waits for a completion before each post; the client of a 64 KiB
    // stream kicks every few milliseconds and costs the shared core little.
    const host::server::HostService::Activity now_activity = activity();
    const bool streaming_kick = same && now_activity.wqes_posted != activity_at_last_kick_.wqes_posted &&
                                now_activity.cqes_delivered == activity_at_last_kick_.cqes_delivered;
    activity_at_last_kick_ = now_activity;
    if (!streaming_kick) {
        streaming_kicks_ = 0;
        return;
    }
    if (streaming_kicks_++ == 0) streaming_kicks_since_ = now;
    if (streaming_kicks_ < kStreamingKicks || !placement_) return;
    streaming_kicks_ = 0;
    if (now - streaming_kicks_since_ <= kStreamingKicksWithinNs)
        placement_->leave_client_cpu(static_cast<int>(kicker), now);
}

host::server::HostService::Activity PollLoop::activity() const {
    host::server::HostService::Activity sum;
    for (const Lane& l : lanes_) {
        const auto a = l.host.activity();
        sum.wqes_posted += a.wqes_posted;
        sum.cqes_delivered += a.cqes_delivered;
    }
    return sum;
}

void PollLoop::trace_nap(host::server::NapEnd end, uint64_t nap_start, uint64_t woke, uint64_t asked_ns) {
    if (end == host::server::NapEnd::Wake) {
        // The kernel stamps arrivals with the wall clock; the loop runs on the monotonic one.
        uint64_t arrival = 0;
        for (const Lane& l : lanes_) {
            const uint64_t a = l.io.wait_arrival_realtime_ns();
            if (a != 0 && (arrival == 0 || a < arrival)) arrival = a;
        }
        const int64_t offset = realtime_minus_monotonic();
        if (arrival == 0 || offset <= 0) return;
        const uint64_t arrival_mono = arrival - static_cast<uint64_t>(offset);
        if (arrival_mono + 1'000 >= nap_start && arrival_mono <= woke) hops_.rx_wake.record(woke - arrival_mono);
        return;
    }
    if (end == host::server::NapEnd::Timer) {
        const uint64_t slept = woke - nap_start;
        hops_.nap_overshoot.record(slept > asked_ns ? slept - asked_ns : 0);
        return;
    }
    if (end != host::server::NapEnd::Kick) return;
    std::optional<host::server::HostService::KickStamp> kick;
    for (Lane& l : lanes_) {
        const auto k = l.host.take_kick_stamp(nap_start);
        if (k && (!kick || k->ns < kick->ns)) kick = k;
    }
    if (!kick || kick->ns > woke) return;
    const int cpu = sched_getcpu();
    auto& h = cpu >= 0 && static_cast<uint32_t>(cpu) == kick->cpu ? hops_.kick_wake_same_cpu : hops_.kick_wake_other_cpu;
    h.record(woke - kick->ns);
}

std::vector<std::pair<std::string, uint64_t>> PollLoop::counter_list() const {
    const LoopCounters& c = counters_;
    return {
        {"loop_turns", c.turns},
        {"loop_naps", c.naps},
        {"loop_stream_naps", c.stream_naps},
        {"loop_last_look_work", c.last_look_work},
        {"loop_woken_by_rx", c.woken_by_rx},
        {"loop_woken_by_kick", c.woken_by_kick},
        {"loop_colocated_kicks", c.colocated_kicks},
        // LoopPlacement keeps its own counts: left home for a stream or came back, left a streaming
        // client's core, and the moves the kernel refused.
        {"loop_home_cpu_moves", placement_ ? placement_->home_moves() : 0},
        {"loop_client_core_moves", placement_ ? placement_->client_moves() : 0},
        {"loop_home_cpu_move_errors", placement_ ? placement_->refused() : 0},
        {"loop_home_yields", c.home_yields},
        {"loop_woken_by_control", c.woken_by_control},
        {"loop_naps_timed_out", c.naps_timed_out},
        {"loop_rx_after_timeout", c.rx_after_timeout},
    };
}

}  // namespace rnic::daemon
