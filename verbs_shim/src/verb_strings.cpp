// The enum-to-text and rate helpers of libibverbs. Applications print these strings (perftest's
// and the pingpongs' error messages, ibv_devinfo's output), so the text is rdma-core 44's,
// checked against the system libibverbs by verbs_shim/tests/check_strings.py.
#include <array>
#include <cstddef>

#include "export.hpp"
#include "shim_objects.hpp"

namespace {

template <size_t N>
const char* lookup(const std::array<const char*, N>& table, long value) {
    if (value < 0 || static_cast<size_t>(value) >= N || table[static_cast<size_t>(value)] == nullptr) return "unknown";
    return table[static_cast<size_t>(value)];
}

constexpr std::array<const char*, 8> kNodeTypes{nullptr,
                                                "InfiniBand channel adapter",
                                                "InfiniBand switch",
                                                "InfiniBand router",
                                                "iWARP NIC",
                                                "usNIC",
                                                "usNIC UDP",
                                                "unspecified"};

constexpr std::array<const char*, 6> kPortStates{"no state change (NOP)", "down", "init", "armed", "active",
                                                 "active defer"};

constexpr std::array<const char*, 20> kEventTypes{"CQ error",
                                                  "local work queue catastrophic error",
                                                  "invalid request local work queue error",
                                                  "local access violation work queue error",
                                                  "communication established",
                                                  "send queue drained",
                                                  "path migrated",
                                                  "path migration request error",
                                                  "local catastrophic error",
                                                  "port active",
                                                  "port error",
                                                  "LID change",
                                                  "P_Key change",
                                                  "SM change",
                                                  "SRQ catastrophic error",
                                                  "SRQ limit reached",
                                                  "last WQE reached",
                                                  "client reregistration",
                                                  "GID table change",
                                                  "WQ fatal"};

constexpr std::array<const char*, 24> kWcStatuses{"success",
                                                  "local length error",
                                                  "local QP operation error",
                                                  "local EE context operation error",
                                                  "local protection error",
                                                  "Work Request Flushed Error",
                                                  "memory management operation error",
                                                  "bad response error",
                                                  "local access error",
                                                  "remote invalid request error",
                                                  "remote access error",
                                                  "remote operation error",
                                                  "transport retry counter exceeded",
                                                  "RNR retry counter exceeded",
                                                  "local RDD violation error",
                                                  "remote invalid RD request",
                                                  "aborted error",
                                                  "invalid EE context number",
                                                  "invalid EE context state",
                                                  "fatal error",
                                                  "response timeout error",
                                                  "general error",
                                                  "TM error",
                                                  "TM software rendezvous"};

// enum ibv_rate -> (multiple of 2.5 Gb/s, Mb/s); -1 where rdma-core has no multiple.
struct Rate {
    int mult;
    int mbps;
};
constexpr std::array<Rate, 25> kRates{{{-1, -1},     {-1, -1},      {1, 2500},     {4, 10000},    {12, 30000},
                                       {2, 5000},    {8, 20000},    {16, 40000},   {24, 60000},   {32, 80000},
                                       {48, 120000}, {-1, 14062},   {-1, 56250},   {-1, 112500},  {-1, 168750},
                                       {-1, 25781},  {-1, 103125},  {-1, 206250},  {-1, 309375},  {11, 28125},
                                       {20, 53125},  {160, 425000}, {240, 637500}, {320, 850000}, {480, 1275000}}};

}  // namespace

RNIC_EXPORT const char* ibv_node_type_str(ibv_node_type node_type) {
    return lookup(kNodeTypes, node_type);
}
RNIC_EXPORT const char* ibv_port_state_str(ibv_port_state port_state) {
    return lookup(kPortStates, port_state);
}
RNIC_EXPORT const char* ibv_event_type_str(ibv_event_type event) {
    return lookup(kEventTypes, event);
}
RNIC_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
    return lookup(kWcStatuses, status);
}

RNIC_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
    return rate >= 0 && static_cast<size_t>(rate) < kRates.size() ? kRates[static_cast<size_t>(rate)].mult : -1;
}

RNIC_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
    return rate >= 0 && static_cast<size_t>(rate) < kRates.size() ? kRates[static_cast<size_t>(rate)].mbps : -1;
}

RNIC_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
    for (size_t i = 0; i < kRates.size(); ++i)
        if (kRates[i].mult == mult && mult > 0) return static_cast<ibv_rate>(i);
    return IBV_RATE_MAX;
}

RNIC_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
    for (size_t i = 0; i < kRates.size(); ++i)
        if (kRates[i].mbps == mbps && mbps > 0) return static_cast<ibv_rate>(i);
    return IBV_RATE_MAX;
}
