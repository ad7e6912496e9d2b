#include "rnic/wire/rdma_cm_header.hpp"

#include <algorithm>
#include <cstring>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {
namespace {

constexpr size_t kAddrSize = 16;
constexpr size_t kIpv4Offset = 12;  // cma_ip_addr.ip4.addr follows three zero words

Gid read_addr(const uint8_t* p, uint8_t ip_version) noexcept {
    if (ip_version == 4) return Gid::from_ipv4(load_be32(p + kIpv4Offset));
    std::array<uint8_t, kAddrSize> raw;
    std::memcpy(raw.data(), p, kAddrSize);
    return Gid::from_ipv6(raw);
}

void write_addr(uint8_t* p, const Gid& addr, uint8_t ip_version) noexcept {
    if (ip_version == 4) {
        std::memset(p, 0, kIpv4Offset);
        store_be32(p + kIpv4Offset, addr.ipv4());
    } else {
        std::memcpy(p, addr.raw.data(), kAddrSize);
    }
}

}  // namespace

std::string_view rdma_port_space_name(RdmaPortSpace ps) noexcept {
    switch (ps) {
        case RdmaPortSpace::Ipoib:
            return "IPoIB";
        case RdmaPortSpace::Tcp:
            return "TCP";
        case RdmaPortSpace::Udp:
            return "UDP";
        case RdmaPortSpace::Ib:
            return "IB";
    }
    return "unknown";
}

std::optional<RdmaCmService> parse_rdma_cm_service_id(uint64_t service_id) noexcept {
    if (service_id >> 32 != 0) return std::nullopt;
    const auto ps = static_cast<RdmaPortSpace>(service_id >> 16);
    switch (ps) {
        case RdmaPortSpace::Ipoib:
        case RdmaPortSpace::Tcp:
        case RdmaPortSpace::Udp:
        case RdmaPortSpace::Ib:
            return RdmaCmService{ps, static_cast<uint16_t>(service_id)};
    }
    return std::nullopt;
}

RdmaCmIpHeader RdmaCmIpHeader::make(const Gid& src, const Gid& dst, uint16_t port) noexcept {
    RdmaCmIpHeader h;
    h.ip_version = src.is_ipv4_mapped() && dst.is_ipv4_mapped() ? 4 : 6;
    h.src_port = port;
    h.src_addr = src;
    h.dst_addr = dst;
    return h;
}

RdmaCmIpHeader RdmaCmIpHeader::read(const uint8_t* p) noexcept {
    RdmaCmIpHeader h;
    h.version = p[0];
    h.ip_version = p[1] >> 4;
    h.src_port = load_be16(p + 2);
    h.src_addr = read_addr(p + 4, h.ip_version);
    h.dst_addr = read_addr(p + 4 + kAddrSize, h.ip_version);
    return h;
}

void RdmaCmIpHeader::write(uint8_t* p) const noexcept {
    p[0] = version;
    p[1] = static_cast<uint8_t>(ip_version << 4);
    store_be16(p + 2, src_port);
    write_addr(p + 4, src_addr, ip_version);
    write_addr(p + 4 + kAddrSize, dst_addr, ip_version);
}

Expected<RdmaCmIpHeader, ParseError> parse_rdma_cm_ip_header(std::span<const uint8_t> private_data) {
    if (private_data.size() < RdmaCmIpHeader::kSize)
        return Unexpected{ParseError{ParseErrc::TruncatedRdmaCmHeader, private_data.size()}};
    if (private_data[0] != kRdmaCmVersion) return Unexpected{ParseError{ParseErrc::BadRdmaCmVersion, 0}};
    const uint8_t ip_version = private_data[1] >> 4;
    if (ip_version != 4 && ip_version != 6) return Unexpected{ParseError{ParseErrc::BadRdmaCmIpVersion, 1}};
    return RdmaCmIpHeader::read(private_data.data());
}

bool put_rdma_cm_private_data(const RdmaCmIpHeader& header, std::span<const uint8_t> user_data,
                              std::span<uint8_t> private_data) noexcept {
    if (private_data.size() < RdmaCmIpHeader::kSize || user_data.size() > private_data.size() - RdmaCmIpHeader::kSize)
        return false;
    header.write(private_data.data());
    uint8_t* rest = private_data.data() + RdmaCmIpHeader::kSize;
    std::copy(user_data.begin(), user_data.end(), rest);
    std::fill(rest + user_data.size(), private_data.data() + private_data.size(), uint8_t{0});
    return true;
}

}  // namespace rnic::wire
