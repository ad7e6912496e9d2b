#include "sample_frames.hpp"

#include <stdexcept>
#include <string_view>

#include "rnic/wire/aeth.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/source_port.hpp"

namespace rnic::tools {
namespace {

using namespace rnic::wire;

constexpr MacAddr kMacA{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr MacAddr kMacB{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
constexpr uint32_t kQpA = 0x000011;
constexpr uint32_t kQpB = 0x000012;

// Readable text, rotated per frame so payloads differ; binary patterns can accidentally look
// like an upper-layer protocol to Wireshark's payload heuristics (RPC-over-RDMA, iSER, SMC).
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    static constexpr std::string_view kText = "rnic wire library sample payload. ";
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(kText[(seed + i) % kText.size()]);
    return v;
}

// Payload sizes cycle through every pad count and reach one full 4096-byte MTU. None is
// below 8 bytes: Wireshark 4.0's RPC-over-RDMA heuristic throws on shorter RC SEND/WRITE LAST or ONLY
// payloads of 1-3 bytes and would mark a correct frame malformed.
size_t payload_size_for(const OpcodeInfo& info, size_t i) {
    if (!info.has_payload) return 0;
    constexpr size_t kSizes[] = {9, 10, 11, 64, 255, 1024, 4096, 13};
    return kSizes[i % std::size(kSizes)];
}

void fill_ext_headers(const OpcodeInfo& info, uint32_t psn, size_t len, ExtHeaders& e) {
    if (info.has(kExtDeth)) e.deth = Deth{0x11111111, 0, kQpA};
    if (info.has(kExtReth)) {
        const uint32_t dma_length = info.kind == OpKind::RdmaReadRequest ? 4096 : static_cast<uint32_t>(len);
        e.reth = Reth{0x00007F00DEAD0000ull + psn, 0x00C0FFEE, dma_length};
    }
    if (info.has(kExtAtomicEth)) e.atomic_eth = AtomicEth{0x00007F0012345678ull & ~7ull, 0x00ABCDEF, 5, 0x10};
    if (info.has(kExtAeth)) e.aeth = Aeth{AethSyndrome::ack().encode(), psn & 0xFFFF};
    if (info.has(kExtAtomicAckEth)) e.atomic_ack_eth = AtomicAckEth{0x0123456789ABCDEFull};
    if (info.has(kExtImmDt)) e.immdt = ImmDt{0xA1B2C3D4};
    if (info.has(kExtIeth)) e.ieth = Ieth{0x00C0FFEE};
    if (info.has(kExtFeth)) e.feth = Feth{Feth::kPlacementGlobal, Feth::kSelectRange, 0};
}

SampleFrame make(uint8_t opcode, size_t i, uint32_t psn) {
    const OpcodeInfo& info = opcode_info(opcode);
    SampleFrame s;
    FrameSpec& f = s.spec;
    const bool response = info.is_response();
    f.src_mac = response ? kMacB : kMacA;
    f.dst_mac = response ? kMacA : kMacB;
    f.src_gid = Gid::from_ipv4(response ? 0x0A000002 : 0x0A000001);
    f.dst_gid = Gid::from_ipv4(response ? 0x0A000001 : 0x0A000002);
    f.ip_id = static_cast<uint16_t>(0x1000 + i);
    f.src_port = rocev2_source_port(kQpA, kQpB);
    f.bth.opcode = opcode;
    f.bth.dest_qp = info.transport == Transport::UD ? kQpB : (response ? kQpA : kQpB);
    f.bth.psn = psn;
    f.bth.ack_req = info.is_request() && info.ends_message() && info.transport == Transport::RC;
    f.bth.solicited = info.kind == OpKind::Send && info.ends_message();
    if (info.kind == OpKind::Cnp) {
        f.bth.becn = true;
        f.bth.psn = 0;
    }
    s.payload = pattern(payload_size_for(info, i), static_cast<uint8_t>(i));
    fill_ext_headers(info, psn, s.payload.size(), f.ext);
    return s;
}

}  // namespace

std::vector<SampleFrame> make_sample_frames() {
    std::vector<SampleFrame> out;
    size_t count = 0;
    const uint8_t* ops = valid_opcodes(&count);
    // The IBTA 1.5 opcodes (FLUSH, ATOMIC WRITE) are left out of this sample: Debian 12's
    // tshark 4.0 does not know them, and the sample is what tshark checks. The wire tests and
    // the new-opcodes pcap test cover them.
    size_t n = 0;
    for (size_t i = 0; i < count; ++i) {
        const OpKind k = opcode_info(ops[i]).kind;
        if (k == OpKind::AtomicWrite || k == OpKind::Flush) continue;
        out.push_back(make(ops[i], n, 100 + static_cast<uint32_t>(n)));
        ++n;
    }

    // IPv6 GIDs, a PSN about to wrap, a traffic class and a flow label.
    const auto v6a = *Gid::parse("fd00::1");
    const auto v6b = *Gid::parse("fd00::2");
    for (uint8_t opc : {op::kRcWriteFirst, op::kRcAcknowledge, op::kUdSendOnlyImm}) {
        SampleFrame s = make(opc, out.size(), 0xFFFFFF);
        const bool response = opcode_info(opc).is_response();
        s.spec.src_gid = response ? v6b : v6a;
        s.spec.dst_gid = response ? v6a : v6b;
        s.spec.dscp = 26;
        s.spec.flow_label = 0x12345;
        out.push_back(std::move(s));
    }
    // 802.1Q tag (priority 3, VLAN 100), ECN congestion experienced, and the answering CNP.
    SampleFrame tagged = make(op::kRcSendOnly, out.size(), 7);
    tagged.spec.vlan_tci = (3u << 13) | 100;
    tagged.spec.dscp = 26;
    tagged.spec.ecn = 3;
    tagged.payload = pattern(64, 3);
    out.push_back(std::move(tagged));
    // RNR NAK and sequence NAK syndromes, and an atomic acknowledge carrying a NAK-free result.
    SampleFrame rnr = make(op::kRcAcknowledge, out.size(), 8);
    rnr.spec.ext.aeth->syndrome = AethSyndrome::rnr_nak(12).encode();
    out.push_back(std::move(rnr));
    SampleFrame nak = make(op::kRcAcknowledge, out.size(), 9);
    nak.spec.ext.aeth->syndrome = AethSyndrome::nak(NakCode::PsnSequenceError).encode();
    out.push_back(std::move(nak));

    for (SampleFrame& s : out) s.spec.payload = s.payload;
    return out;
}

std::vector<std::vector<uint8_t>> build_sample_frames() {
    std::vector<std::vector<uint8_t>> frames;
    for (const SampleFrame& s : make_sample_frames()) {
        auto size = frame_size(s.spec);
        if (!size) throw std::logic_error(std::string("sample frame: ") + std::string(build_errc_name(size.error())));
        std::vector<uint8_t> buf(*size);
        auto n = build_frame(s.spec, buf);
        if (!n) throw std::logic_error(std::string("sample frame: ") + std::string(build_errc_name(n.error())));
        frames.push_back(std::move(buf));
    }
    return frames;
}

}  // namespace rnic::tools
