// Wire headers of a RoCEv2 frame as plain values, each with read() from and write() to the
// exact wire layout. Reserved bits are carried, so parse -> build reproduces a frame bit for
// bit. Callers must have checked that kSize bytes are available; the parser does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr size_t kIcrcSize = 4;
inline constexpr size_t kMinEthernetFrame = 60;  // without FCS

using MacAddr = std::array<uint8_t, 6>;

struct EthernetHeader {
    static constexpr size_t kSize = 14;
    static constexpr size_t kVlanTagSize = 4;
    MacAddr dst{};
    MacAddr src{};
    std::optional<uint16_t> vlan_tci;  // 802.1Q tag (PCP, DEI, VID) when present
    uint16_t ethertype = kEtherTypeIpv4;

    size_t size() const noexcept { return kSize + (vlan_tci ? kVlanTagSize : 0); }
    void write(uint8_t* p) const noexcept;
};

struct Ipv4Header {
    static constexpr size_t kSize = 20;  // without options
    uint8_t ihl = 5;                     // in 32-bit words
    uint8_t dscp = 0;
    uint8_t ecn = 0;
    uint16_t total_length = 0;
    uint16_t id = 0;
    uint8_t flags = 0x2;  // bit 1 = DF, bit 0 = MF
    uint16_t fragment_offset = 0;
    uint8_t ttl = 64;
    uint8_t protocol = kIpProtoUdp;
    uint16_t checksum = 0;
    uint32_t src = 0;  // host order, e.g. 0x0A000001 for 10.0.0.1
    uint32_t dst = 0;

    bool dont_fragment() const noexcept { return flags & 0x2; }
    bool more_fragments() const noexcept { return flags & 0x1; }
    static Ipv4Header read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;  // writes 20 bytes; options are the caller's
};

struct Ipv6Header {
    static constexpr size_t kSize = 40;
    uint8_t traffic_class = 0;  // DSCP << 2 | ECN
    uint32_t flow_label = 0;    // 20 bits
    uint16_t payload_length = 0;
    uint8_t next_header = kIpProtoUdp;
    uint8_t hop_limit = 64;
    std::array<uint8_t, 16> src{};
    std::array<uint8_t, 16> dst{};

    static Ipv6Header read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

struct UdpHeader {
    static constexpr size_t kSize = 8;
    uint16_t src_port = 0;
    uint16_t dst_port = kRoceV2Port;
    uint16_t length = 0;
    uint16_t checksum = 0;

    static UdpHeader read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Base Transport Header (IBA 9.2).
struct Bth {
    static constexpr size_t kSize = 12;
    uint8_t opcode = 0;
    bool solicited = false;  // SE
    bool mig_req = false;    // M
    uint8_t pad_count = 0;   // 2 bits
    uint8_t tver = 0;        // 4 bits, must be 0
    uint16_t pkey = 0xFFFF;
    bool fecn = false;
    bool becn = false;
    uint8_t resv6 = 0;  // 6 bits, carried for bit-exact round trips
    uint32_t dest_qp = 0;  // 24 bits
    bool ack_req = false;
    uint8_t resv7 = 0;  // 7 bits
    uint32_t psn = 0;   // 24 bits

    static Bth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// RDMA Extended Transport Header (IBA 9.3.3): WRITE first/only, READ request.
struct Reth {
    static constexpr size_t kSize = 16;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t dma_length = 0;

    static Reth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// ACK Extended Transport Header (IBA 9.3.5): syndrome and MSN. See aeth.hpp for the syndrome.
struct Aeth {
    static constexpr size_t kSize = 4;
    uint8_t syndrome = 0;
    uint32_t msn = 0;  // 24 bits

    static Aeth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Atomic Extended Transport Header (IBA 9.3.4).
struct AtomicEth {
    static constexpr size_t kSize = 28;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint64_t swap_add = 0;
    uint64_t compare = 0;

    static AtomicEth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Atomic ACK Extended Transport Header (IBA 9.3.6): the original remote value.
struct AtomicAckEth {
    static constexpr size_t kSize = 8;
    uint64_t original = 0;

    static AtomicAckEth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Immediate data (IBA 9.3.7). Kept as the big-endian value read off the wire; verbs hands it
// to applications in network order (__be32), so consumers convert back with store_be32.
struct ImmDt {
    static constexpr size_t kSize = 4;
    uint32_t value = 0;

    static ImmDt read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Invalidate Extended Transport Header (IBA 9.3.8): the rkey to invalidate.
struct Ieth {
    static constexpr size_t kSize = 4;
    uint32_t rkey = 0;

    static Ieth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// FLUSH Extended Transport Header (IBTA 1.5): bits 3-0 placement type (1 global visibility,
// 2 persistence), bits 5-4 selectivity level (0 the RETH's range, 1 the whole region), the
// other 26 bits reserved (carried for bit-exact round trips).
struct Feth {
    static constexpr size_t kSize = 4;
    static constexpr uint8_t kPlacementGlobal = 1;
    static constexpr uint8_t kPlacementPersistent = 2;
    static constexpr uint8_t kSelectRange = 0;
    static constexpr uint8_t kSelectRegion = 1;
    uint8_t placement = 0;    // 4 bits
    uint8_t selectivity = 0;  // 2 bits
    uint32_t reserved = 0;    // 26 bits

    static Feth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// Datagram Extended Transport Header (IBA 9.3.2): UD Q_Key and source QP.
struct Deth {
    static constexpr size_t kSize = 8;
    uint32_t qkey = 0;
    uint8_t reserved = 0;
    uint32_t src_qp = 0;  // 24 bits

    static Deth read(const uint8_t* p) noexcept;
    void write(uint8_t* p) const noexcept;
};

// RoCEv2 Congestion Notification Packet body (IBTA annex A17): 16 reserved bytes after the BTH.
inline constexpr size_t kCnpReservedSize = 16;

// The extension headers that may follow a BTH; which ones are present is dictated by the
// opcode table.
struct ExtHeaders {
    std::optional<Deth> deth;
    std::optional<Reth> reth;
    std::optional<AtomicEth> atomic_eth;
    std::optional<Aeth> aeth;
    std::optional<AtomicAckEth> atomic_ack_eth;
    std::optional<ImmDt> immdt;
    std::optional<Ieth> ieth;
    std::optional<Feth> feth;
};

}  // namespace rnic::wire
