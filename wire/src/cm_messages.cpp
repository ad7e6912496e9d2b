// Each CM message's layout in the 232-byte MAD data area (IBA vol. 1 tables 106-120). Offsets are
// the IBTA's byte numbers; sub-byte fields are given as the IBTA's Byte[Bit] position, bit 0 being
// the most significant, exactly as Linux's CM_FIELD_BLOC tables count them.
#include "rnic/wire/cm_messages.hpp"

#include <cstring>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {
namespace {

constexpr uint32_t mask_of(unsigned width) {
    return (1u << width) - 1;
}

// `width` bits starting at IBTA bit `bit` of byte `p[0]`; the field never crosses the byte.
uint8_t get_bits(const uint8_t* p, unsigned bit, unsigned width) noexcept {
    return static_cast<uint8_t>((p[0] >> (8 - bit - width)) & mask_of(width));
}
// ORs the field in: write() starts from a zeroed area, so reserved bits stay 0.
void put_bits(uint8_t* p, unsigned bit, unsigned width, uint32_t value) noexcept {
    p[0] = static_cast<uint8_t>(p[0] | ((value & mask_of(width)) << (8 - bit - width)));
}

void put_be24(uint8_t* p, uint32_t value) noexcept {
    store_be24(p, value & 0xFFFFFF);
}

Gid read_gid(const uint8_t* p) noexcept {
    Gid g;
    std::memcpy(g.raw.data(), p, g.raw.size());
    return g;
}
void write_gid(uint8_t* p, const Gid& g) noexcept {
    std::memcpy(p, g.raw.data(), g.raw.size());
}

template <size_t N>
void read_bytes(std::array<uint8_t, N>& out, const uint8_t* p) noexcept {
    std::memcpy(out.data(), p, N);
}
template <size_t N>
void write_bytes(uint8_t* p, const std::array<uint8_t, N>& in) noexcept {
    std::memcpy(p, in.data(), N);
}

// Bytes 52-95 (primary) or 96-139 (alternate) of a REQ.
constexpr size_t kPathSize = 44;

CmPath read_path(const uint8_t* p) noexcept {
    CmPath path;
    path.local_lid = load_be16(p);
    path.remote_lid = load_be16(p + 2);
    path.local_gid = read_gid(p + 4);
    path.remote_gid = read_gid(p + 20);
    path.flow_label = load_be32(p + 36) >> 12;
    path.packet_rate = get_bits(p + 39, 2, 6);
    path.traffic_class = p[40];
    path.hop_limit = p[41];
    path.sl = get_bits(p + 42, 0, 4);
    path.subnet_local = get_bits(p + 42, 4, 1);
    path.local_ack_timeout = get_bits(p + 43, 0, 5);
    return path;
}

void write_path(uint8_t* p, const CmPath& path) noexcept {
    store_be16(p, path.local_lid);
    store_be16(p + 2, path.remote_lid);
    write_gid(p + 4, path.local_gid);
    write_gid(p + 20, path.remote_gid);
    store_be32(p + 36, (path.flow_label & 0xFFFFF) << 12);
    put_bits(p + 39, 2, 6, path.packet_rate);
    p[40] = path.traffic_class;
    p[41] = path.hop_limit;
    put_bits(p + 42, 0, 4, path.sl);
    put_bits(p + 42, 4, 1, path.subnet_local);
    put_bits(p + 43, 0, 5, path.local_ack_timeout);
}

uint8_t* zeroed(uint8_t* data) noexcept {
    std::memset(data, 0, kMadDataSize);
    return data;
}

}  // namespace

CmReq CmReq::read(const uint8_t* p) noexcept {
    CmReq m;
    m.local_comm_id = load_be32(p);
    m.vendor_id = load_be24(p + 5);
    m.service_id = load_be64(p + 8);
    m.local_ca_guid = load_be64(p + 16);
    m.local_qkey = load_be32(p + 28);
    m.local_qpn = load_be24(p + 32);
    m.responder_resources = p[35];
    m.local_eecn = load_be24(p + 36);
    m.initiator_depth = p[39];
    m.remote_eecn = load_be24(p + 40);
    m.remote_cm_response_timeout = get_bits(p + 43, 0, 5);
    m.transport = static_cast<CmTransport>(get_bits(p + 43, 5, 2));
    m.end_to_end_flow_control = get_bits(p + 43, 7, 1);
    m.starting_psn = load_be24(p + 44);
    m.local_cm_response_timeout = get_bits(p + 47, 0, 5);
    m.retry_count = get_bits(p + 47, 5, 3);
    m.pkey = load_be16(p + 48);
    m.path_mtu = get_bits(p + 50, 0, 4);
    m.rdc_exists = get_bits(p + 50, 4, 1);
    m.rnr_retry_count = get_bits(p + 50, 5, 3);
    m.max_cm_retries = get_bits(p + 51, 0, 4);
    m.srq = get_bits(p + 51, 4, 1);
    m.extended_transport = get_bits(p + 51, 5, 3);
    m.primary_path = read_path(p + 52);
    m.alternate_path = read_path(p + 52 + kPathSize);
    m.sap_supported = get_bits(p + 139, 5, 1);
    read_bytes(m.private_data, p + 140);
    return m;
}

void CmReq::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    put_be24(p + 5, vendor_id);
    store_be64(p + 8, service_id);
    store_be64(p + 16, local_ca_guid);
    store_be32(p + 28, local_qkey);
    put_be24(p + 32, local_qpn);
    p[35] = responder_resources;
    put_be24(p + 36, local_eecn);
    p[39] = initiator_depth;
    put_be24(p + 40, remote_eecn);
    put_bits(p + 43, 0, 5, remote_cm_response_timeout);
    put_bits(p + 43, 5, 2, static_cast<uint8_t>(transport));
    put_bits(p + 43, 7, 1, end_to_end_flow_control);
    put_be24(p + 44, starting_psn);
    put_bits(p + 47, 0, 5, local_cm_response_timeout);
    put_bits(p + 47, 5, 3, retry_count);
    store_be16(p + 48, pkey);
    put_bits(p + 50, 0, 4, path_mtu);
    put_bits(p + 50, 4, 1, rdc_exists);
    put_bits(p + 50, 5, 3, rnr_retry_count);
    put_bits(p + 51, 0, 4, max_cm_retries);
    put_bits(p + 51, 4, 1, srq);
    put_bits(p + 51, 5, 3, extended_transport);
    write_path(p + 52, primary_path);
    write_path(p + 52 + kPathSize, alternate_path);
    put_bits(p + 139, 5, 1, sap_supported);
    write_bytes(p + 140, private_data);
}

CmMra CmMra::read(const uint8_t* p) noexcept {
    CmMra m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    m.message_mraed = static_cast<CmMsgResponse>(get_bits(p + 8, 0, 2));
    m.service_timeout = get_bits(p + 9, 0, 5);
    read_bytes(m.private_data, p + 10);
    return m;
}

void CmMra::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    put_bits(p + 8, 0, 2, static_cast<uint8_t>(message_mraed));
    put_bits(p + 9, 0, 5, service_timeout);
    write_bytes(p + 10, private_data);
}

CmRej CmRej::read(const uint8_t* p) noexcept {
    CmRej m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    m.message_rejected = static_cast<CmMsgResponse>(get_bits(p + 8, 0, 2));
    m.ari_length = get_bits(p + 9, 0, 7);
    m.reason = static_cast<CmRejReason>(load_be16(p + 10));
    read_bytes(m.ari, p + 12);
    read_bytes(m.private_data, p + 84);
    return m;
}

void CmRej::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    put_bits(p + 8, 0, 2, static_cast<uint8_t>(message_rejected));
    put_bits(p + 9, 0, 7, ari_length);
    store_be16(p + 10, static_cast<uint16_t>(reason));
    write_bytes(p + 12, ari);
    write_bytes(p + 84, private_data);
}

CmRep CmRep::read(const uint8_t* p) noexcept {
    CmRep m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    m.local_qkey = load_be32(p + 8);
    m.local_qpn = load_be24(p + 12);
    m.vendor_id = (uint32_t{p[15]} << 16) | (uint32_t{p[19]} << 8) | p[23];
    m.local_eecn = load_be24(p + 16);
    m.starting_psn = load_be24(p + 20);
    m.responder_resources = p[24];
    m.initiator_depth = p[25];
    m.target_ack_delay = get_bits(p + 26, 0, 5);
    m.failover_accepted = get_bits(p + 26, 5, 2);
    m.end_to_end_flow_control = get_bits(p + 26, 7, 1);
    m.rnr_retry_count = get_bits(p + 27, 0, 3);
    m.srq = get_bits(p + 27, 3, 1);
    m.local_ca_guid = load_be64(p + 28);
    read_bytes(m.private_data, p + 36);
    return m;
}

void CmRep::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    store_be32(p + 8, local_qkey);
    put_be24(p + 12, local_qpn);
    p[15] = static_cast<uint8_t>(vendor_id >> 16);
    put_be24(p + 16, local_eecn);
    p[19] = static_cast<uint8_t>(vendor_id >> 8);
    put_be24(p + 20, starting_psn);
    p[23] = static_cast<uint8_t>(vendor_id);
    p[24] = responder_resources;
    p[25] = initiator_depth;
    put_bits(p + 26, 0, 5, target_ack_delay);
    put_bits(p + 26, 5, 2, failover_accepted);
    put_bits(p + 26, 7, 1, end_to_end_flow_control);
    put_bits(p + 27, 0, 3, rnr_retry_count);
    put_bits(p + 27, 3, 1, srq);
    store_be64(p + 28, local_ca_guid);
    write_bytes(p + 36, private_data);
}

CmRtu CmRtu::read(const uint8_t* p) noexcept {
    CmRtu m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    read_bytes(m.private_data, p + 8);
    return m;
}

void CmRtu::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    write_bytes(p + 8, private_data);
}

CmDreq CmDreq::read(const uint8_t* p) noexcept {
    CmDreq m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    m.remote_qpn_eecn = load_be24(p + 8);
    read_bytes(m.private_data, p + 12);
    return m;
}

void CmDreq::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    put_be24(p + 8, remote_qpn_eecn);
    write_bytes(p + 12, private_data);
}

CmDrep CmDrep::read(const uint8_t* p) noexcept {
    CmDrep m;
    m.local_comm_id = load_be32(p);
    m.remote_comm_id = load_be32(p + 4);
    read_bytes(m.private_data, p + 8);
    return m;
}

void CmDrep::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, local_comm_id);
    store_be32(p + 4, remote_comm_id);
    write_bytes(p + 8, private_data);
}

CmSidrReq CmSidrReq::read(const uint8_t* p) noexcept {
    CmSidrReq m;
    m.request_id = load_be32(p);
    m.pkey = load_be16(p + 4);
    m.service_id = load_be64(p + 8);
    read_bytes(m.private_data, p + 16);
    return m;
}

void CmSidrReq::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, request_id);
    store_be16(p + 4, pkey);
    store_be64(p + 8, service_id);
    write_bytes(p + 16, private_data);
}

CmSidrRep CmSidrRep::read(const uint8_t* p) noexcept {
    CmSidrRep m;
    m.request_id = load_be32(p);
    m.status = static_cast<CmSidrStatus>(p[4]);
    m.info_length = p[5];
    m.vendor_id = (uint32_t{load_be16(p + 6)} << 8) | p[11];
    m.qpn = load_be24(p + 8);
    m.service_id = load_be64(p + 12);
    m.qkey = load_be32(p + 20);
    read_bytes(m.info, p + 24);
    read_bytes(m.private_data, p + 96);
    return m;
}

void CmSidrRep::write(uint8_t* data) const noexcept {
    uint8_t* p = zeroed(data);
    store_be32(p, request_id);
    p[4] = static_cast<uint8_t>(status);
    p[5] = info_length;
    store_be16(p + 6, static_cast<uint16_t>(vendor_id >> 8));
    put_be24(p + 8, qpn);
    p[11] = static_cast<uint8_t>(vendor_id);
    store_be64(p + 12, service_id);
    store_be32(p + 20, qkey);
    write_bytes(p + 24, info);
    write_bytes(p + 96, private_data);
}

ClassPortInfo ClassPortInfo::read(const uint8_t* p) noexcept {
    ClassPortInfo c;
    c.base_version = p[0];
    c.class_version = p[1];
    c.capability_mask = load_be16(p + 2);
    const uint32_t cap2_resp = load_be32(p + 4);
    c.capability_mask2 = cap2_resp >> 5;
    c.resp_time_value = static_cast<uint8_t>(cap2_resp & 0x1F);
    c.redirect_gid = read_gid(p + 8);
    const uint32_t redirect_tcslfl = load_be32(p + 24);
    c.redirect_tc = static_cast<uint8_t>(redirect_tcslfl >> 24);
    c.redirect_sl = static_cast<uint8_t>((redirect_tcslfl >> 20) & 0xF);
    c.redirect_fl = redirect_tcslfl & 0xFFFFF;
    c.redirect_lid = load_be16(p + 28);
    c.redirect_pkey = load_be16(p + 30);
    c.redirect_qp = load_be24(p + 33);
    c.redirect_qkey = load_be32(p + 36);
    c.trap_gid = read_gid(p + 40);
    const uint32_t trap_tcslfl = load_be32(p + 56);
    c.trap_tc = static_cast<uint8_t>(trap_tcslfl >> 24);
    c.trap_sl = static_cast<uint8_t>((trap_tcslfl >> 20) & 0xF);
    c.trap_fl = trap_tcslfl & 0xFFFFF;
    c.trap_lid = load_be16(p + 60);
    c.trap_pkey = load_be16(p + 62);
    c.trap_hop_limit = p[64];
    c.trap_qp = load_be24(p + 65);
    c.trap_qkey = load_be32(p + 68);
    return c;
}

void ClassPortInfo::write(uint8_t* p) const noexcept {
    std::memset(p, 0, kSize);
    p[0] = base_version;
    p[1] = class_version;
    store_be16(p + 2, capability_mask);
    store_be32(p + 4, ((capability_mask2 & 0x7FFFFFF) << 5) | (resp_time_value & 0x1F));
    write_gid(p + 8, redirect_gid);
    store_be32(p + 24, (uint32_t{redirect_tc} << 24) | (uint32_t{redirect_sl & 0xFu} << 20) | (redirect_fl & 0xFFFFF));
    store_be16(p + 28, redirect_lid);
    store_be16(p + 30, redirect_pkey);
    put_be24(p + 33, redirect_qp);
    store_be32(p + 36, redirect_qkey);
    write_gid(p + 40, trap_gid);
    store_be32(p + 56, (uint32_t{trap_tc} << 24) | (uint32_t{trap_sl & 0xFu} << 20) | (trap_fl & 0xFFFFF));
    store_be16(p + 60, trap_lid);
    store_be16(p + 62, trap_pkey);
    p[64] = trap_hop_limit;
    put_be24(p + 65, trap_qp);
    store_be32(p + 68, trap_qkey);
}

}  // namespace rnic::wire
