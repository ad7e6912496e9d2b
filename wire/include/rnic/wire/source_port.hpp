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

// rxe's own choice before any flow label applies, and the one it keeps for UD and GSI QPs
// (rxe_qp_init_req): the QPN hashed to 14 bits with the kernel's hash_32 (multiply by the 32-bit
// golden ratio, keep the top bits) above 0xC000. QP 1 gets 0xD872, QP 0x11 0xDF94.
constexpr uint16_t rxe_qp_source_port(uint32_t qpn) noexcept {
    const uint32_t hash = static_cast<uint32_t>(qpn * 0x61C88647u) >> (32 - 14);
    return static_cast<uint16_t>(kRoceSourcePortBase + (hash & 0x3FFF));
}

}  // namespace rnic::wire
