// The InfiniBand Communication Manager's messages (IBA vol. 1, chapter 12; management class 0x07,
// class version 2) as plain values, with every field at the bit position the IBTA tables give and
// Linux's include/rdma/ibta_vol1_c12.h uses. Each message struct reads from and writes to the
// 232-byte MAD data area; encode_cm()/decode_cm() add and check the MAD header.
//
// Reserved bits are written as zero and not kept (IBA: sent as 0, ignored on receipt, and Linux
// zeroes every MAD it sends); the private data arrays always hold the field's full length, as the
// CM hands it to consumers. Values wider than their field are cut to it on write, as IBA_SET does.
//
// LAP (0x0019) and APR (0x001A), alternate-path migration, are not decoded: Linux rejects them on
// RoCE ports (cm_lap_handler/cm_apr_handler return -EINVAL when rdma_protocol_roce) and rdma_cm
// never sends them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "rnic/wire/expected.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/mad.hpp"
#include "rnic/wire/parse_error.hpp"

namespace rnic::wire {

inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;

// CM attribute IDs (IBA table 104).
enum class CmAttr : uint16_t {
    ClassPortInfo = 0x0001,
    Req = 0x0010,
    Mra = 0x0011,
    Rej = 0x0012,
    Rep = 0x0013,
    Rtu = 0x0014,
    Dreq = 0x0015,
    Drep = 0x0016,
    SidrReq = 0x0017,
    SidrRep = 0x0018,
    Lap = 0x0019,
    Apr = 0x001A,
};
// "REQ", "SIDR_REP", "ClassPortInfo", ...; "unknown" for IDs the CM does not define.
std::string_view cm_attr_name(uint16_t attribute_id) noexcept;

// REQ transport service type (2 bits). XRC is 3 with the extended transport type 1.
enum class CmTransport : uint8_t { Rc = 0, Uc = 1, Rd = 2, Xrc = 3 };

// Which message a REJ rejects or an MRA acknowledges (2 bits; 3 is reserved).
enum class CmMsgResponse : uint8_t { Req = 0, Rep = 1, Other = 2 };

// REJ reasons (IBA table 109), numbered as Linux's enum ib_cm_rej_reason.
enum class CmRejReason : uint16_t {
    NoQp = 1,
    NoEec = 2,
    NoResources = 3,
    Timeout = 4,  // ARI: the rejecting CA's GUID (Linux sends its node GUID)
    Unsupported = 5,
    InvalidCommId = 6,
    InvalidCommInstance = 7,
    InvalidServiceId = 8,  // Linux's answer to a REQ no listener matches
    InvalidTransportType = 9,
    StaleConn = 10,
    RdcNotExist = 11,
    InvalidGid = 12,
    InvalidLid = 13,
    InvalidSl = 14,
    InvalidTrafficClass = 15,
    InvalidHopLimit = 16,
    InvalidPacketRate = 17,
    InvalidAltGid = 18,
    InvalidAltLid = 19,
    InvalidAltSl = 20,
    InvalidAltTrafficClass = 21,
    InvalidAltHopLimit = 22,
    InvalidAltPacketRate = 23,
    PortCmRedirect = 24,
    PortRedirect = 25,
    InvalidMtu = 26,
    InsufficientRespResources = 27,
    ConsumerDefined = 28,  // rdma_reject(), and Linux's REJ when a REQ_RCVD id is destroyed
    InvalidRnrRetry = 29,
    DuplicateLocalCommId = 30,
    InvalidClassVersion = 31,
    InvalidFlowLabel = 32,
    InvalidAltFlowLabel = 33,
    VendorOptionNotSupported = 35,
};
std::string_view cm_rej_reason_name(CmRejReason reason) noexcept;  // Linux's ibcm_reject_msg() texts

// SIDR_REP status (IBA table 121), as Linux's enum ib_cm_sidr_status.
enum class CmSidrStatus : uint8_t {
    Success = 0,
    Unsupported = 1,  // Linux's answer to a SIDR_REQ no listener matches
    Reject = 2,
    NoQp = 3,
    Redirect = 4,
    UnsupportedVersion = 5,
};

inline constexpr size_t kCmReqPrivateDataSize = 92;
inline constexpr size_t kCmMraPrivateDataSize = 222;
inline constexpr size_t kCmRejPrivateDataSize = 148;
inline constexpr size_t kCmRejAriSize = 72;
inline constexpr size_t kCmRepPrivateDataSize = 196;
inline constexpr size_t kCmRtuPrivateDataSize = 224;
inline constexpr size_t kCmDreqPrivateDataSize = 220;
inline constexpr size_t kCmDrepPrivateDataSize = 224;
inline constexpr size_t kCmSidrReqPrivateDataSize = 216;
inline constexpr size_t kCmSidrRepPrivateDataSize = 136;
inline constexpr size_t kCmSidrRepInfoSize = 72;

// One path of a REQ (IBA table 106, bytes 52-95 primary, 96-139 alternate). On RoCE the GIDs are
// the IP addresses (IPv4-mapped for IPv4) and Linux puts the permissive LID 0xFFFF in both LIDs
// of a routed path (hop limit > 1), clearing subnet_local.
struct CmPath {
    uint16_t local_lid = 0;
    uint16_t remote_lid = 0;
    Gid local_gid;
    Gid remote_gid;
    uint32_t flow_label = 0;  // 20 bits
    uint8_t packet_rate = 0;  // 6 bits, IBA rate code (0 on rxe: "port current")
    uint8_t traffic_class = 0;
    uint8_t hop_limit = 0;
    uint8_t sl = 0;  // 4 bits
    bool subnet_local = false;
    uint8_t local_ack_timeout = 0;  // 5 bits, 4.096 us * 2^n

    friend bool operator==(const CmPath&, const CmPath&) = default;
};

struct CmReq {
    static constexpr CmAttr kAttr = CmAttr::Req;
    uint32_t local_comm_id = 0;
    uint32_t vendor_id = 0;  // 24 bits, bytes 5-7: Linux's ECE vendor ID (0 unless ECE is used)
    uint64_t service_id = 0;
    uint64_t local_ca_guid = 0;
    uint32_t local_qkey = 0;  // UD/RD only; Linux leaves 0
    uint32_t local_qpn = 0;   // 24 bits
    uint8_t responder_resources = 0;
    uint32_t local_eecn = 0;  // 24 bits
    uint8_t initiator_depth = 0;
    uint32_t remote_eecn = 0;                 // 24 bits
    uint8_t remote_cm_response_timeout = 0;   // 5 bits, 4.096 us * 2^n
    CmTransport transport = CmTransport::Rc;  // 2 bits
    bool end_to_end_flow_control = false;
    uint32_t starting_psn = 0;              // 24 bits
    uint8_t local_cm_response_timeout = 0;  // 5 bits
    uint8_t retry_count = 0;                // 3 bits
    uint16_t pkey = 0xFFFF;
    uint8_t path_mtu = 0;  // 4 bits, IBA MTU code: 1 = 256 ... 5 = 4096
    bool rdc_exists = false;
    uint8_t rnr_retry_count = 0;  // 3 bits
    uint8_t max_cm_retries = 0;   // 4 bits
    bool srq = false;
    uint8_t extended_transport = 0;  // 3 bits
    CmPath primary_path;
    CmPath alternate_path;  // all zero when there is none
    bool sap_supported = false;
    std::array<uint8_t, kCmReqPrivateDataSize> private_data{};

    // Linux's test (cm_req_has_alt_path): a non-zero alternate local LID.
    bool has_alternate_path() const noexcept { return alternate_path.local_lid != 0; }
    static CmReq read(const uint8_t* data) noexcept;  // kMadDataSize bytes
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmReq&, const CmReq&) = default;
};

struct CmMra {
    static constexpr CmAttr kAttr = CmAttr::Mra;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    CmMsgResponse message_mraed = CmMsgResponse::Req;
    uint8_t service_timeout = 0;  // 5 bits, 4.096 us * 2^n
    std::array<uint8_t, kCmMraPrivateDataSize> private_data{};

    static CmMra read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmMra&, const CmMra&) = default;
};

struct CmRej {
    static constexpr CmAttr kAttr = CmAttr::Rej;
    uint32_t local_comm_id = 0;  // 0 when rejecting a REQ before replying (Linux's REQ_RCVD state)
    uint32_t remote_comm_id = 0;
    CmMsgResponse message_rejected = CmMsgResponse::Req;
    uint8_t ari_length = 0;  // 7 bits on the wire; decode_cm refuses more than kCmRejAriSize
    CmRejReason reason = CmRejReason::ConsumerDefined;
    std::array<uint8_t, kCmRejAriSize> ari{};
    std::array<uint8_t, kCmRejPrivateDataSize> private_data{};

    std::span<const uint8_t> ari_bytes() const noexcept {
        return std::span<const uint8_t>(ari).first(ari_length < kCmRejAriSize ? ari_length : kCmRejAriSize);
    }
    static CmRej read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmRej&, const CmRej&) = default;
};

struct CmRep {
    static constexpr CmAttr kAttr = CmAttr::Rep;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    uint32_t local_qkey = 0;    // Linux leaves 0
    uint32_t local_qpn = 0;     // 24 bits
    uint32_t vendor_id = 0;     // 24 bits, split over bytes 15, 19 and 23 (Linux's ECE)
    uint32_t local_eecn = 0;    // 24 bits (Linux's XRC target puts its QPN here, with srq set)
    uint32_t starting_psn = 0;  // 24 bits
    uint8_t responder_resources = 0;
    uint8_t initiator_depth = 0;
    uint8_t target_ack_delay = 0;   // 5 bits: the CA's local ACK delay
    uint8_t failover_accepted = 0;  // 2 bits
    bool end_to_end_flow_control = false;
    uint8_t rnr_retry_count = 0;  // 3 bits
    bool srq = false;
    uint64_t local_ca_guid = 0;
    std::array<uint8_t, kCmRepPrivateDataSize> private_data{};

    static CmRep read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmRep&, const CmRep&) = default;
};

struct CmRtu {
    static constexpr CmAttr kAttr = CmAttr::Rtu;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    std::array<uint8_t, kCmRtuPrivateDataSize> private_data{};

    static CmRtu read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmRtu&, const CmRtu&) = default;
};

struct CmDreq {
    static constexpr CmAttr kAttr = CmAttr::Dreq;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    uint32_t remote_qpn_eecn = 0;  // 24 bits: the receiver's QPN, which Linux checks
    std::array<uint8_t, kCmDreqPrivateDataSize> private_data{};

    static CmDreq read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmDreq&, const CmDreq&) = default;
};

struct CmDrep {
    static constexpr CmAttr kAttr = CmAttr::Drep;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    std::array<uint8_t, kCmDrepPrivateDataSize> private_data{};

    static CmDrep read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmDrep&, const CmDrep&) = default;
};

struct CmSidrReq {
    static constexpr CmAttr kAttr = CmAttr::SidrReq;
    uint32_t request_id = 0;
    uint16_t pkey = 0xFFFF;
    uint64_t service_id = 0;
    std::array<uint8_t, kCmSidrReqPrivateDataSize> private_data{};

    static CmSidrReq read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmSidrReq&, const CmSidrReq&) = default;
};

struct CmSidrRep {
    static constexpr CmAttr kAttr = CmAttr::SidrRep;
    uint32_t request_id = 0;
    CmSidrStatus status = CmSidrStatus::Success;
    uint8_t info_length = 0;  // decode_cm refuses more than kCmSidrRepInfoSize; Linux never sets it
    uint32_t vendor_id = 0;   // 24 bits, bytes 6-7 and 11 (Linux's ECE)
    uint32_t qpn = 0;         // 24 bits
    uint64_t service_id = 0;
    uint32_t qkey = 0;
    std::array<uint8_t, kCmSidrRepInfoSize> info{};
    std::array<uint8_t, kCmSidrRepPrivateDataSize> private_data{};

    std::span<const uint8_t> info_bytes() const noexcept {
        return std::span<const uint8_t>(info).first(info_length < kCmSidrRepInfoSize ? info_length
                                                                                     : kCmSidrRepInfoSize);
    }
    static CmSidrRep read(const uint8_t* data) noexcept;
    void write(uint8_t* data) const noexcept;
    friend bool operator==(const CmSidrRep&, const CmSidrRep&) = default;
};

using CmMessage = std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep, CmSidrReq, CmSidrRep>;

CmAttr cm_attr_of(const CmMessage& message) noexcept;

// The communication IDs every message carries: REQ has only the local one; SIDR messages carry
// a request ID instead (returned as local for SIDR_REQ, remote for SIDR_REP, where it names the
// requester's ID).
struct CmCommIds {
    uint32_t local = 0;
    uint32_t remote = 0;
};
CmCommIds cm_comm_ids(const CmMessage& message) noexcept;

// A CM MAD as Linux's cm_format_mad_hdr makes it: base version 1, class 0x07, version 2, method
// Send, status 0, the message at the start of the data. Linux carries its ECE "attribute
// modifier" in the MAD header of REQ and REP, hence the parameter.
Mad encode_cm(const CmMessage& message, uint64_t transaction_id, uint32_t attribute_modifier = 0);

// The message in a CM MAD. Errors (offsets within the 256-byte MAD): WrongMgmtClass,
// BadClassVersion, BadCmMethod (CM messages travel as Send), UnknownCmAttribute (also for
// ClassPortInfo, LAP, APR), BadCmLength (REJ ARI or SIDR_REP info length past its 72 bytes).
Expected<CmMessage, ParseError> decode_cm(const Mad& mad);

// ClassPortInfo (IBA 13.4.8.1), the attribute a Get to any class's ClassPortInfo returns; at the
// start of the MAD data for classes without a class header, as the CM. Linux's CM does not answer
// it (see unmatched_method_response in mad.hpp); peers that do are decoded with this.
struct ClassPortInfo {
    static constexpr size_t kSize = 72;
    uint8_t base_version = kMadBaseVersion;
    uint8_t class_version = 0;
    uint16_t capability_mask = 0;
    uint32_t capability_mask2 = 0;  // 27 bits
    uint8_t resp_time_value = 0;    // 5 bits
    Gid redirect_gid;
    uint8_t redirect_tc = 0;
    uint8_t redirect_sl = 0;   // 4 bits
    uint32_t redirect_fl = 0;  // 20 bits
    uint16_t redirect_lid = 0;
    uint16_t redirect_pkey = 0;
    uint32_t redirect_qp = 0;  // 24 bits
    uint32_t redirect_qkey = 0;
    Gid trap_gid;
    uint8_t trap_tc = 0;
    uint8_t trap_sl = 0;   // 4 bits
    uint32_t trap_fl = 0;  // 20 bits
    uint16_t trap_lid = 0;
    uint16_t trap_pkey = 0;
    uint8_t trap_hop_limit = 0;
    uint32_t trap_qp = 0;  // 24 bits
    uint32_t trap_qkey = 0;

    static ClassPortInfo read(const uint8_t* p) noexcept;  // kSize bytes
    void write(uint8_t* p) const noexcept;
    friend bool operator==(const ClassPortInfo&, const ClassPortInfo&) = default;
};

}  // namespace rnic::wire
