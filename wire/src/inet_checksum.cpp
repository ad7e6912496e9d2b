#include "rnic/wire/inet_checksum.hpp"

#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::wire {

uint32_t inet_sum(const uint8_t* data, size_t length, uint32_t sum) noexcept {
    uint64_t s = sum;
    size_t i = 0;
    for (; i + 1 < length; i += 2) s += load_be16(data + i);
    if (i < length) s += uint32_t{data[i]} << 8;
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return static_cast<uint32_t>(s);
}

uint16_t inet_fold(uint32_t sum) noexcept {
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

uint16_t ipv4_header_checksum(const uint8_t* header, size_t header_length) noexcept {
    // The checksum field itself counts as zero.
    uint32_t sum = inet_sum(header, 10);
    sum = inet_sum(header + 12, header_length - 12, sum);
    return static_cast<uint16_t>(~inet_fold(sum));
}

bool ipv4_header_checksum_ok(const uint8_t* header, size_t header_length) noexcept {
    return inet_fold(inet_sum(header, header_length)) == 0xFFFF;
}

uint32_t pseudo_header_sum(const uint8_t* ip, uint8_t next_header, size_t upper_length) noexcept {
    // Source and destination address, then the protocol and the upper-layer length (IPv6 puts
    // them in 32-bit fields; summed as 16-bit words the result is the same).
    uint32_t sum = (ip[0] >> 4) == 4 ? inet_sum(ip + 12, 8) : inet_sum(ip + 8, 32);
    sum += next_header;
    sum += static_cast<uint32_t>(upper_length >> 16) + static_cast<uint32_t>(upper_length & 0xFFFF);
    return inet_fold(sum);
}

uint16_t udp_checksum(const uint8_t* ip, const uint8_t* udp, size_t udp_length) noexcept {
    uint32_t sum = pseudo_header_sum(ip, kIpProtoUdp, udp_length);
    sum = inet_sum(udp, 6, sum);  // ports and length; the checksum field counts as zero
    sum = inet_sum(udp + 8, udp_length - 8, sum);
    const uint16_t c = static_cast<uint16_t>(~inet_fold(sum));
    return c == 0 ? 0xFFFF : c;
}

}  // namespace rnic::wire
