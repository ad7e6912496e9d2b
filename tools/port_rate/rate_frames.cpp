#include "rate_frames.hpp"

#include <stdexcept>
#include <string>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/packet.hpp"
#include "rnic/wire/psn.hpp"

namespace rnic::port_rate {

std::vector<std::vector<uint8_t>> make_frames(const FrameParams& params, size_t count) {
    std::vector<uint8_t> payload(params.payload);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
    wire::FrameSpec spec;
    spec.src_mac = params.src_mac;
    spec.dst_mac = params.dst_mac;
    spec.src_gid = wire::Gid::from_ipv4(params.src_ip);
    spec.dst_gid = wire::Gid::from_ipv4(params.dst_ip);
    spec.bth.opcode = wire::op::kRcWriteOnly;
    spec.bth.dest_qp = 0x11;
    spec.ext.reth = wire::Reth{0x10000, 0x100, static_cast<uint32_t>(params.payload)};
    spec.payload = payload;
    std::vector<std::vector<uint8_t>> frames;
    frames.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        spec.bth.psn = static_cast<uint32_t>(i) & wire::kPsnMask;
        spec.ip_id = static_cast<uint16_t>(i);
        const auto size = wire::frame_size(spec);
        if (!size) throw std::invalid_argument("cannot build the frame: " + std::string(wire::build_errc_name(size.error())));
        std::vector<uint8_t> frame(*size);
        const auto built = wire::build_frame(spec, frame);
        if (!built) throw std::invalid_argument("cannot build the frame: " + std::string(wire::build_errc_name(built.error())));
        frame.resize(*built);
        frames.push_back(std::move(frame));
    }
    return frames;
}

bool is_roce_v2(std::span<const uint8_t> f) noexcept {
    // Ethernet (14) + IPv4 header (IHL words) + UDP destination port.
    if (f.size() < 14 + 20 + 8 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4 || f[23] != 17) return false;
    const size_t udp = 14 + static_cast<size_t>(f[14] & 0x0F) * 4;
    if (udp < 34 || f.size() < udp + 8) return false;
    return (static_cast<unsigned>(f[udp + 2]) << 8 | f[udp + 3]) == wire::kRoceV2Port;
}

}  // namespace rnic::port_rate
