// UDP source port of a RoCEv2 flow. Annex A17 fixes the destination port and leaves the source
// port to the sender as ECMP entropy. We derive it the way Linux does for rxe and the hardware
// drivers (rdma_get_udp_sport): a 20-bit flow label from the QPN pair, unless the application
// set one, folded into 14 bits above 0xC000. A connection then uses the port rxe would use,
// and the same flow label yields the same port on every implementation.
#pragma once

#include <cstdint>

namespace rnic::wire {

inline constexpr uint16_t kRoceSourcePortBase = 0xC000;
inline constexpr uint32_t kFlowLabelMask = 0xFFFFF;

constexpr uint32_t rocev2_flow_label(uint32_t local_qpn, uint32_t remote_qpn) noexcept {
    uint64_t v = uint64_t{local_qpn} * remote_qpn;
    v ^= v >> 20;
    v ^= v >> 40;
    return static_cast<uint32_t>(v & kFlowLabelMask);
}

constexpr uint16_t rocev2_source_port_from_flow_label(uint32_t flow_label) noexcept {
    const uint32_t low = (flow_label & 0x3FFF) ^ ((flow_label & 0xFC000) >> 14);
    return static_cast<uint16_t>(kRoceSourcePortBase | low);
}

// flow_label 0 means "not set by the application": derive it from the QPN pair.
constexpr uint16_t rocev2_source_port(uint32_t local_qpn, uint32_t remote_qpn, uint32_t flow_label = 0) noexcept {
    return rocev2_source_port_from_flow_label(flow_label ? flow_label : rocev2_flow_label(local_qpn, remote_qpn));
}

}  // namespace rnic::wire
