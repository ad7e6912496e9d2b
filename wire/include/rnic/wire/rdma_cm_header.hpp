// What rdma_cm (Linux drivers/infiniband/core/cma.c; librdmacm over it) puts on top of the IB CM
// so that IP-addressed applications can use it:
//  - the service ID names a port space and a port: (port space << 16) + port, so a TCP-space
//    listener on port 7174 is service 0x0000000001061C06 (cma_get_service_id);
//  - the first 36 bytes of REQ and SIDR_REQ private data are a header with the connecting side's
//    IP addresses and port (struct cma_hdr), so the passive side learns who connects from where;
//    the consumer's private data follows it (56 bytes left in a REQ, 180 in a SIDR_REQ).
// Ids bound to AF_IB addresses (port space IB with native IB addressing) send no header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/expected.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/parse_error.hpp"

namespace rnic::wire {

// enum rdma_ucm_port_space of rdma-core's <rdma/rdma_cma.h>.
enum class RdmaPortSpace : uint16_t {
    Ipoib = 0x0002,
    Tcp = 0x0106,  // RC ids
    Udp = 0x0111,  // UD ids (SIDR)
    Ib = 0x013F,
};
std::string_view rdma_port_space_name(RdmaPortSpace ps) noexcept;  // "TCP", "UDP", "IB", "IPoIB"

constexpr uint64_t rdma_cm_service_id(RdmaPortSpace ps, uint16_t port) noexcept {
    return (uint64_t{static_cast<uint16_t>(ps)} << 16) | port;
}

struct RdmaCmService {
    RdmaPortSpace port_space = RdmaPortSpace::Tcp;
    uint16_t port = 0;
    friend bool operator==(const RdmaCmService&, const RdmaCmService&) = default;
};
// The port space and port of a service ID rdma_cm builds (upper 24 bits zero, bits 16-31 one of
// the four port spaces); nullopt for any other service ID.
std::optional<RdmaCmService> parse_rdma_cm_service_id(uint64_t service_id) noexcept;

inline constexpr uint8_t kRdmaCmVersion = 0;                                          // CMA_VERSION
inline constexpr size_t kRdmaCmReqUserDataSize = kCmReqPrivateDataSize - 36;          // 56
inline constexpr size_t kRdmaCmSidrReqUserDataSize = kCmSidrReqPrivateDataSize - 36;  // 180

// struct cma_hdr: byte 0 version, byte 1 IP version in its upper nibble, bytes 2-3 the sender's
// port, then source and destination address, 16 bytes each. An IPv4 address sits in the last 4
// bytes of its field after 12 zero bytes (not the ::ffff: mapped form).
struct RdmaCmIpHeader {
    static constexpr size_t kSize = 36;
    uint8_t version = kRdmaCmVersion;
    uint8_t ip_version = 4;  // 4 or 6
    uint16_t src_port = 0;   // the active side's port; the passive side's is in the service ID
    Gid src_addr;            // IPv4 addresses as IPv4-mapped GIDs, as everywhere in this library
    Gid dst_addr;

    // IPv4 when both addresses are IPv4-mapped, else IPv6.
    static RdmaCmIpHeader make(const Gid& src, const Gid& dst, uint16_t src_port) noexcept;
    static RdmaCmIpHeader read(const uint8_t* p) noexcept;  // kSize bytes, unchecked
    void write(uint8_t* p) const noexcept;
    friend bool operator==(const RdmaCmIpHeader&, const RdmaCmIpHeader&) = default;
};

// The header at the start of REQ or SIDR_REQ private data, checked as Linux's cma_save_ip_info
// does: BadRdmaCmVersion (version not 0; Linux: EINVAL), BadRdmaCmIpVersion (neither 4 nor 6;
// EAFNOSUPPORT), TruncatedRdmaCmHeader (fewer than 36 bytes). Offsets within `private_data`.
Expected<RdmaCmIpHeader, ParseError> parse_rdma_cm_ip_header(std::span<const uint8_t> private_data);

// Header, then the consumer's bytes, then zeros, into the whole of `private_data`; false (and
// nothing written) when header and user data do not fit.
bool put_rdma_cm_private_data(const RdmaCmIpHeader& header, std::span<const uint8_t> user_data,
                              std::span<uint8_t> private_data) noexcept;

// The consumer's part of REQ or SIDR_REQ private data: what follows the header, as rdma_cm hands
// it up in the CONNECT_REQUEST event (private_data_len = full size - 36).
inline std::span<const uint8_t> rdma_cm_user_data(std::span<const uint8_t> private_data) noexcept {
    return private_data.size() < RdmaCmIpHeader::kSize ? std::span<const uint8_t>{}
                                                       : private_data.subspan(RdmaCmIpHeader::kSize);
}

}  // namespace rnic::wire
