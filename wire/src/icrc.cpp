#include "rnic/wire/icrc.hpp"

#include <zlib.h>

#include <array>
#include <cstring>

#include "rnic/wire/headers.hpp"

namespace rnic::wire {

uint32_t compute_icrc(const uint8_t* ip, size_t ip_header_length, size_t covered_length) noexcept {
    // Mask a private copy of the variant header bytes; the frame itself stays untouched.
    constexpr size_t kMaxIpHeader = 60;
    std::array<uint8_t, 8 + kMaxIpHeader + UdpHeader::kSize + Bth::kSize> head;
    const size_t masked_length = ip_header_length + UdpHeader::kSize + Bth::kSize;
    std::memset(head.data(), 0xFF, 8);
    uint8_t* h = head.data() + 8;
    std::memcpy(h, ip, masked_length);
    if ((ip[0] >> 4) == 4) {
        h[1] = 0xFF;   // DSCP/ECN
        h[8] = 0xFF;   // TTL
        h[10] = 0xFF;  // header checksum
        h[11] = 0xFF;
    } else {
        h[0] |= 0x0F;  // traffic class, high nibble
        h[1] = 0xFF;   // traffic class, low nibble + flow label
        h[2] = 0xFF;
        h[3] = 0xFF;
        h[7] = 0xFF;  // hop limit
    }
    uint8_t* udp = h + ip_header_length;
    udp[6] = 0xFF;
    udp[7] = 0xFF;
    udp[UdpHeader::kSize + 4] = 0xFF;  // BTH FECN, BECN, resv6

    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, head.data(), static_cast<uInt>(8 + masked_length));
    crc = crc32(crc, ip + masked_length, static_cast<uInt>(covered_length - masked_length));
    return static_cast<uint32_t>(crc);
}

}  // namespace rnic::wire
