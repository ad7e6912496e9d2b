// Frame builders shared by the port tests.
#pragma once

#include <vector>

#include "rnic/port/arp.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/inet_checksum.hpp"

namespace rnic::port::test {

inline const HostAddress kSelf{{0x02, 0, 0, 0, 0, 0x01}, 0x0A4D0001, 24};  // 10.77.0.1/24
inline const wire::MacAddr kPeerMac{0x02, 0, 0, 0, 0, 0x02};
inline constexpr uint32_t kPeerIp = 0x0A4D0002;

class VectorSink : public transport::FrameSink {
public:
    std::vector<std::vector<uint8_t>> frames;
    size_t room = SIZE_MAX;
    std::span<uint8_t> allocate(size_t length) override {
        if (frames.size() >= room) return {};
        buf_.assign(length, 0);
        return buf_;
    }
    void commit(size_t length) override {
        buf_.resize(length);
        frames.push_back(buf_);
    }

private:
    std::vector<uint8_t> buf_;
};

inline std::vector<uint8_t> arp_frame(uint16_t op, wire::MacAddr smac, uint32_t sip, uint32_t tip,
                                      wire::MacAddr dst = kBroadcastMac, wire::MacAddr tmac = {}) {
    VectorSink s;
    emit_arp(s, smac, ArpPacket{op, smac, sip, tmac, tip, dst});
    return s.frames.at(0);
}

// Ethernet + IPv4 + `proto` payload of `payload_len` bytes, addressed to dst_mac/dst_ip.
inline std::vector<uint8_t> ipv4_frame(uint8_t proto, size_t payload_len, wire::MacAddr dst_mac = kSelf.mac,
                                       uint32_t dst_ip = kSelf.ipv4, uint16_t udp_dport = 4791) {
    std::vector<uint8_t> f(14 + 20 + payload_len, 0);
    std::copy(dst_mac.begin(), dst_mac.end(), f.begin());
    std::copy(kPeerMac.begin(), kPeerMac.end(), f.begin() + 6);
    wire::store_be16(&f[12], 0x0800);
    uint8_t* ip = &f[14];
    ip[0] = 0x45;
    wire::store_be16(ip + 2, static_cast<uint16_t>(20 + payload_len));
    wire::store_be16(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = proto;
    wire::store_be32(ip + 12, kPeerIp);
    wire::store_be32(ip + 16, dst_ip);
    wire::store_be16(ip + 10, wire::ipv4_header_checksum(ip, 20));
    if (proto == 17 && payload_len >= 8) {
        wire::store_be16(ip + 20, 0xC000);
        wire::store_be16(ip + 22, udp_dport);
        wire::store_be16(ip + 24, static_cast<uint16_t>(payload_len));
    }
    return f;
}

inline std::vector<uint8_t> echo_request(size_t data_len, uint16_t id = 0x1234, uint16_t seq = 7) {
    auto f = ipv4_frame(1, 8 + data_len);
    uint8_t* icmp = &f[34];
    icmp[0] = 8;
    wire::store_be16(icmp + 4, id);
    wire::store_be16(icmp + 6, seq);
    for (size_t i = 0; i < data_len; ++i) icmp[8 + i] = static_cast<uint8_t>(i);
    wire::store_be16(icmp + 2, static_cast<uint16_t>(~wire::inet_fold(wire::inet_sum(icmp, 8 + data_len))));
    return f;
}

}  // namespace rnic::port::test
