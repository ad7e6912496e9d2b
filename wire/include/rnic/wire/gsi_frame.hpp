// Whole RoCEv2 frames to and from the General Services Interface, QP 1: a UD SEND ONLY with a DETH
// (Q_Key 0x80010000, source QP 1) whose payload is one 256-byte MAD. One call builds such a frame
// into a buffer (the MAD written in place, ICRC computed), one call parses and checks it.
// The defaults are what Linux rxe puts on the wire for its CM (shared/pcaps-rxe, README there):
// P_Key 0xFFFF, AckReq set, PSN counting from 0 per sending GSI QP, UDP source port 0xD872,
// IPv4 TTL 64 with DF and DSCP/ECN 0 (the path's traffic class and hop limit in general).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/expected.hpp"
#include "rnic/wire/mad.hpp"
#include "rnic/wire/parse_error.hpp"
#include "rnic/wire/parser.hpp"
#include "rnic/wire/source_port.hpp"

namespace rnic::wire {

inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // IBA 13.2.4.3: the well-known GSI Q_Key
inline constexpr uint16_t kDefaultPkey = 0xFFFF;
// rxe gives every QP the source port 0xC000 + hash_32(qpn, 14) (rxe_qp_init_req) unless an RC
// connection's flow label replaces it; for QP 1 that is 0xD872 (55410), in both directions.
inline constexpr uint16_t kGsiSourcePort = rxe_qp_source_port(kGsiQpn);

// Ethernet + IP + UDP + BTH + DETH + MAD + ICRC, without a VLAN tag (add 4 with one).
inline constexpr size_t kGsiFrameSizeIpv4 = 14 + 20 + 8 + 12 + 8 + kMadSize + 4;  // 322
inline constexpr size_t kGsiFrameSizeIpv6 = 14 + 40 + 8 + 12 + 8 + kMadSize + 4;  // 342

struct GsiFrameSpec {
    MacAddr dst_mac{};
    MacAddr src_mac{};
    std::optional<uint16_t> vlan_tci;
    Gid src_gid;  // both IPv4-mapped: IPv4; neither: IPv6
    Gid dst_gid;
    uint8_t dscp = 0;
    uint8_t ecn = 0;
    uint8_t hop_limit = 64;
    uint16_t ip_id = 0;       // IPv4: rxe increments one counter per sending device
    uint32_t flow_label = 0;  // IPv6 only
    uint16_t src_port = kGsiSourcePort;
    uint16_t pkey = kDefaultPkey;
    uint32_t psn = 0;            // 24 bits
    bool ack_req = true;         // rxe sets AckReq on QP 1's packets (its IB_QPT_GSI is not IB_QPT_UD)
    uint32_t dest_qp = kGsiQpn;  // where the peer's CM listens: QP 1 unless redirected
    uint32_t src_qp = kGsiQpn;
    uint32_t qkey = kGsiQkey;

    friend bool operator==(const GsiFrameSpec&, const GsiFrameSpec&) = default;
};

// The frame carrying `mad`, written at the start of `out`; returns its length. Errors as
// build_frame's (AddressFamilyMismatch, BufferTooSmall).
Expected<size_t, BuildErrc> build_gsi_frame(const GsiFrameSpec& spec, const Mad& mad, std::span<uint8_t> out);

// A parsed GSI frame: the RoCEv2 frame (spans into the caller's buffer) and a copy of its MAD.
struct GsiFrame {
    RoceFrame frame;
    Mad mad;
};

// The MAD of an already parsed frame to QP 1: NotGsiSend (not a UD SEND ONLY), BadGsiQkey,
// BadMadLength, BadMadBaseVersion; offsets within the frame. Frames to other QPs are NotGsiSend.
Expected<Mad, ParseError> gsi_mad(const RoceFrame& frame);

// parse_frame, then gsi_mad.
Expected<GsiFrame, ParseError> parse_gsi_frame(std::span<const uint8_t> frame, const ParseOptions& options = {});

// The spec that rebuilds `frame` byte for byte with build_gsi_frame: a GSI frame with the BTH's
// SE, MigReq, FECN/BECN and reserved bits clear, as every one Linux sends.
GsiFrameSpec gsi_spec_from_frame(const RoceFrame& frame);

}  // namespace rnic::wire
