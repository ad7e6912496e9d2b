#include "rnic/port/classify.hpp"

#include <algorithm>

#include "rnic/port/icmp6.hpp"
#include "rnic/wire/byte_order.hpp"

namespace rnic::port {

namespace {
FrameClass classify_ipv6(std::span<const uint8_t> frame, size_t off, const HostAddress& self, bool to_our_mac) {
    if (frame.size() < off + wire::Ipv6Header::kSize) return FrameClass::Malformed;
    const uint8_t* ip = frame.data() + off;
    if ((ip[0] >> 4) != 6) return FrameClass::Malformed;
    Ipv6Addr dst;
    std::copy_n(ip + 24, 16, dst.begin());
    const bool group = is_multicast(dst);
    if (group ? !(self.in_group(dst) && std::equal(frame.begin(), frame.begin() + 6, multicast_mac(dst).begin()))
              : !(to_our_mac && self.owns(dst)))
        return FrameClass::NotForUs;
    const uint8_t next = ip[6];
    if (next == kIpProtoIcmp6) return FrameClass::Icmp6ForUs;
    // RoCEv2 is unicast UDP right after the IPv6 header: no sender puts extension headers first.
    if (next != wire::kIpProtoUdp || group) return FrameClass::OtherForUs;
    if (frame.size() < off + wire::Ipv6Header::kSize + wire::UdpHeader::kSize) return FrameClass::Malformed;
    if (wire::load_be16(ip + wire::Ipv6Header::kSize + 2) != wire::kRoceV2Port) return FrameClass::OtherForUs;
    return FrameClass::RoceForUs;
}
}  // namespace

std::string_view to_string(FrameClass c) noexcept {
    switch (c) {
        case FrameClass::Arp: return "arp";
        case FrameClass::IcmpForUs: return "icmp_for_us";
        case FrameClass::RoceForUs: return "roce_for_us";
        case FrameClass::NotForUs: return "not_for_us";
        case FrameClass::OtherForUs: return "other_for_us";
        case FrameClass::Icmp6ForUs: return "icmp6_for_us";
        case FrameClass::Malformed: return "malformed";
        case FrameClass::MacControl: return "mac_control";
    }
    return "?";
}

FrameClass classify(std::span<const uint8_t> frame, const HostAddress& self) noexcept {
    using wire::load_be16;
    using wire::load_be32;
    if (frame.size() < wire::EthernetHeader::kSize) return FrameClass::Malformed;
    const uint8_t* p = frame.data();
    size_t off = 12;
    uint16_t ethertype = load_be16(p + off);
    if (ethertype == kEtherTypeMacControl) return FrameClass::MacControl;
    if (ethertype == wire::kEtherTypeVlan) {
        if (frame.size() < wire::EthernetHeader::kSize + wire::EthernetHeader::kVlanTagSize)
            return FrameClass::Malformed;
        off += 4;
        ethertype = load_be16(p + off);
    }
    off += 2;
    if (ethertype == kEtherTypeArp) return FrameClass::Arp;

    const bool to_our_mac = std::equal(p, p + 6, self.mac.begin());
    if (ethertype == wire::kEtherTypeIpv6) return classify_ipv6(frame, off, self, to_our_mac);
    if (ethertype != wire::kEtherTypeIpv4) return to_our_mac ? FrameClass::OtherForUs : FrameClass::NotForUs;

    if (frame.size() < off + wire::Ipv4Header::kSize) return FrameClass::Malformed;
    const uint8_t* ip = p + off;
    const size_t ihl = (ip[0] & 0x0f) * 4u;
    if ((ip[0] >> 4) != 4 || ihl < wire::Ipv4Header::kSize || frame.size() < off + ihl) return FrameClass::Malformed;
    // Broadcast and multicast IPv4 are never RoCE or echo for us; other MACs are not ours.
    if (!to_our_mac || load_be32(ip + 16) != self.ipv4) return FrameClass::NotForUs;
    const uint16_t frag = load_be16(ip + 6);
    if ((frag & 0x3fff) != 0) return FrameClass::OtherForUs;  // fragments: RoCE never fragments
    const uint8_t proto = ip[9];
    if (proto == kIpProtoIcmp) return FrameClass::IcmpForUs;
    if (proto != wire::kIpProtoUdp) return FrameClass::OtherForUs;
    if (frame.size() < off + ihl + wire::UdpHeader::kSize) return FrameClass::Malformed;
    if (load_be16(ip + ihl + 2) != wire::kRoceV2Port) return FrameClass::OtherForUs;
    return FrameClass::RoceForUs;
}

}  // namespace rnic::port
