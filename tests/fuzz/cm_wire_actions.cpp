// CM MADs from the wire (cm_actions.hpp, CmMad): GSI frames to QP 1 built with the wire library,
// as the peer's CM (or something posing as one) would send them.
#include <algorithm>
#include <cstring>
#include <optional>

#include "cm_actions.hpp"
#include "cm_fuzz_support.hpp"
#include "invariant.hpp"
#include "rnic/cm/cm_types.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::host::fuzz {

using namespace cmf;

namespace {

constexpr size_t kSentKept = 32;
constexpr uint32_t kPeerCommBase = 0x5EE00000;  // the peer's communication ids answering ours
constexpr uint32_t kPeerQpnBase = 0x00C0D0;

}  // namespace

void CmFuzzer::collect_sent() {
    auto& frames = rig_.port.sent();
    if (sent_seen_ > frames.size()) sent_seen_ = 0;
    for (; sent_seen_ < frames.size(); ++sent_seen_) {
        const auto g = wire::parse_gsi_frame(frames[sent_seen_]);
        if (!g) continue;
        sent_.push_back({g->mad});
        if (sent_.size() > kSentKept) sent_.pop_front();
    }
}

// The peer's CM (or something posing as one, or ourselves) sends a MAD to QP 1: any CM message
// with fields from the program and communication ids that match a live connection of the
// daemon, nearly match it, answer a MAD the daemon sent to the peer, or are anything; Gets and
// Sets; the daemon's own MAD echoed back; then a bad MAD header, or a frame with the wrong Q_Key,
// length, opcode, P_Key or source QP, or a flipped byte.
void CmFuzzer::mad() {
    const uint8_t attr = p_.u8() % 12;
    const uint8_t route = p_.u8();
    const uint8_t ids_mode = p_.u8() % 4;
    const uint8_t index = p_.u8(), delta = p_.u8();
    uint32_t local = 0, remote = 0;  // the sender's communication id, the daemon's
    uint64_t tid = (uint64_t{0xFEED} << 32) | psn_;
    std::optional<wire::Mad> echo;
    if (ids_mode == 3) {
        local = p_.u32();
        remote = p_.u32();
    } else if (ids_mode == 2) {
        collect_sent();
        if (!sent_.empty()) {
            const wire::Mad& m = sent_[sent_.size() - 1 - index % sent_.size()].mad;
            echo = m;
            tid = m.header.transaction_id;
            if (const auto msg = wire::decode_cm(m)) {
                const wire::CmCommIds ids = wire::cm_comm_ids(*msg);
                remote = ids.local ? ids.local : ids.remote;
                local = ids.local && ids.remote ? ids.remote : kPeerCommBase ^ remote;
            }
        }
    } else {
        const auto ids = live();
        if (!ids.empty()) {
            const cm::IdInfo& i = ids[index % ids.size()];
            local = i.remote_comm_id;
            remote = i.local_comm_id;
            if (ids_mode == 1) {  // off by one, or by a bit, on either side
                uint32_t& which = delta & 0x80 ? local : remote;
                which = delta & 0x40 ? which ^ (1u << (delta % 32)) : which + static_cast<int8_t>(delta << 2) / 4;
            }
        }
    }
    // What the daemon knows of the connection these ids name (for QPNs).
    uint32_t daemon_qpn = 0, sender_qpn = 0;
    for (const cm::IdInfo& i : live())
        if (remote && i.local_comm_id == remote) {
            daemon_qpn = i.qpn;
            sender_qpn = i.remote_qpn;
        }
    const uint8_t guid_sel = p_.u8() % 4;
    const uint64_t guid = guid_sel == 0   ? kPeerGuid
                          : guid_sel == 1 ? kOwnGuid
                          : guid_sel == 2 ? kPeerGuid + 1
                                          : p_.u64();
    const uint8_t q = p_.u8();
    const uint32_t qpn_any = q >= 0xC0 ? p_.u32() : 0;
    const uint32_t qpn = q >= 0xC0 ? qpn_any : (q & 0x20) && sender_qpn ? sender_qpn : kPeerQpnBase + q % 8;
    const uint32_t psn = p_.u32();
    const uint8_t a = p_.u8(), b = p_.u8(), c = p_.u8(), d = p_.u8();
    const uint16_t code = p_.u16();
    const uint8_t ps_sel = p_.u8();
    uint64_t service_id = 0;
    if (ps_sel >= kPickRaw) {
        service_id = p_.u64();
    } else {
        static constexpr wire::RdmaPortSpace kSpaces[] = {wire::RdmaPortSpace::Tcp, wire::RdmaPortSpace::Udp,
                                                          wire::RdmaPortSpace::Ib, wire::RdmaPortSpace::Ipoib};
        service_id = wire::rdma_cm_service_id(kSpaces[ps_sel % 4], port());
    }
    const uint8_t header_mode = p_.u8();
    const uint16_t header_port = p_.u16();
    const uint8_t pd_length = p_.u8();
    const uint8_t seed = p_.u8();
    const uint8_t mad_mutation = p_.u8();
    const uint32_t mad_value = p_.u32();
    const uint8_t frame_mutation = p_.u8();
    const uint32_t frame_value = p_.u32();

    // Where it comes from: the peer over IPv4, IPv6 or link-local IPv6, ourselves (spoofed), or a
    // neighbour that never answers ARP (the daemon's answers wait, then are dropped).
    wire::GsiFrameSpec spec;
    spec.dst_mac = port::test::kSelf.mac;
    spec.src_mac = port::test::kPeerMac;
    spec.src_gid = kPeer4;
    spec.dst_gid = kOwn4;
    switch (route % 6) {
        case 2:
            spec.src_gid = kPeer6;
            spec.dst_gid = kOwn6;
            break;
        case 3:
            spec.src_mac = port::test::kSelf.mac;
            spec.src_gid = kOwn4;
            break;
        case 4:
            spec.src_mac = {0x02, 0, 0, 0, 0, 0x09};
            spec.src_gid = wire::Gid::from_ipv4(kSilentIp);
            break;
        case 5:
            spec.src_gid = kPeerLinkLocal;
            spec.dst_gid = kOwnLinkLocal;
            break;
        default:
            break;
    }
    spec.psn = psn_++ & 0xFFFFFF;
    spec.hop_limit = static_cast<uint8_t>(route & 0x40 ? 1 : 64);

    // The rdma_cm header of REQ and SIDR_REQ: valid towards our address, towards our other
    // family's address, wildcards, a bad version or IP version, or none at all.
    auto cm_private = [&](std::span<uint8_t> out) {
        const size_t user = std::min<size_t>(pd_length, out.size());
        fill(out.data(), user, seed);
        if (header_mode % 6 == 5) return;
        const wire::Gid dst = header_mode % 6 == 1   ? (spec.dst_gid.is_ipv4_mapped() ? kOwn6 : kOwn4)
                              : header_mode % 6 == 4 ? wire::Gid::from_ipv4(0)
                                                     : spec.dst_gid;
        auto h = wire::RdmaCmIpHeader::make(spec.src_gid, dst, header_port);
        if (header_mode % 6 == 2) h.version = 1;
        if (header_mode % 6 == 3) h.ip_version = 5;
        uint8_t hdr[wire::RdmaCmIpHeader::kSize];
        h.write(hdr);
        std::memcpy(out.data(), hdr, sizeof hdr);
        if (header_mode % 6 == 3) out[1] = 0x50;
    };
    auto plain_private = [&](std::span<uint8_t> out) {
        fill(out.data(), std::min<size_t>(pd_length, out.size()), seed);
    };
    const uint8_t cm_timeout = c & 31 ? c & 31 : 20;

    wire::Mad m;
    switch (attr) {
        case 0: {
            wire::CmReq r;
            r.local_comm_id = local ? local : kPeerCommBase ^ psn_;
            r.service_id = service_id;
            r.local_ca_guid = guid;
            r.local_qpn = qpn & 0xFFFFFF;
            r.responder_resources = a;
            r.initiator_depth = b;
            r.remote_cm_response_timeout = cm_timeout;
            r.local_cm_response_timeout = static_cast<uint8_t>((c >> 5) ? (c >> 3) & 31 : 20);
            r.transport = static_cast<wire::CmTransport>(d & 3);
            r.end_to_end_flow_control = d & 4;
            r.starting_psn = psn & 0xFFFFFF;
            r.retry_count = (d >> 3) & 7;
            r.rnr_retry_count = (d >> 5) & 7;
            r.max_cm_retries = code & 15;
            r.srq = code & 16;
            r.path_mtu = static_cast<uint8_t>((code >> 5) & 7);
            r.pkey = code & 0x100 ? static_cast<uint16_t>(code) : 0xFFFF;
            r.primary_path.local_lid = r.primary_path.remote_lid = 0xFFFF;
            r.primary_path.local_gid = spec.src_gid;
            r.primary_path.remote_gid = code & 0x200 ? kPeer4 : spec.dst_gid;  // a GID not ours: REJ 12
            r.primary_path.flow_label = psn >> 12;
            r.primary_path.hop_limit = 64;
            r.primary_path.traffic_class = a;
            r.primary_path.local_ack_timeout = static_cast<uint8_t>((code >> 10) & 31);
            if (code & 0x8000) r.alternate_path = r.primary_path;
            cm_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 1: {
            wire::CmMra r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.message_mraed = static_cast<wire::CmMsgResponse>(d & 3);
            r.service_timeout = c & 31;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 2: {
            wire::CmRej r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.message_rejected = static_cast<wire::CmMsgResponse>(d & 3);
            static constexpr wire::CmRejReason kReasons[] = {
                wire::CmRejReason::ConsumerDefined, wire::CmRejReason::InvalidServiceId, wire::CmRejReason::StaleConn,
                wire::CmRejReason::Timeout, wire::CmRejReason::InvalidGid};
            r.reason =
                code < 0xF000 ? kReasons[code % std::size(kReasons)] : static_cast<wire::CmRejReason>(code & 0xFFF);
            r.ari_length = static_cast<uint8_t>(std::min<size_t>(a & 0x7F, wire::kCmRejAriSize));
            for (int i = 0; i < 8; ++i) r.ari[i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 3: {
            wire::CmRep r;
            r.local_comm_id = local ? local : kPeerCommBase ^ remote;
            r.remote_comm_id = remote;
            r.local_qpn = qpn & 0xFFFFFF;
            r.starting_psn = psn & 0xFFFFFF;
            r.responder_resources = a;
            r.initiator_depth = b;
            r.target_ack_delay = c & 31;
            r.end_to_end_flow_control = d & 4;
            r.rnr_retry_count = (d >> 5) & 7;
            r.srq = code & 16;
            r.local_ca_guid = guid;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 4: {
            wire::CmRtu r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 5: {
            wire::CmDreq r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.remote_qpn_eecn = (q & 0x10 ? qpn : daemon_qpn) & 0xFFFFFF;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 6: {
            wire::CmDrep r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 7: {
            wire::CmSidrReq r;
            r.request_id = local ? local : kPeerCommBase ^ psn_;
            r.pkey = code & 0x100 ? static_cast<uint16_t>(code) : 0xFFFF;
            r.service_id = service_id;
            cm_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 8: {
            wire::CmSidrRep r;
            r.request_id = remote;
            r.status = static_cast<wire::CmSidrStatus>(d % 8);
            r.qpn = qpn & 0xFFFFFF;
            r.service_id = service_id;
            r.qkey = code & 1 ? psn : cm::verbs::kRdmaUdpQkey;
            r.info_length = static_cast<uint8_t>(a % 80);
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 9:  // Get(ClassPortInfo) of the CM class
        case 10: {
            m.header.mgmt_class = attr == 9 ? wire::kMgmtClassCm : a;
            m.header.class_version = attr == 9 ? wire::kCmClassVersion : b;
            m.header.method = attr == 9 ? wire::MadMethod::Get : static_cast<wire::MadMethod>(c);
            m.header.transaction_id = tid;
            m.header.attribute_id = attr == 9 ? static_cast<uint16_t>(wire::CmAttr::ClassPortInfo) : code;
            plain_private(m.data);
            break;
        }
        default:  // the daemon's own MAD back at it
            if (echo)
                m = *echo;
            else
                m = wire::encode_cm(wire::CmRtu{}, tid);
            break;
    }
    switch (mad_mutation % 10) {
        case 3:
            m.header.base_version = static_cast<uint8_t>(mad_value);
            break;
        case 4:
            m.header.class_version = static_cast<uint8_t>(mad_value);
            break;
        case 5:
            m.header.method = static_cast<wire::MadMethod>(mad_value);
            break;
        case 6:
            m.header.mgmt_class = static_cast<uint8_t>(mad_value);
            break;
        case 7:
            m.header.method = static_cast<wire::MadMethod>(static_cast<uint8_t>(m.header.method) | 0x80);
            break;
        case 8:
            m.header.status = static_cast<uint16_t>(mad_value);
            break;
        case 9:
            m.header.attribute_id = static_cast<uint16_t>(mad_value);
            break;
        default:
            break;
    }

    std::vector<uint8_t> frame(wire::kGsiFrameSizeIpv6 + 512);
    size_t length = 0;
    const uint8_t fm = frame_mutation % 10;
    if (fm == 4) spec.qkey = frame_value;
    if (fm == 8) spec.pkey = static_cast<uint16_t>(frame_value);
    if (fm == 9) spec.src_qp = frame_value & 0xFFFFFF;
    if (fm == 5 || fm == 7) {
        // Not a 256-byte MAD, or not a UD SEND ONLY: the generic builder, the same headers.
        auto bytes = m.bytes();
        std::vector<uint8_t> payload(bytes.begin(), bytes.end());
        if (fm == 5) payload.resize(static_cast<size_t>(std::clamp(256 + static_cast<int8_t>(frame_value), 0, 511)));
        wire::FrameSpec f;
        f.dst_mac = spec.dst_mac;
        f.src_mac = spec.src_mac;
        f.src_gid = spec.src_gid;
        f.dst_gid = spec.dst_gid;
        f.hop_limit = spec.hop_limit;
        f.src_port = wire::kGsiSourcePort;
        f.bth.opcode = fm == 7 ? static_cast<uint8_t>(frame_value) : wire::op::kUdSendOnly;
        f.bth.dest_qp = wire::kGsiQpn;
        f.bth.ack_req = true;
        f.bth.psn = spec.psn;
        const wire::OpcodeInfo& info = wire::opcode_info(f.bth.opcode);
        if (info.has(wire::kExtDeth)) f.ext.deth = wire::Deth{spec.qkey, 0, spec.src_qp};
        if (info.has(wire::kExtReth)) f.ext.reth = wire::Reth{0, 0, 0};
        if (info.has(wire::kExtAeth)) f.ext.aeth = wire::Aeth{0, 0};
        if (info.has(wire::kExtImmDt)) f.ext.immdt = wire::ImmDt{0};
        if (info.has(wire::kExtIeth)) f.ext.ieth = wire::Ieth{0};
        if (info.has(wire::kExtFeth)) f.ext.feth = wire::Feth{1, 0, 0};
        if (info.has(wire::kExtAtomicEth)) f.ext.atomic_eth = wire::AtomicEth{0, 0, 0, 0};
        if (info.has(wire::kExtAtomicAckEth)) f.ext.atomic_ack_eth = wire::AtomicAckEth{0};
        if (info.has_payload) f.payload = payload;
        const auto built = wire::build_frame(f, frame);
        if (!built) return;
        length = *built;
    } else {
        const auto built = wire::build_gsi_frame(spec, m, frame);
        if (!built) return;
        length = *built;
    }
    frame.resize(length);
    if (fm == 6) frame[frame_value % frame.size()] ^= static_cast<uint8_t>(1 + (frame_value >> 24) % 255);
    used_ = true;
    TRACE("cm mad attr %#x (%u) route %u ids %#x/%#x guid %#llx qpn %#x mutations %u/%u: %zu bytes\n",
          m.header.attribute_id, attr, route % 6, local, remote, static_cast<unsigned long long>(guid), qpn,
          mad_mutation % 10, fm, frame.size());
    rig_.port.inject(std::move(frame));
}

}  // namespace rnic::host::fuzz
