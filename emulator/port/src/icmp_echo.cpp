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
}  // namespace

IcmpResult answer_echo(std::span<const uint8_t> frame, const HostAddress& self, transport::FrameSink& sink,
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

    // The Ethernet padding of short requests is not echoed; it is padded again if needed.
    const size_t len = off + total;
    const size_t out_len = std::max(len, wire::kMinEthernetFrame);
    auto out = sink.allocate(out_len);
    if (out.size() < out_len) {
        ++counters.no_buffer;
        return IcmpResult::NoBuffer;
    }
    uint8_t* p = out.data();
    std::memcpy(p, frame.data(), len);
    std::memset(p + len, 0, out_len - len);
    std::copy_n(frame.data() + 6, 6, p);  // back to whoever asked
    std::copy(self.mac.begin(), self.mac.end(), p + 6);
    uint8_t* rip = p + off;
    std::memcpy(rip + 12, ip + 16, 4);
    std::memcpy(rip + 16, ip + 12, 4);
    rip[8] = 64;
    wire::store_be16(rip + 10, 0);
    wire::store_be16(rip + 10, wire::ipv4_header_checksum(rip, ihl));
    uint8_t* ricmp = rip + ihl;
    ricmp[0] = kEchoReply;
    wire::store_be16(ricmp + 2, 0);
    wire::store_be16(ricmp + 2, static_cast<uint16_t>(~wire::inet_fold(wire::inet_sum(ricmp, icmp_len))));
    sink.commit(out_len);
    ++counters.echo_replies;
    return IcmpResult::Replied;
}

}  // namespace rnic::port
