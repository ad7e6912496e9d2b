// When the poll loop sleeps. Spinning right after work catches the next frame or doorbell of a
// burst without a wake-up; beyond a short window it only takes the core from applications (on a
// machine where daemons and applications share the cores, that delays the very answer the loop
// waits for). So: spin for a window after the last work, then sleep, never past the engine's
// next timer. When the port can wake the loop on a frame, a nap costs no latency and goes
// straight to the cap; without one, naps start short and double up to the cap.
//
// A stream is the exception. A receiver that naps between the bursts of a bandwidth test is woken
// by nearly every burst, and each wake-up is paid for by the sender: the kernel wakes us inside
// the sender's sendto() (measured: ~10 % of the sender's core, the bottleneck of a 64 KiB WRITE
// stream); the sender, likewise, naps between the ACKs and doorbells that keep it going. So while
// work streams in (at least `stream_work` items: frames in or out, WQEs, CQEs, in the last
// `stream_window_ns`) the loop spins `stream_spin_ns` instead. A latency ping-pong (per round
// trip a frame and an ACK each way, a WQE and a CQE or two) stays far below the threshold and
// keeps the short window that leaves the core to the application.
//
// A stream also lingers: for up to `stream_linger_ns` after the loop last saw one, its naps stay
// stream naps while the work over that longer window keeps a stream's pace (`stream_linger_work`).
// At 0.2-0.3 M frames/s the count over 100 us hovers around the threshold (25 frames at 0.25 M/s),
// and every nap that fell out of the stream armed the wake-up: the next frame woke the receiver
// through the sender's sendto(), and the sender's next doorbell came with a kick. Counted over one
// 1-QP `ib_write_bw -s 64` run: ~7,000 receiver wake-ups by frames and ~4,000 sender kicks without
// the linger, 16-153 and 198-444 with it. The pace test keeps it to streams: a client posting a burst
// of 32 now and then would otherwise hold every other client's doorbells to the stream nap's
// length for the whole linger after each burst.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <optional>

namespace rnic::daemon {

class IdlePolicy {
public:
    struct Config {
        bool busy_poll = false;
        uint64_t spin_ns = 1'000'000;    // keep spinning this long after the last work
        uint64_t min_sleep_ns = 16'000;  // first timed nap; doubles while idle
        uint64_t max_sleep_ns = 1'000'000;
        bool wake_on_rx = false;  // a frame ends a nap (the port has a wake fd)
        uint64_t stream_spin_ns = 10'000;  // the spin window while work streams in
        uint64_t stream_nap_ns = 20'000;   // while streaming, naps this long, not woken by frames (0: as others)
        uint64_t stream_window_ns = 100'000;
        uint32_t stream_work = 32;  // 0: never a stream
        uint64_t colocated_ns = 2'000'000;  // how long a kick from our own core stops the spin
        uint64_t stream_linger_ns = 0;      // naps stay stream naps up to this long after the stream,
        uint32_t stream_linger_work = 128;  // while this much work came within that window
    };
    explicit IdlePolicy(Config config) : config_(config), next_sleep_(first_sleep()) {}

    const Config& config() const noexcept { return config_; }

    // Nanoseconds to sleep before the next poll; 0 = poll again at once. `deadline()` (the
    // engine's and the neighbours' next timer, std::optional<uint64_t>) is asked only when the
    // loop would sleep: computing it walks every QP and neighbour, too much for every busy turn.
    template <std::invocable DeadlineFn>
    uint64_t after_poll(size_t work, uint64_t now_ns, DeadlineFn&& deadline) {
        if (work > 0) {
            note_work(now_ns, work);
            return 0;
        }
        if (config_.busy_poll || now_ns - last_work_ < spin_window(now_ns)) return 0;
        uint64_t sleep = next_sleep_;
        next_sleep_ = std::min(next_sleep_ * 2, config_.max_sleep_ns);
        const bool stream = streaming(now_ns);
        if (stream) stream_until_ = now_ns + config_.stream_linger_ns;
        stream_nap_ = config_.stream_nap_ns && (stream || lingering(now_ns));
        if (stream_nap_) sleep = config_.stream_nap_ns;
        if (const std::optional<uint64_t> d = deadline()) {
            if (*d <= now_ns) return 0;
            sleep = std::min(sleep, *d - now_ns);
        }
        return sleep;
    }
    uint64_t after_poll(size_t work, uint64_t now_ns, std::optional<uint64_t> deadline_ns) {
        return after_poll(work, now_ns, [deadline_ns] { return deadline_ns; });
    }

    // Work found outside after_poll (the last look before a nap): the spin window starts again.
    void note_work(uint64_t now_ns, size_t work = 1) {
        last_work_ = now_ns;
        next_sleep_ = first_sleep();
        note_activity(work, now_ns);
    }

    // The nap after_poll asked for is a stream nap: timed, frames do not end it.
    bool stream_nap() const noexcept { return stream_nap_; }

    // A kick woke the loop; `same_cpu`: from a client on the loop's own core. That client was
    // preempted by this (SCHED_FIFO) loop and runs again only when the loop sleeps, so spinning
    // for its next doorbell can only delay it: no spin window for `colocated_ns`. A kick from
    // another core ends that at once.
    void note_kick(uint64_t now_ns, bool same_cpu) {
        colocated_until_ = same_cpu ? now_ns + config_.colocated_ns : 0;
    }
    bool colocated(uint64_t now_ns) const noexcept { return now_ns < colocated_until_; }

    bool streaming(uint64_t now_ns) const {
        if (config_.stream_work == 0) return false;
        return recent_.count(now_ns) >= config_.stream_work;
    }
    // Past the stream, within the linger, and still at a stream's pace over the linger's window.
    bool lingering(uint64_t now_ns) const {
        return now_ns < stream_until_ && lingering_.count(now_ns) >= config_.stream_linger_work;
    }

private:
    // Work counted in two fixed buckets of a window each: the count over the current and the
    // previous bucket is at least the count over the last window.
    class WindowCount {
    public:
        explicit WindowCount(uint64_t window_ns) : window_ns_(window_ns) {}
        void add(uint64_t now_ns, size_t work) {
            if (window_ns_ == 0) return;
            const uint64_t bucket = now_ns / window_ns_;
            if (bucket != bucket_) {
                previous_ = bucket == bucket_ + 1 ? current_ : 0;
                current_ = 0;
                bucket_ = bucket;
            }
            current_ += work;
        }
        uint64_t count(uint64_t now_ns) const {
            if (window_ns_ == 0) return 0;
            const uint64_t bucket = now_ns / window_ns_;
            if (bucket == bucket_) return current_ + previous_;
            return bucket == bucket_ + 1 ? current_ : 0;
        }

    private:
        uint64_t window_ns_;
        uint64_t bucket_ = 0;
        uint64_t current_ = 0;
        uint64_t previous_ = 0;
    };

    void note_activity(size_t work, uint64_t now_ns) {
        if (config_.stream_work == 0) return;
        recent_.add(now_ns, work);
        lingering_.add(now_ns, work);
    }

    uint64_t spin_window(uint64_t now_ns) const {
        if (colocated(now_ns)) return 0;
        return streaming(now_ns) ? std::max(config_.spin_ns, config_.stream_spin_ns) : config_.spin_ns;
    }

    uint64_t first_sleep() const {
        return config_.wake_on_rx ? config_.max_sleep_ns : std::min(config_.min_sleep_ns, config_.max_sleep_ns);
    }

    Config config_;
    uint64_t next_sleep_;
    uint64_t last_work_ = 0;
    WindowCount recent_{config_.stream_window_ns};      // is work streaming in
    WindowCount lingering_{config_.stream_linger_ns};  // is a stream's pace kept over the linger
    uint64_t colocated_until_ = 0;
    uint64_t stream_until_ = 0;  // the linger ends then at the latest
    bool stream_nap_ = false;
};

}  // namespace rnic::daemon
