#include "rnic/port/icmp_echo.hpp"

#include <algorithm>
#include <cstring>

#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/inet_checksum.hpp"

namespace rnic::port {

namespace {
constexpr uint8_t kEchoReply = 0;
constexpr uint8_t kEchoRequest = 8;
constexpr size_t kIcmpHeader = 8;

// Both echo replies reuse the request's bytes: its first `length` bytes (the Ethernet padding of
// short requests is not echoed) in sink space, zero-padded to the Ethernet minimum, addressed
// back to whoever asked. Empty when the sink has no room.
std::span<uint8_t> start_reply(std::span<const uint8_t> request, size_t length, const wire::MacAddr& self_mac,
                               common::FrameSink& sink) {
    const size_t out_len = std::max(length, wire::kMinEthernetFrame);
    auto out = sink.allocate(out_len);
    if (out.size() < out_len) return {};
    uint8_t* p = out.data();
    std::memcpy(p, request.data(), length);
    std::memset(p + length, 0, out_len - length);
    std::copy_n(request.data() + 6, 6, p);
    std::copy(self_mac.begin(), self_mac.end(), p + 6);
    return out.first(out_len);
}
}  // namespace

IcmpResult answer_echo(std::span<const uint8_t> frame, const HostAddress& self, common::FrameSink& sink,
                       IcmpCounters& counters) {
    using wire::load_be16;
    size_t off = wire::EthernetHeader::kSize;
    if (frame.size() >= 18 && load_be16(frame.data() + 12) == wire::kEtherTypeVlan) off += 4;  // reply on the same VLAN
    if (frame.size() < off + wire::Ipv4Header::kSize) {
        ++counters.malformed;
        return IcmpResult::Malformed;
    }
    const uint8_t* ip = frame.data() + off;
    const size_t ihl = (ip[0] & 0x0f) * 4u;
    const size_t total = load_be16(ip + 2);
    if (total < ihl + kIcmpHeader || off + total > frame.size()) {
        ++counters.malformed;
        return IcmpResult::Malformed;
    }
    const uint8_t* icmp = ip + ihl;
    const size_t icmp_len = total - ihl;
    if (icmp[0] != kEchoRequest || icmp[1] != 0) {
        ++counters.other_types;
        return IcmpResult::NotEchoRequest;
    }
    if (wire::inet_fold(wire::inet_sum(icmp, icmp_len)) != 0xffff) {
        ++counters.bad_checksum;
        return IcmpResult::BadChecksum;
    }
    ++counters.echo_requests;

    const auto out = start_reply(frame, off + total, self.mac, sink);
    if (out.empty()) {
        ++counters.no_buffer;
        return IcmpResult::NoBuffer;
    }
    uint8_t* rip = out.data() + off;
    std::memcpy(rip + 12, ip + 16, 4);
    std::memcpy(rip + 16, ip + 12, 4);
    rip[8] = 64;
    wire::store_be16(rip + 10, 0);
    wire::store_be16(rip + 10, wire::ipv4_header_checksum(rip, ihl));
    uint8_t* ricmp = rip + ihl;
    ricmp[0] = kEchoReply;
    wire::store_be16(ricmp + 2, 0);
    wire::store_be16(ricmp + 2, static_cast<uint16_t>(~wire::inet_fold(wire::inet_sum(ricmp, icmp_len))));
    sink.commit(out.size());
    ++counters.echo_replies;
    return IcmpResult::Replied;
}

IcmpResult answer_echo6(const Icmp6Message& m, const HostAddress& self, common::FrameSink& sink,
                        IcmpCounters& counters) {
    if (m.type != kIcmp6EchoRequest || m.code != 0) {
        ++counters.other_types;
        return IcmpResult::NotEchoRequest;
    }
    // An identifier and a sequence number at least; nobody can be answered from :: or a group.
    if (m.body.size() < 4 || is_unspecified(m.src) || is_multicast(m.src) || self.ipv6.empty()) {
        ++counters.malformed;
        return IcmpResult::Malformed;
    }
    ++counters.echo_requests;
    const auto out = start_reply(m.frame, m.frame.size(), self.mac, sink);
    if (out.empty()) {
        ++counters.no_buffer;
        return IcmpResult::NoBuffer;
    }
    uint8_t* ip = out.data() + m.l3;
    const Ipv6Addr& from = self.owns(m.dst) ? m.dst : self.source_for(m.src);
    wire::store_be32(ip, 0x60000000);  // version 6, traffic class and flow label of our own
    ip[7] = 64;
    std::copy(from.begin(), from.end(), ip + 8);
    std::copy(m.src.begin(), m.src.end(), ip + 24);
    uint8_t* icmp = ip + wire::Ipv6Header::kSize;
    const size_t icmp_len = m.frame.size() - m.l3 - wire::Ipv6Header::kSize;
    icmp[0] = kIcmp6EchoReply;
    wire::store_be16(icmp + 2, icmp6_checksum(ip, icmp, icmp_len));
    sink.commit(out.size());
    ++counters.echo_replies;
    return IcmpResult::Replied;
}

}  // namespace rnic::port
