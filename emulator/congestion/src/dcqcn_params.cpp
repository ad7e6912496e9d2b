#include "rnic/congestion/dcqcn_params.hpp"

#include <array>
#include <charconv>

namespace rnic::cc {
namespace {

using P = DcqcnParams;
constexpr uint32_t kMaxRateMbps = 1'000'000;  // 1 Tb/s: above any port we model

constexpr std::array kTable = {
    DcqcnParamInfo{"rp_enable_prio_mask", nullptr, &P::rp_enable_prio_mask, 0, 255, "bitmask"},
    DcqcnParamInfo{"rp_ai_rate", &P::rp_ai_rate, nullptr, 1, kMaxRateMbps, "Mb/s"},
    DcqcnParamInfo{"rp_hai_rate", &P::rp_hai_rate, nullptr, 1, kMaxRateMbps, "Mb/s"},
    DcqcnParamInfo{"rp_time_reset", &P::rp_time_reset, nullptr, 1, 131071, "us"},
    DcqcnParamInfo{"rp_byte_reset", &P::rp_byte_reset, nullptr, 64, 1u << 30, "bytes"},
    DcqcnParamInfo{"rp_threshold", &P::rp_threshold, nullptr, 1, 31, "events"},
    DcqcnParamInfo{"rp_min_rate", &P::rp_min_rate, nullptr, 1, kMaxRateMbps, "Mb/s"},
    DcqcnParamInfo{"rp_max_rate", &P::rp_max_rate, nullptr, 0, kMaxRateMbps, "Mb/s (0 = port rate)"},
    DcqcnParamInfo{"rp_min_dec_fac", &P::rp_min_dec_fac, nullptr, 0, 100, "%"},
    DcqcnParamInfo{"rp_gd", &P::rp_gd, nullptr, 10, 11, "log2"},
    DcqcnParamInfo{"rp_dce_tcp_g", &P::rp_dce_tcp_g, nullptr, 0, 1023, "1/1024"},
    DcqcnParamInfo{"rp_dce_tcp_rtt", &P::rp_dce_tcp_rtt, nullptr, 1, 131071, "us"},
    DcqcnParamInfo{"rp_initial_alpha_value", &P::rp_initial_alpha_value, nullptr, 1, 1023, "1/1024"},
    DcqcnParamInfo{"rp_rate_to_set_on_first_cnp", &P::rp_rate_to_set_on_first_cnp, nullptr, 0, kMaxRateMbps,
                   "Mb/s (0 = cut)"},
    DcqcnParamInfo{"rp_rate_reduce_monitor_period", &P::rp_rate_reduce_monitor_period, nullptr, 1, 1u << 30, "us"},
    DcqcnParamInfo{"rp_clamp_tgt_rate", &P::rp_clamp_tgt_rate, nullptr, 0, 1, "bool"},
    DcqcnParamInfo{"rp_clamp_tgt_rate_after_time_inc", &P::rp_clamp_tgt_rate_after_time_inc, nullptr, 0, 1, "bool"},
    DcqcnParamInfo{"np_enable_prio_mask", nullptr, &P::np_enable_prio_mask, 0, 255, "bitmask"},
    DcqcnParamInfo{"np_min_time_between_cnps", &P::np_min_time_between_cnps, nullptr, 0, 1u << 30, "us"},
    DcqcnParamInfo{"np_cnp_dscp", &P::np_cnp_dscp, nullptr, 0, 63, "DSCP"},
    DcqcnParamInfo{"np_cnp_prio", &P::np_cnp_prio, nullptr, 0, 7, "802.1p"},
    DcqcnParamInfo{"ecn_ect", &P::ecn_ect, nullptr, 0, 2, "0 none, 1 ECT(1), 2 ECT(0)"},
};

std::optional<uint64_t> parse_u64(std::string_view text) {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

}  // namespace

std::span<const DcqcnParamInfo> dcqcn_param_table() noexcept { return kTable; }

const DcqcnParamInfo* find_dcqcn_param(std::string_view name) noexcept {
    for (const auto& info : kTable)
        if (info.name == name) return &info;
    return nullptr;
}

uint32_t get_param(const DcqcnParams& params, const DcqcnParamInfo& info) noexcept {
    return info.field != nullptr ? params.*(info.field) : params.*(info.mask_field);
}

std::optional<std::string> validate(const DcqcnParams& params) {
    if (params.rp_max_rate != 0 && params.rp_min_rate > params.rp_max_rate)
        return "rp_min_rate (" + std::to_string(params.rp_min_rate) + " Mb/s) exceeds rp_max_rate (" +
               std::to_string(params.rp_max_rate) + " Mb/s)";
    return std::nullopt;
}

namespace {

// rp_enable/N, np_enable/N: the mask they are a bit of, and N; null when `name` is not one.
uint8_t DcqcnParams::*priority_switch(std::string_view name, uint32_t& priority) {
    uint8_t DcqcnParams::*mask = nullptr;
    if (name.starts_with("rp_enable/"))
        mask = &P::rp_enable_prio_mask;
    else if (name.starts_with("np_enable/"))
        mask = &P::np_enable_prio_mask;
    else
        return nullptr;
    const std::string_view n = name.substr(10);
    if (n.size() != 1 || n[0] < '0' || n[0] > '7') return nullptr;
    priority = static_cast<uint32_t>(n[0] - '0');
    return mask;
}

// One knob into `params`, range-checked but without the cross-field checks.
std::optional<std::string> assign(DcqcnParams& params, std::string_view name, uint64_t value) {
    uint32_t priority = 0;
    if (uint8_t DcqcnParams::*mask = priority_switch(name, priority)) {
        if (value > 1) return std::string(name) + " must be 0 or 1, not " + std::to_string(value);
        const auto bit = static_cast<uint8_t>(1u << priority);
        params.*mask = static_cast<uint8_t>(value ? (params.*mask | bit) : (params.*mask & ~bit));
        return std::nullopt;
    }
    const DcqcnParamInfo* info = find_dcqcn_param(name);
    if (info == nullptr) return "unknown congestion-control parameter '" + std::string(name) + "'";
    if (value < info->min || value > info->max)
        return std::string(name) + " must be in [" + std::to_string(info->min) + ", " + std::to_string(info->max) +
               "] " + std::string(info->unit) + ", not " + std::to_string(value);
    if (info->field != nullptr)
        params.*(info->field) = static_cast<uint32_t>(value);
    else
        params.*(info->mask_field) = static_cast<uint8_t>(value);
    return std::nullopt;
}

}  // namespace

std::optional<std::string> set_param(DcqcnParams& params, std::string_view name, uint64_t value) {
    const ParamAssignment one{name, value};
    return set_params(params, std::span(&one, 1));
}

std::optional<std::string> set_params(DcqcnParams& params, std::span<const ParamAssignment> assignments) {
    DcqcnParams candidate = params;
    for (const auto& a : assignments)
        if (auto error = assign(candidate, a.name, a.value)) return error;
    if (auto error = validate(candidate)) return error;
    params = candidate;
    return std::nullopt;
}

std::optional<std::string> parse_assignment(std::string_view assignment, ParamAssignment& out) {
    const auto eq = assignment.find('=');
    if (eq == std::string_view::npos) return "expected NAME=VALUE, got '" + std::string(assignment) + "'";
    const auto value = parse_u64(assignment.substr(eq + 1));
    if (!value) return "not a number: '" + std::string(assignment.substr(eq + 1)) + "'";
    out.name = assignment.substr(0, eq);
    out.value = *value;
    return std::nullopt;
}

std::optional<std::string> set_param_assignment(DcqcnParams& params, std::string_view assignment) {
    ParamAssignment a;
    if (auto error = parse_assignment(assignment, a)) return error;
    return set_param(params, a.name, a.value);
}

}  // namespace rnic::cc
