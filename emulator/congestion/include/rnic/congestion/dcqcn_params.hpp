// DCQCN's knobs, named and defaulted as NVIDIA's ConnectX firmware names them (MLNX_OFED's
// /sys/class/net/<if>/ecn/roce_{rp,np}/ and the DCQCN parameter table of NVIDIA's docs), so a
// configuration tuned for a ConnectX reads the same here. Units are the vendor's: Mb/s,
// microseconds, bytes; alpha and g are fixed point with 10 fraction bits (1024 = 1.0).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rnic::cc {

inline constexpr uint32_t kAlphaOne = 1024;  // alpha's fixed point: 10 fraction bits
inline constexpr uint32_t kAlphaMax = 1023;

struct DcqcnParams {
    // Reaction point (the sender).
    uint8_t rp_enable_prio_mask = 0xff;    // DCQCN on for these 802.1p priorities (roce_rp/enable/N)
    uint32_t rp_ai_rate = 5;               // Mb/s added to the target rate per additive-increase step
    uint32_t rp_hai_rate = 50;             // Mb/s per hyper-increase step (times the step count)
    uint32_t rp_time_reset = 300;          // us between timer-driven increase events
    uint32_t rp_byte_reset = 32767;        // bytes sent between byte-counter increase events
    uint32_t rp_threshold = 1;             // F: increase events per counter before additive increase
    uint32_t rp_min_rate = 1;              // Mb/s, the floor of every cut
    uint32_t rp_max_rate = 0;              // Mb/s, the ceiling of recovery; 0 = the port's rate
    uint32_t rp_min_dec_fac = 50;          // %: one cut leaves at least this share of the rate
    uint32_t rp_gd = 11;                   // cut = rate * alpha / 2^rp_gd (11: alpha 1.0 halves)
    uint32_t rp_dce_tcp_g = 1019;          // alpha' = alpha*g/1024 (+ 1024-g if a CNP came)
    uint32_t rp_dce_tcp_rtt = 1;           // us, the alpha update period
    uint32_t rp_initial_alpha_value = 1023;
    uint32_t rp_rate_to_set_on_first_cnp = 0;      // Mb/s; 0 = the first CNP cuts as any other
    uint32_t rp_rate_reduce_monitor_period = 4;    // us, at most one cut per period
    uint32_t rp_clamp_tgt_rate = 0;                // 1: every cut also sets target = current
    uint32_t rp_clamp_tgt_rate_after_time_inc = 1; // 1: ... if the timer raised the rate since
    // Notification point (the receiver).
    uint8_t np_enable_prio_mask = 0xff;    // CNPs for CE-marked frames of these priorities
    uint32_t np_min_time_between_cnps = 4; // us, per QP
    uint32_t np_cnp_dscp = 48;             // DSCP of the CNPs we send
    uint32_t np_cnp_prio = 6;              // 802.1p priority of the CNPs (only with a VLAN tag)
    // ECN on the wire (not a DCQCN knob: the ECT codepoint our RoCEv2 frames carry).
    uint32_t ecn_ect = 2;                  // 0: not ECT, 1: ECT(1), 2: ECT(0) as RoCE NICs send

    bool rp_enabled_for(uint8_t priority) const noexcept { return (rp_enable_prio_mask >> (priority & 7)) & 1; }
    bool np_enabled_for(uint8_t priority) const noexcept { return (np_enable_prio_mask >> (priority & 7)) & 1; }
};

// One named knob: what `rnicctl cc set NAME VALUE` and `rnicd --cc NAME=VALUE` accept.
struct DcqcnParamInfo {
    std::string_view name;
    uint32_t DcqcnParams::*field;  // null for the two 8-bit masks (see mask_field)
    uint8_t DcqcnParams::*mask_field;
    uint32_t min;
    uint32_t max;
    std::string_view unit;
};

std::span<const DcqcnParamInfo> dcqcn_param_table() noexcept;
const DcqcnParamInfo* find_dcqcn_param(std::string_view name) noexcept;

uint32_t get_param(const DcqcnParams& params, const DcqcnParamInfo& info) noexcept;
// Sets NAME to VALUE after range and consistency checks; the error text names the knob and the
// allowed range, and params stay unchanged on error.
std::optional<std::string> set_param(DcqcnParams& params, std::string_view name, uint64_t value);
// Several knobs at once, all or nothing: each is range-checked, the cross-field checks run on
// the result (so `rp_max_rate=100 rp_min_rate=50` works whatever the order), and params stay
// unchanged on any error. Besides the table's names this takes mlx5's per-priority switches
// `rp_enable/N` and `np_enable/N` (N 0..7, value 0 or 1: roce_rp/enable/N), which set one bit
// of rp_enable_prio_mask / np_enable_prio_mask.
struct ParamAssignment {
    std::string_view name;
    uint64_t value = 0;
};
std::optional<std::string> set_params(DcqcnParams& params, std::span<const ParamAssignment> assignments);
// "NAME=VALUE" parsed (no check of the name or the range).
std::optional<std::string> parse_assignment(std::string_view assignment, ParamAssignment& out);
// "NAME=VALUE" as on rnicd's command line.
std::optional<std::string> set_param_assignment(DcqcnParams& params, std::string_view assignment);
// Cross-field checks (min <= max rate ...); nullopt when consistent.
std::optional<std::string> validate(const DcqcnParams& params);

}  // namespace rnic::cc
