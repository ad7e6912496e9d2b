#include "rnic/port/icmp6.hpp"

#include <algorithm>
#include <cstring>

#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/inet_checksum.hpp"

namespace rnic::port {

uint16_t icmp6_checksum(const uint8_t* ip6, const uint8_t* icmp, size_t length) noexcept {
    uint32_t sum = wire::pseudo_header_sum(ip6, kIpProtoIcmp6, length);
    sum = wire::inet_sum(icmp, 2, sum);  // type and code; the checksum counts as zero
    sum = wire::inet_sum(icmp + kIcmp6HeaderSize, length - kIcmp6HeaderSize, sum);
    return static_cast<uint16_t>(~wire::inet_fold(sum));
}

wire::Expected<Icmp6Message, Icmp6Error> parse_icmp6(std::span<const uint8_t> frame) noexcept {
    using U = wire::Unexpected<Icmp6Error>;
    size_t l3 = wire::EthernetHeader::kSize;
    if (frame.size() >= l3 + wire::EthernetHeader::kVlanTagSize &&
        wire::load_be16(frame.data() + 12) == wire::kEtherTypeVlan)
        l3 += wire::EthernetHeader::kVlanTagSize;
    if (frame.size() < l3 + wire::Ipv6Header::kSize) return U{Icmp6Error::Malformed};
    const uint8_t* ip = frame.data() + l3;
    const size_t payload = wire::load_be16(ip + 4);
    if ((ip[0] >> 4) != 6 || ip[6] != kIpProtoIcmp6 || payload < kIcmp6HeaderSize ||
        l3 + wire::Ipv6Header::kSize + payload > frame.size())
        return U{Icmp6Error::Malformed};
    const uint8_t* icmp = ip + wire::Ipv6Header::kSize;
    // RFC 1071 verification: the sum over everything, the checksum included, is all ones.
    if (wire::inet_fold(wire::inet_sum(icmp, payload, wire::pseudo_header_sum(ip, kIpProtoIcmp6, payload))) != 0xFFFF)
        return U{Icmp6Error::BadChecksum};

    Icmp6Message m;
    m.frame = frame.first(l3 + wire::Ipv6Header::kSize + payload);
    m.l3 = l3;
    std::copy_n(frame.data(), 6, m.eth_dst.begin());
    std::copy_n(frame.data() + 6, 6, m.eth_src.begin());
    std::copy_n(ip + 8, 16, m.src.begin());
    std::copy_n(ip + 24, 16, m.dst.begin());
    m.hop_limit = ip[7];
    m.type = icmp[0];
    m.code = icmp[1];
    m.body = std::span(icmp + kIcmp6HeaderSize, payload - kIcmp6HeaderSize);
    return m;
}

bool emit_icmp6(common::FrameSink& sink, const wire::MacAddr& eth_dst, const wire::MacAddr& eth_src,
                const Ipv6Addr& src, const Ipv6Addr& dst, uint8_t hop_limit, uint8_t type, uint8_t code,
                std::span<const uint8_t> body) {
    const size_t icmp_len = kIcmp6HeaderSize + body.size();
    const size_t len = wire::EthernetHeader::kSize + wire::Ipv6Header::kSize + icmp_len;
    const size_t out_len = std::max(len, wire::kMinEthernetFrame);
    auto out = sink.allocate(out_len);
    if (out.size() < out_len) return false;
    uint8_t* p = out.data();
    std::memset(p, 0, out_len);
    wire::EthernetHeader eth;
    eth.dst = eth_dst;
    eth.src = eth_src;
    eth.ethertype = wire::kEtherTypeIpv6;
    eth.write(p);
    uint8_t* ip = p + wire::EthernetHeader::kSize;
    wire::Ipv6Header h;
    h.payload_length = static_cast<uint16_t>(icmp_len);
    h.next_header = kIpProtoIcmp6;
    h.hop_limit = hop_limit;
    h.src = src;
    h.dst = dst;
    h.write(ip);
    uint8_t* icmp = ip + wire::Ipv6Header::kSize;
    icmp[0] = type;
    icmp[1] = code;
    std::copy(body.begin(), body.end(), icmp + kIcmp6HeaderSize);
    wire::store_be16(icmp + 2, icmp6_checksum(ip, icmp, icmp_len));
    sink.commit(out_len);
    return true;
}

}  // namespace rnic::port
