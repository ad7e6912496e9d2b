// A RoCEv2 frame as the parser returns it and as the builder takes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/source_port.hpp"

namespace rnic::wire {

// What the builder needs to emit one frame. Lengths, pad count, checksums and the ICRC are
// derived; everything else is the caller's choice. The IP version follows from the GIDs:
// IPv4-mapped on both ends gives IPv4, neither gives IPv6.
struct FrameSpec {
    MacAddr dst_mac{};
    MacAddr src_mac{};
    std::optional<uint16_t> vlan_tci;

    Gid src_gid;
    Gid dst_gid;
    uint8_t dscp = 0;
    uint8_t ecn = 0;
    uint8_t hop_limit = 64;  // IPv4 TTL or IPv6 hop limit
    uint16_t ip_id = 0;      // IPv4 only
    bool dont_fragment = true;  // IPv4 only
    uint32_t flow_label = 0;    // IPv6 only

    uint16_t src_port = kRoceSourcePortBase;
    uint16_t dst_port = kRoceV2Port;

    Bth bth;  // pad_count is computed from the payload
    ExtHeaders ext;
    std::span<const uint8_t> payload;

    // Ethernet needs 60 bytes before the FCS; a NIC pads shorter frames with zeros.
    bool pad_to_ethernet_minimum = true;
};

// A parsed frame. Spans point into the caller's frame buffer and live as long as it does.
struct RoceFrame {
    EthernetHeader eth;
    uint8_t ip_version = 4;
    Ipv4Header ipv4;  // when ip_version == 4
    Ipv6Header ipv6;  // when ip_version == 6
    Gid src_gid;
    Gid dst_gid;
    UdpHeader udp;
    Bth bth;
    ExtHeaders ext;
    const OpcodeInfo* info = nullptr;
    std::span<const uint8_t> payload;  // without pad bytes
    std::span<const uint8_t> pad;
    uint32_t icrc = 0;  // as carried in the frame

    size_t l3_offset = 0;
    size_t l4_offset = 0;
    size_t bth_offset = 0;
    size_t frame_length = 0;  // up to the end of the IP packet (the ICRC)
    size_t trailer_length = 0;  // Ethernet padding after the IP packet

    uint8_t dscp() const noexcept { return ip_version == 4 ? ipv4.dscp : ipv6.traffic_class >> 2; }
    uint8_t ecn() const noexcept { return ip_version == 4 ? ipv4.ecn : ipv6.traffic_class & 0x3; }
};

// Everything needed to rebuild `frame` byte for byte (given the same IP ID and source port,
// which the spec carries over).
FrameSpec spec_from_frame(const RoceFrame& frame);

}  // namespace rnic::wire
