// The frames port_rate sends, built by the project's wire library as rnicd builds its own (RC
// RDMA WRITE Only over IPv4, ICRC included), and the cheap test the receiver counts them by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rnic/wire/headers.hpp"

namespace rnic::port_rate {

struct FrameParams {
    wire::MacAddr src_mac{};
    wire::MacAddr dst_mac{};
    uint32_t src_ip = 0;  // host order
    uint32_t dst_ip = 0;
    size_t payload = 64;
};

// `count` complete frames that differ in their PSN (so in their ICRC), as consecutive WRITEs of
// one QP would; the sender cycles through them rather than building each frame anew, so the
// rate it measures is the port's, not the builder's. Throws std::invalid_argument when the
// builder refuses the parameters.
std::vector<std::vector<uint8_t>> make_frames(const FrameParams& params, size_t count);

// True for an untagged IPv4/UDP frame to the RoCEv2 port: what the receiver counts as ours
// without parsing the whole frame.
bool is_roce_v2(std::span<const uint8_t> frame) noexcept;

}  // namespace rnic::port_rate
