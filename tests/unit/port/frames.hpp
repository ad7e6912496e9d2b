// Frame builders shared by the port tests.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "rnic/port/arp.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/port/icmp6.hpp"
#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/inet_checksum.hpp"
#include "test_addresses.hpp"

namespace rnic::port::test {

class VectorSink : public common::FrameSink {
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

// Ethernet + IPv6 + `next` payload of `payload_len` bytes (a UDP header when next is 17).
inline std::vector<uint8_t> ipv6_frame(uint8_t next, size_t payload_len, wire::MacAddr dst_mac = kSelf.mac,
                                       const Ipv6Addr& dst = kSelfIp6, uint16_t udp_dport = 4791,
                                       const Ipv6Addr& src = kPeerIp6) {
    std::vector<uint8_t> f(14 + 40 + payload_len, 0);
    std::copy(dst_mac.begin(), dst_mac.end(), f.begin());
    std::copy(kPeerMac.begin(), kPeerMac.end(), f.begin() + 6);
    wire::store_be16(&f[12], 0x86DD);
    uint8_t* ip = &f[14];
    ip[0] = 0x60;
    wire::store_be16(ip + 4, static_cast<uint16_t>(payload_len));
    ip[6] = next;
    ip[7] = 64;
    std::copy(src.begin(), src.end(), ip + 8);
    std::copy(dst.begin(), dst.end(), ip + 24);
    if (next == 17 && payload_len >= 8) {
        wire::store_be16(ip + 40, 0xC000);
        wire::store_be16(ip + 42, udp_dport);
        wire::store_be16(ip + 44, static_cast<uint16_t>(payload_len));
    }
    return f;
}

// An ICMPv6 message with a correct checksum, from the peer's MAC.
inline std::vector<uint8_t> icmp6_frame(uint8_t type, std::vector<uint8_t> body, const Ipv6Addr& src,
                                        const Ipv6Addr& dst, wire::MacAddr dst_mac, uint8_t hop_limit = 255,
                                        uint8_t code = 0) {
    VectorSink s;
    emit_icmp6(s, dst_mac, kPeerMac, src, dst, hop_limit, type, code, body);
    return s.frames.at(0);
}

// Reserved/flags word, target and, when given, one link-layer address option of `option` type.
inline std::vector<uint8_t> nd_body(uint8_t flags, const Ipv6Addr& target, uint8_t option = 0,
                                    wire::MacAddr mac = kPeerMac) {
    std::vector<uint8_t> b(20, 0);
    b[0] = flags;
    std::copy(target.begin(), target.end(), b.begin() + 4);
    if (option) {
        b.push_back(option);
        b.push_back(1);
        b.insert(b.end(), mac.begin(), mac.end());
    }
    return b;
}

// A neighbour solicitation from the peer (fd77::2) for `target`, to its solicited-node group.
inline std::vector<uint8_t> solicitation(const Ipv6Addr& target, const Ipv6Addr& src = kPeerIp6,
                                         uint8_t hop_limit = 255) {
    const Ipv6Addr group = solicited_node(target);
    return icmp6_frame(135, nd_body(0, target, is_unspecified(src) ? 0 : 1), src, group, multicast_mac(group),
                       hop_limit);
}

// A neighbour advertisement from the peer for `target` (solicited: to us; else to all-nodes).
inline std::vector<uint8_t> advertisement(const Ipv6Addr& target, uint8_t flags, wire::MacAddr mac = kPeerMac,
                                          uint8_t hop_limit = 255) {
    const bool solicited = flags & 0x40;
    return icmp6_frame(136, nd_body(flags, target, 2, mac), target, solicited ? kSelfIp6 : kAllNodes,
                       solicited ? kSelf.mac : multicast_mac(kAllNodes), hop_limit);
}

inline std::vector<uint8_t> echo6_request(size_t data_len, const Ipv6Addr& dst = kSelfIp6,
                                          const Ipv6Addr& src = kPeerIp6) {
    std::vector<uint8_t> body(4 + data_len);
    wire::store_be16(body.data(), 0x1234);
    wire::store_be16(body.data() + 2, 7);
    for (size_t i = 0; i < data_len; ++i) body[4 + i] = static_cast<uint8_t>(i);
    return icmp6_frame(128, body, src, dst, is_multicast(dst) ? multicast_mac(dst) : kSelf.mac, 64);
}

// Frames from other builders (scapy), pasted as hex.
inline std::vector<uint8_t> from_hex(const char* hex) {
    std::vector<uint8_t> out;
    for (const char* p = hex; p[0] && p[1]; p += 2)
        out.push_back(static_cast<uint8_t>(std::stoi(std::string(p, 2), nullptr, 16)));
    return out;
}

// A frame the port built or answered, parsed as ICMPv6: its checksum and lengths must be right.
inline Icmp6Message icmp6_of(const std::vector<uint8_t>& frame) {
    auto m = parse_icmp6(frame);
    REQUIRE(m);
    return *m;
}

inline Ipv6Addr ip6_at(const std::vector<uint8_t>& frame, size_t offset) {
    Ipv6Addr a;
    std::copy_n(frame.begin() + static_cast<std::ptrdiff_t>(offset), 16, a.begin());
    return a;
}

}  // namespace rnic::port::test
