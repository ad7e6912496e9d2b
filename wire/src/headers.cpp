#include "rnic/wire/headers.hpp"

#include <cstring>

namespace rnic::wire {

void EthernetHeader::write(uint8_t* p) const noexcept {
    std::memcpy(p, dst.data(), 6);
    std::memcpy(p + 6, src.data(), 6);
    size_t off = 12;
    if (vlan_tci) {
        store_be16(p + off, kEtherTypeVlan);
        store_be16(p + off + 2, *vlan_tci);
        off += kVlanTagSize;
    }
    store_be16(p + off, ethertype);
}

Ipv4Header Ipv4Header::read(const uint8_t* p) noexcept {
    Ipv4Header h;
    h.ihl = p[0] & 0x0F;
    h.dscp = p[1] >> 2;
    h.ecn = p[1] & 0x3;
    h.total_length = load_be16(p + 2);
    h.id = load_be16(p + 4);
    h.flags = p[6] >> 5;
    h.fragment_offset = load_be16(p + 6) & 0x1FFF;
    h.ttl = p[8];
    h.protocol = p[9];
    h.checksum = load_be16(p + 10);
    h.src = load_be32(p + 12);
    h.dst = load_be32(p + 16);
    return h;
}

void Ipv4Header::write(uint8_t* p) const noexcept {
    p[0] = static_cast<uint8_t>(0x40 | (ihl & 0x0F));
    p[1] = static_cast<uint8_t>((dscp << 2) | (ecn & 0x3));
    store_be16(p + 2, total_length);
    store_be16(p + 4, id);
    store_be16(p + 6, static_cast<uint16_t>(((flags & 0x7) << 13) | (fragment_offset & 0x1FFF)));
    p[8] = ttl;
    p[9] = protocol;
    store_be16(p + 10, checksum);
    store_be32(p + 12, src);
    store_be32(p + 16, dst);
}

Ipv6Header Ipv6Header::read(const uint8_t* p) noexcept {
    Ipv6Header h;
    const uint32_t w = load_be32(p);
    h.traffic_class = static_cast<uint8_t>(w >> 20);
    h.flow_label = w & 0xFFFFF;
    h.payload_length = load_be16(p + 4);
    h.next_header = p[6];
    h.hop_limit = p[7];
    std::memcpy(h.src.data(), p + 8, 16);
    std::memcpy(h.dst.data(), p + 24, 16);
    return h;
}

void Ipv6Header::write(uint8_t* p) const noexcept {
    store_be32(p, (6u << 28) | (uint32_t{traffic_class} << 20) | (flow_label & 0xFFFFF));
    store_be16(p + 4, payload_length);
    p[6] = next_header;
    p[7] = hop_limit;
    std::memcpy(p + 8, src.data(), 16);
    std::memcpy(p + 24, dst.data(), 16);
}

UdpHeader UdpHeader::read(const uint8_t* p) noexcept {
    return {load_be16(p), load_be16(p + 2), load_be16(p + 4), load_be16(p + 6)};
}

void UdpHeader::write(uint8_t* p) const noexcept {
    store_be16(p, src_port);
    store_be16(p + 2, dst_port);
    store_be16(p + 4, length);
    store_be16(p + 6, checksum);
}

Bth Bth::read(const uint8_t* p) noexcept {
    Bth b;
    b.opcode = p[0];
    b.solicited = p[1] & 0x80;
    b.mig_req = p[1] & 0x40;
    b.pad_count = (p[1] >> 4) & 0x3;
    b.tver = p[1] & 0x0F;
    b.pkey = load_be16(p + 2);
    b.fecn = p[4] & 0x80;
    b.becn = p[4] & 0x40;
    b.resv6 = p[4] & 0x3F;
    b.dest_qp = load_be24(p + 5);
    b.ack_req = p[8] & 0x80;
    b.resv7 = p[8] & 0x7F;
    b.psn = load_be24(p + 9);
    return b;
}

void Bth::write(uint8_t* p) const noexcept {
    p[0] = opcode;
    p[1] = static_cast<uint8_t>((solicited ? 0x80 : 0) | (mig_req ? 0x40 : 0) |
                                ((pad_count & 0x3) << 4) | (tver & 0x0F));
    store_be16(p + 2, pkey);
    p[4] = static_cast<uint8_t>((fecn ? 0x80 : 0) | (becn ? 0x40 : 0) | (resv6 & 0x3F));
    store_be24(p + 5, dest_qp);
    p[8] = static_cast<uint8_t>((ack_req ? 0x80 : 0) | (resv7 & 0x7F));
    store_be24(p + 9, psn);
}

Reth Reth::read(const uint8_t* p) noexcept {
    return {load_be64(p), load_be32(p + 8), load_be32(p + 12)};
}
void Reth::write(uint8_t* p) const noexcept {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be32(p + 12, dma_length);
}

Aeth Aeth::read(const uint8_t* p) noexcept { return {p[0], load_be24(p + 1)}; }
void Aeth::write(uint8_t* p) const noexcept {
    p[0] = syndrome;
    store_be24(p + 1, msn);
}

AtomicEth AtomicEth::read(const uint8_t* p) noexcept {
    return {load_be64(p), load_be32(p + 8), load_be64(p + 12), load_be64(p + 20)};
}
void AtomicEth::write(uint8_t* p) const noexcept {
    store_be64(p, va);
    store_be32(p + 8, rkey);
    store_be64(p + 12, swap_add);
    store_be64(p + 20, compare);
}

AtomicAckEth AtomicAckEth::read(const uint8_t* p) noexcept { return {load_be64(p)}; }
void AtomicAckEth::write(uint8_t* p) const noexcept { store_be64(p, original); }

ImmDt ImmDt::read(const uint8_t* p) noexcept { return {load_be32(p)}; }
void ImmDt::write(uint8_t* p) const noexcept { store_be32(p, value); }

Ieth Ieth::read(const uint8_t* p) noexcept { return {load_be32(p)}; }
void Ieth::write(uint8_t* p) const noexcept { store_be32(p, rkey); }

Feth Feth::read(const uint8_t* p) noexcept {
    const uint32_t v = load_be32(p);
    return {static_cast<uint8_t>(v & 0xF), static_cast<uint8_t>((v >> 4) & 0x3), v >> 6};
}
void Feth::write(uint8_t* p) const noexcept {
    store_be32(p, (reserved << 6) | (uint32_t{selectivity} & 0x3) << 4 | (placement & 0xFu));
}

Deth Deth::read(const uint8_t* p) noexcept { return {load_be32(p), p[4], load_be24(p + 5)}; }
void Deth::write(uint8_t* p) const noexcept {
    store_be32(p, qkey);
    p[4] = reserved;
    store_be24(p + 5, src_qp);
}

}  // namespace rnic::wire
