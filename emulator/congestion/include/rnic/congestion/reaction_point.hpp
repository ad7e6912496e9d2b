// The DCQCN reaction point of one QP (Zhu et al., SIGCOMM'15, as ConnectX firmware runs it):
// a CNP cuts the current rate by alpha/2 (at most once per rate_reduce_monitor_period); alpha
// moves every dce_tcp_rtt towards 1 if a CNP came in that period and towards 0 otherwise; after a
// cut, a timer (rp_time_reset) and a byte counter (rp_byte_reset) raise the rate again in three
// stages: fast recovery towards the target rate, then additive increase of the target by
// rp_ai_rate, then hyper increase by i*rp_hai_rate. docs/congestion.md gives the rules and where
// they come from, including the choices the published descriptions leave open.
//
// Time is explicit (nanoseconds, any epoch, never going back): the owner calls advance() when
// next_event_ns() is due, so one timer queue serves every QP and nothing runs for a QP that is
// not rate-limited. Rates are kb/s.
#pragma once

#include <cstdint>
#include <optional>

#include "rnic/congestion/dcqcn_params.hpp"

namespace rnic::cc {

enum class IncreaseStage : uint8_t { FastRecovery, AdditiveIncrease, HyperIncrease };

struct ReactionPointStats {
    uint64_t cnps = 0;        // CNPs this QP received
    uint64_t cuts = 0;        // rate reductions (several CNPs in one monitor period make one)
    uint64_t timer_events = 0;
    uint64_t byte_events = 0;
    uint64_t fast_recovery = 0;
    uint64_t additive_increase = 0;
    uint64_t hyper_increase = 0;
};

class ReactionPoint {
public:
    // params is read at every event, so run-time changes (rnicctl) apply from the next event;
    // it must outlive this object.
    ReactionPoint(const DcqcnParams& params, uint64_t port_rate_mbps) noexcept;

    void on_cnp(uint64_t now_ns);
    // Bytes of a frame this QP just sent (the byte counter); call after the frame left.
    void on_bytes_sent(uint64_t bytes, uint64_t now_ns);
    // Runs every timer due at or before now_ns: alpha periods, a deferred cut, rate increases.
    void advance(uint64_t now_ns);

    // The knobs changed at run time (rnicctl cc set): the rates are brought inside the new
    // [rp_min_rate, ceiling] at once (a QP at full rate follows a new ceiling; a limited one is
    // lifted to a raised rp_min_rate, or ends its episode when the ceiling comes down to it);
    // periods and steps apply from the next event.
    void on_params_changed(uint64_t now_ns);

    // When advance() next has work; nullopt while the QP runs at full rate.
    std::optional<uint64_t> next_event_ns() const noexcept;

    bool limited() const noexcept { return limited_; }
    uint64_t current_rate_kbps() const noexcept { return current_kbps_; }
    uint64_t target_rate_kbps() const noexcept { return target_kbps_; }
    // alpha in 1/1024 (rounded), as mlx5 reports it; kept internally with kAlphaExtraBits more.
    uint32_t alpha() const noexcept;
    uint32_t timer_count() const noexcept { return timer_count_; }
    uint32_t byte_count_events() const noexcept { return byte_events_; }
    const ReactionPointStats& stats() const noexcept { return stats_; }
    uint64_t max_rate_kbps() const noexcept;
    void set_port_rate(uint64_t port_rate_mbps) noexcept { port_rate_mbps_ = port_rate_mbps; }

private:
    void age_alpha(uint64_t until_ns);
    void cut(uint64_t now_ns);
    void increase();
    void restart_recovery(uint64_t now_ns);
    uint64_t monitor_period_ns() const noexcept;
    uint64_t time_reset_ns() const noexcept;
    uint64_t alpha_period_ns() const noexcept;

    const DcqcnParams& params_;
    uint64_t port_rate_mbps_;
    uint64_t current_kbps_;
    uint64_t target_kbps_;
    // alpha with 20 fraction bits. The published alpha is a real number; at 10 bits every
    // update floors, and a decay step alpha * g / 1024 then removes at least 1/1024 however
    // small alpha is (with g = 1020, 2.5 times the exact step at alpha 0.1), so under light
    // marking alpha collapses to 0 and cuts stop cutting (docs/congestion.md, "Incast").
    uint64_t alpha_ = 0;
    bool seen_cnp_ = false;        // the first CNP ever uses initial_alpha_value
    bool limited_ = false;         // below max rate: timers and byte counter run
    bool cnp_in_alpha_period_ = false;
    bool cut_pending_ = false;
    bool raised_by_timer_ = false;  // since the last cut (rp_clamp_tgt_rate_after_time_inc)
    uint64_t alpha_next_ns_ = 0;   // end of the current alpha period
    uint64_t last_cut_ns_ = 0;
    uint64_t timer_next_ns_ = 0;
    uint64_t bytes_since_event_ = 0;
    uint32_t timer_count_ = 0;     // T
    uint32_t byte_events_ = 0;     // BC
    ReactionPointStats stats_;
};

}  // namespace rnic::cc
