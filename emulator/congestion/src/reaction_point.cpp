#include "rnic/congestion/reaction_point.hpp"

#include <algorithm>

namespace rnic::cc {
namespace {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kKbpsPerMbps = 1000;
// alpha's internal fixed point: the knobs' 10 fraction bits plus these.
constexpr unsigned kAlphaExtraBits = 10;
constexpr uint64_t kAlphaInternalMax = uint64_t{kAlphaMax} << kAlphaExtraBits;

// Rounds up so fast recovery reaches the target instead of stalling one kb/s below it.
uint64_t midpoint_up(uint64_t a, uint64_t b) noexcept {
    return a / 2 + b / 2 + ((a % 2) + (b % 2) + 1) / 2;
}

}  // namespace

ReactionPoint::ReactionPoint(const DcqcnParams& params, uint64_t port_rate_mbps) noexcept
    : params_(params), port_rate_mbps_(port_rate_mbps) {
    current_kbps_ = target_kbps_ = max_rate_kbps();
}

uint64_t ReactionPoint::max_rate_kbps() const noexcept {
    const uint64_t mbps = params_.rp_max_rate != 0 ? std::min<uint64_t>(params_.rp_max_rate, port_rate_mbps_)
                                                   : port_rate_mbps_;
    return mbps * kKbpsPerMbps;
}

uint64_t ReactionPoint::monitor_period_ns() const noexcept {
    return uint64_t{params_.rp_rate_reduce_monitor_period} * kNsPerUs;
}
uint64_t ReactionPoint::time_reset_ns() const noexcept {
    return std::max<uint64_t>(params_.rp_time_reset, 1) * kNsPerUs;
}
uint64_t ReactionPoint::alpha_period_ns() const noexcept {
    return std::max<uint64_t>(params_.rp_dce_tcp_rtt, 1) * kNsPerUs;
}

uint32_t ReactionPoint::alpha() const noexcept {
    return static_cast<uint32_t>((alpha_ + (uint64_t{1} << (kAlphaExtraBits - 1))) >> kAlphaExtraBits);
}

void ReactionPoint::age_alpha(uint64_t until_ns) {
    if (!seen_cnp_ || alpha_next_ns_ > until_ns) return;
    const uint64_t period = alpha_period_ns();
    const uint32_t g = std::min(params_.rp_dce_tcp_g, kAlphaMax);
    if (cnp_in_alpha_period_) {
        alpha_ = std::min(alpha_ * g / kAlphaOne + (uint64_t{kAlphaOne - g} << kAlphaExtraBits), kAlphaInternalMax);
        cnp_in_alpha_period_ = false;
        alpha_next_ns_ += period;
    }
    if (alpha_next_ns_ > until_ns) return;
    // Periods without a CNP only decay alpha; each step lowers a non-zero alpha by at least 1
    // unit and by alpha/1024 (g <= 1023), so fewer than 16,000 steps reach 0 from any alpha
    // (ln 2^20 * 1024 + 1024) however long the QP was quiet.
    const uint64_t periods = (until_ns - alpha_next_ns_) / period + 1;
    for (uint64_t i = 0; i < periods && alpha_ != 0; ++i) alpha_ = alpha_ * g / kAlphaOne;
    alpha_next_ns_ += periods * period;
}

void ReactionPoint::restart_recovery(uint64_t now_ns) {
    timer_count_ = 0;
    byte_events_ = 0;
    bytes_since_event_ = 0;
    raised_by_timer_ = false;
    timer_next_ns_ = now_ns + time_reset_ns();
    limited_ = current_kbps_ < max_rate_kbps();
}

void ReactionPoint::cut(uint64_t now_ns) {
    age_alpha(now_ns);
    const bool clamp = params_.rp_clamp_tgt_rate != 0 ||
                       (params_.rp_clamp_tgt_rate_after_time_inc != 0 && raised_by_timer_);
    if (clamp || !limited_) target_kbps_ = current_kbps_;
    const uint32_t gd = std::min(params_.rp_gd, 31u);
    // Rates below 2^40 kb/s keep the product within 64 bits.
    const uint64_t reduction = (current_kbps_ * alpha_) >> (gd + kAlphaExtraBits);
    const uint64_t floor_by_factor = current_kbps_ * std::min(params_.rp_min_dec_fac, 100u) / 100;
    const uint64_t floor_by_min = uint64_t{params_.rp_min_rate} * kKbpsPerMbps;
    uint64_t next = current_kbps_ - std::min(reduction, current_kbps_);
    next = std::max({next, floor_by_factor, std::min(floor_by_min, max_rate_kbps())});
    current_kbps_ = next;
    last_cut_ns_ = now_ns;
    cut_pending_ = false;
    ++stats_.cuts;
    restart_recovery(now_ns);
}

void ReactionPoint::on_cnp(uint64_t now_ns) {
    advance(now_ns);
    ++stats_.cnps;
    if (!seen_cnp_) {
        seen_cnp_ = true;
        alpha_ = uint64_t{std::min(params_.rp_initial_alpha_value, kAlphaMax)} << kAlphaExtraBits;
        alpha_next_ns_ = now_ns + alpha_period_ns();
        cnp_in_alpha_period_ = false;  // the initial value already stands for this CNP
        if (params_.rp_rate_to_set_on_first_cnp != 0) {
            current_kbps_ = target_kbps_ = std::min(
                uint64_t{params_.rp_rate_to_set_on_first_cnp} * kKbpsPerMbps, max_rate_kbps());
            last_cut_ns_ = now_ns;
            ++stats_.cuts;
            restart_recovery(now_ns);
            return;
        }
        cut(now_ns);
        return;
    }
    cnp_in_alpha_period_ = true;
    if (limited_ && now_ns - last_cut_ns_ < monitor_period_ns()) {
        cut_pending_ = true;  // folded into one cut at the end of the monitor period
        return;
    }
    cut(now_ns);
}

void ReactionPoint::increase() {
    const uint32_t f = params_.rp_threshold;
    const uint32_t most = std::max(timer_count_, byte_events_);
    const uint32_t least = std::min(timer_count_, byte_events_);
    const uint64_t ceiling = max_rate_kbps();
    if (most <= f) {
        ++stats_.fast_recovery;
    } else if (least > f) {
        ++stats_.hyper_increase;
        target_kbps_ += uint64_t{least - f} * params_.rp_hai_rate * kKbpsPerMbps;
    } else {
        ++stats_.additive_increase;
        target_kbps_ += uint64_t{params_.rp_ai_rate} * kKbpsPerMbps;
    }
    target_kbps_ = std::min(target_kbps_, ceiling);
    current_kbps_ = std::min(midpoint_up(current_kbps_, target_kbps_), ceiling);
    // Back at full rate: the episode ends and the timers stop; the next CNP is a first CNP
    // again (initial alpha), as a NIC frees the flow's rate-limiter context. A cut still due
    // keeps the episode open until it has run.
    if (current_kbps_ >= ceiling && !cut_pending_) {
        limited_ = false;
        seen_cnp_ = false;
    }
}

void ReactionPoint::advance(uint64_t now_ns) {
    // A deferred cut and the increase timer, in time order; alpha is brought up to each cut.
    for (;;) {
        const uint64_t cut_at = last_cut_ns_ + monitor_period_ns();
        const bool cut_due = cut_pending_ && cut_at <= now_ns;
        const bool timer_due = limited_ && timer_next_ns_ <= now_ns;
        if (cut_due && (!timer_due || cut_at <= timer_next_ns_)) {
            cut(cut_at);
        } else if (timer_due) {
            ++timer_count_;
            ++stats_.timer_events;
            raised_by_timer_ = true;
            timer_next_ns_ += time_reset_ns();
            increase();
        } else {
            break;
        }
    }
    age_alpha(now_ns);
}

void ReactionPoint::on_bytes_sent(uint64_t bytes, uint64_t now_ns) {
    advance(now_ns);
    if (!limited_) return;
    const uint64_t per_event = std::max<uint64_t>(params_.rp_byte_reset, 1);
    bytes_since_event_ += bytes;
    while (limited_ && bytes_since_event_ >= per_event) {
        bytes_since_event_ -= per_event;
        ++byte_events_;
        ++stats_.byte_events;
        increase();
    }
    if (!limited_) bytes_since_event_ = 0;
}

void ReactionPoint::on_params_changed(uint64_t now_ns) {
    advance(now_ns);
    const uint64_t ceiling = max_rate_kbps();
    if (!limited_) {
        current_kbps_ = target_kbps_ = ceiling;
        return;
    }
    const uint64_t floor = std::min(uint64_t{params_.rp_min_rate} * kKbpsPerMbps, ceiling);
    current_kbps_ = std::clamp(current_kbps_, floor, ceiling);
    target_kbps_ = std::clamp(target_kbps_, current_kbps_, ceiling);
    if (current_kbps_ >= ceiling && !cut_pending_) {
        limited_ = false;
        seen_cnp_ = false;
    }
}

std::optional<uint64_t> ReactionPoint::next_event_ns() const noexcept {
    std::optional<uint64_t> next;
    if (cut_pending_) next = last_cut_ns_ + monitor_period_ns();
    if (limited_) next = next ? std::min(*next, timer_next_ns_) : timer_next_ns_;
    return next;
}

}  // namespace rnic::cc
