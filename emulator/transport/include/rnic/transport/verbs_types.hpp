// The verbs vocabulary the engine shares with the verbs shim: QP types and states, modify-QP
// attribute bits, work-request and completion opcodes, completion statuses and flags, send and
// access flags, MTUs and asynchronous event types.
//
// Every numeric value is rdma-core's (<infiniband/verbs.h>, libibverbs), so the shim passes the
// application's values straight through without a translation table. This header deliberately
// does not include <infiniband/verbs.h>: the engine builds without rdma-core installed. The shim's
// tests static_assert each value here against the real header.
//
// Name functions return rdma-core's enumerator spelling ("IBV_WC_RETRY_EXC_ERR", "IBV_QPS_RTS",
// "IBV_QP_PATH_MTU"), the form that greps against rdma-core, perftest and kernel logs; a value
// rdma-core does not define is named "UNKNOWN".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rnic::transport {

inline constexpr std::string_view kUnknownName = "UNKNOWN";

// ---------------------------------------------------------------------------------------------
// QP types (enum ibv_qp_type). 0 and 1 are the kernel's SMI/GSI, not reachable from user space.
enum class QpType : uint8_t {
    Rc = 2,
    Uc = 3,
    Ud = 4,
    RawPacket = 8,
    XrcSend = 9,   // kernel IB_QPT_XRC_INI
    XrcRecv = 10,  // kernel IB_QPT_XRC_TGT
    Driver = 0xff,
};

constexpr std::string_view qp_type_name(QpType t) noexcept {
    switch (t) {
        case QpType::Rc:
            return "IBV_QPT_RC";
        case QpType::Uc:
            return "IBV_QPT_UC";
        case QpType::Ud:
            return "IBV_QPT_UD";
        case QpType::RawPacket:
            return "IBV_QPT_RAW_PACKET";
        case QpType::XrcSend:
            return "IBV_QPT_XRC_SEND";
        case QpType::XrcRecv:
            return "IBV_QPT_XRC_RECV";
        case QpType::Driver:
            return "IBV_QPT_DRIVER";
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// QP states (enum ibv_qp_state; IBA 10.3.1). Unknown exists in rdma-core as a "no such state"
// marker; it is never a legal state to modify to or from.
enum class QpState : uint8_t {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
    Unknown = 7,
};

inline constexpr int kNumQpStates = 7;  // Reset..Err, the states of the modify-QP table

constexpr std::string_view qp_state_name(QpState s) noexcept {
    switch (s) {
        case QpState::Reset:
            return "IBV_QPS_RESET";
        case QpState::Init:
            return "IBV_QPS_INIT";
        case QpState::Rtr:
            return "IBV_QPS_RTR";
        case QpState::Rts:
            return "IBV_QPS_RTS";
        case QpState::Sqd:
            return "IBV_QPS_SQD";
        case QpState::Sqe:
            return "IBV_QPS_SQE";
        case QpState::Err:
            return "IBV_QPS_ERR";
        case QpState::Unknown:
            return "IBV_QPS_UNKNOWN";
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// ibv_modify_qp attr_mask bits (enum ibv_qp_attr_mask). Bits 21-24 were the kernel's SMAC/VID
// bits, never exposed by libibverbs; bit 25 exists only for the extended modify command.
// Use as QpAttr::State | QpAttr::PkeyIndex (the bits are plain uint32_t values).
struct QpAttr {
    enum Bit : uint32_t {
        State = 1u << 0,
        CurState = 1u << 1,
        EnSqdAsyncNotify = 1u << 2,
        AccessFlags = 1u << 3,
        PkeyIndex = 1u << 4,
        Port = 1u << 5,
        Qkey = 1u << 6,
        Av = 1u << 7,
        PathMtu = 1u << 8,
        Timeout = 1u << 9,
        RetryCnt = 1u << 10,
        RnrRetry = 1u << 11,
        RqPsn = 1u << 12,
        MaxQpRdAtomic = 1u << 13,
        AltPath = 1u << 14,
        MinRnrTimer = 1u << 15,
        SqPsn = 1u << 16,
        MaxDestRdAtomic = 1u << 17,
        PathMigState = 1u << 18,
        Cap = 1u << 19,
        DestQpn = 1u << 20,
        RateLimit = 1u << 25,
    };
};

// Name of one attribute bit; anything that is not exactly one defined bit is "UNKNOWN".
constexpr std::string_view qp_attr_name(uint32_t bit) noexcept {
    switch (bit) {
        case QpAttr::State:
            return "IBV_QP_STATE";
        case QpAttr::CurState:
            return "IBV_QP_CUR_STATE";
        case QpAttr::EnSqdAsyncNotify:
            return "IBV_QP_EN_SQD_ASYNC_NOTIFY";
        case QpAttr::AccessFlags:
            return "IBV_QP_ACCESS_FLAGS";
        case QpAttr::PkeyIndex:
            return "IBV_QP_PKEY_INDEX";
        case QpAttr::Port:
            return "IBV_QP_PORT";
        case QpAttr::Qkey:
            return "IBV_QP_QKEY";
        case QpAttr::Av:
            return "IBV_QP_AV";
        case QpAttr::PathMtu:
            return "IBV_QP_PATH_MTU";
        case QpAttr::Timeout:
            return "IBV_QP_TIMEOUT";
        case QpAttr::RetryCnt:
            return "IBV_QP_RETRY_CNT";
        case QpAttr::RnrRetry:
            return "IBV_QP_RNR_RETRY";
        case QpAttr::RqPsn:
            return "IBV_QP_RQ_PSN";
        case QpAttr::MaxQpRdAtomic:
            return "IBV_QP_MAX_QP_RD_ATOMIC";
        case QpAttr::AltPath:
            return "IBV_QP_ALT_PATH";
        case QpAttr::MinRnrTimer:
            return "IBV_QP_MIN_RNR_TIMER";
        case QpAttr::SqPsn:
            return "IBV_QP_SQ_PSN";
        case QpAttr::MaxDestRdAtomic:
            return "IBV_QP_MAX_DEST_RD_ATOMIC";
        case QpAttr::PathMigState:
            return "IBV_QP_PATH_MIG_STATE";
        case QpAttr::Cap:
            return "IBV_QP_CAP";
        case QpAttr::DestQpn:
            return "IBV_QP_DEST_QPN";
        case QpAttr::RateLimit:
            return "IBV_QP_RATE_LIMIT";
        default:
            break;
    }
    return kUnknownName;
}

// Path migration states (enum ibv_mig_state), the value of IBV_QP_PATH_MIG_STATE.
enum class MigState : uint8_t { Migrated = 0, Rearm = 1, Armed = 2 };

constexpr std::string_view mig_state_name(MigState m) noexcept {
    switch (m) {
        case MigState::Migrated:
            return "IBV_MIG_MIGRATED";
        case MigState::Rearm:
            return "IBV_MIG_REARM";
        case MigState::Armed:
            return "IBV_MIG_ARMED";
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// Path MTU (enum ibv_mtu; IBA 7.7.9, the 4-bit PMTU code).
enum class Mtu : uint8_t { Mtu256 = 1, Mtu512 = 2, Mtu1024 = 3, Mtu2048 = 4, Mtu4096 = 5 };

constexpr bool is_known(Mtu m) noexcept {
    const auto v = static_cast<uint8_t>(m);
    return v >= 1 && v <= 5;
}

// Payload bytes per packet for an MTU code: 256 << (code - 1); 0 for a code rdma-core lacks.
constexpr uint32_t mtu_bytes(Mtu m) noexcept {
    return is_known(m) ? 256u << (static_cast<uint8_t>(m) - 1) : 0u;
}

// The largest IB MTU that fits in `bytes` (1500 -> 1024, 4096 -> 4096, 9000 -> 4096), or
// nothing below 256. Exact for the five MTU sizes.
constexpr std::optional<Mtu> mtu_from_bytes(uint32_t bytes) noexcept {
    if (bytes >= 4096) return Mtu::Mtu4096;
    if (bytes >= 2048) return Mtu::Mtu2048;
    if (bytes >= 1024) return Mtu::Mtu1024;
    if (bytes >= 512) return Mtu::Mtu512;
    if (bytes >= 256) return Mtu::Mtu256;
    return std::nullopt;
}

constexpr std::string_view mtu_name(Mtu m) noexcept {
    switch (m) {
        case Mtu::Mtu256:
            return "IBV_MTU_256";
        case Mtu::Mtu512:
            return "IBV_MTU_512";
        case Mtu::Mtu1024:
            return "IBV_MTU_1024";
        case Mtu::Mtu2048:
            return "IBV_MTU_2048";
        case Mtu::Mtu4096:
            return "IBV_MTU_4096";
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// Send work-request opcodes (enum ibv_wr_opcode). 12 and 13 are unassigned. Flush (14) is in
// rdma-core since v45; Debian 12's rdma-core 44 has AtomicWrite (15) but not Flush.
enum class WrOpcode : uint8_t {
    RdmaWrite = 0,
    RdmaWriteWithImm = 1,
    Send = 2,
    SendWithImm = 3,
    RdmaRead = 4,
    AtomicCmpAndSwp = 5,
    AtomicFetchAndAdd = 6,
    LocalInv = 7,
    BindMw = 8,
    SendWithInv = 9,
    Tso = 10,
    Driver1 = 11,
    Flush = 14,
    AtomicWrite = 15,
};

constexpr std::string_view wr_opcode_name(WrOpcode op) noexcept {
    switch (op) {
        case WrOpcode::RdmaWrite:
            return "IBV_WR_RDMA_WRITE";
        case WrOpcode::RdmaWriteWithImm:
            return "IBV_WR_RDMA_WRITE_WITH_IMM";
        case WrOpcode::Send:
            return "IBV_WR_SEND";
        case WrOpcode::SendWithImm:
            return "IBV_WR_SEND_WITH_IMM";
        case WrOpcode::RdmaRead:
            return "IBV_WR_RDMA_READ";
        case WrOpcode::AtomicCmpAndSwp:
            return "IBV_WR_ATOMIC_CMP_AND_SWP";
        case WrOpcode::AtomicFetchAndAdd:
            return "IBV_WR_ATOMIC_FETCH_AND_ADD";
        case WrOpcode::LocalInv:
            return "IBV_WR_LOCAL_INV";
        case WrOpcode::BindMw:
            return "IBV_WR_BIND_MW";
        case WrOpcode::SendWithInv:
            return "IBV_WR_SEND_WITH_INV";
        case WrOpcode::Tso:
            return "IBV_WR_TSO";
        case WrOpcode::Driver1:
            return "IBV_WR_DRIVER1";
        case WrOpcode::Flush:
            return "IBV_WR_FLUSH";
        case WrOpcode::AtomicWrite:
            return "IBV_WR_ATOMIC_WRITE";
    }
    return kUnknownName;
}

// Send flags (enum ibv_send_flags), the bits of ibv_send_wr.send_flags.
struct SendFlag {
    enum Bit : uint32_t {
        Fence = 1u << 0,
        Signaled = 1u << 1,
        Solicited = 1u << 2,
        Inline = 1u << 3,
        IpCsum = 1u << 4,
    };
};

constexpr std::string_view send_flag_name(uint32_t bit) noexcept {
    switch (bit) {
        case SendFlag::Fence:
            return "IBV_SEND_FENCE";
        case SendFlag::Signaled:
            return "IBV_SEND_SIGNALED";
        case SendFlag::Solicited:
            return "IBV_SEND_SOLICITED";
        case SendFlag::Inline:
            return "IBV_SEND_INLINE";
        case SendFlag::IpCsum:
            return "IBV_SEND_IP_CSUM";
        default:
            break;
    }
    return kUnknownName;
}

// Memory/QP access flags (enum ibv_access_flags): ibv_reg_mr access, IBV_QP_ACCESS_FLAGS.
// RelaxedOrdering is IBV_ACCESS_OPTIONAL_FIRST (bit 20): a hint a device may ignore.
struct AccessFlag {
    enum Bit : uint32_t {
        LocalWrite = 1u << 0,
        RemoteWrite = 1u << 1,
        RemoteRead = 1u << 2,
        RemoteAtomic = 1u << 3,
        MwBind = 1u << 4,
        ZeroBased = 1u << 5,
        OnDemand = 1u << 6,
        HugeTlb = 1u << 7,
        FlushGlobal = 1u << 8,      // rdma-core >= v45
        FlushPersistent = 1u << 9,  // rdma-core >= v45
        RelaxedOrdering = 1u << 20,
    };
};

constexpr std::string_view access_flag_name(uint32_t bit) noexcept {
    switch (bit) {
        case AccessFlag::LocalWrite:
            return "IBV_ACCESS_LOCAL_WRITE";
        case AccessFlag::RemoteWrite:
            return "IBV_ACCESS_REMOTE_WRITE";
        case AccessFlag::RemoteRead:
            return "IBV_ACCESS_REMOTE_READ";
        case AccessFlag::RemoteAtomic:
            return "IBV_ACCESS_REMOTE_ATOMIC";
        case AccessFlag::MwBind:
            return "IBV_ACCESS_MW_BIND";
        case AccessFlag::ZeroBased:
            return "IBV_ACCESS_ZERO_BASED";
        case AccessFlag::OnDemand:
            return "IBV_ACCESS_ON_DEMAND";
        case AccessFlag::HugeTlb:
            return "IBV_ACCESS_HUGETLB";
        case AccessFlag::FlushGlobal:
            return "IBV_ACCESS_FLUSH_GLOBAL";
        case AccessFlag::FlushPersistent:
            return "IBV_ACCESS_FLUSH_PERSISTENT";
        case AccessFlag::RelaxedOrdering:
            return "IBV_ACCESS_RELAXED_ORDERING";
        default:
            break;
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// Completion status (enum ibv_wc_status).
enum class WcStatus : uint8_t {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
    TmErr = 22,
    TmRndvIncomplete = 23,
};

constexpr std::string_view wc_status_name(WcStatus s) noexcept {
    switch (s) {
        case WcStatus::Success:
            return "IBV_WC_SUCCESS";
        case WcStatus::LocLenErr:
            return "IBV_WC_LOC_LEN_ERR";
        case WcStatus::LocQpOpErr:
            return "IBV_WC_LOC_QP_OP_ERR";
        case WcStatus::LocEecOpErr:
            return "IBV_WC_LOC_EEC_OP_ERR";
        case WcStatus::LocProtErr:
            return "IBV_WC_LOC_PROT_ERR";
        case WcStatus::WrFlushErr:
            return "IBV_WC_WR_FLUSH_ERR";
        case WcStatus::MwBindErr:
            return "IBV_WC_MW_BIND_ERR";
        case WcStatus::BadRespErr:
            return "IBV_WC_BAD_RESP_ERR";
        case WcStatus::LocAccessErr:
            return "IBV_WC_LOC_ACCESS_ERR";
        case WcStatus::RemInvReqErr:
            return "IBV_WC_REM_INV_REQ_ERR";
        case WcStatus::RemAccessErr:
            return "IBV_WC_REM_ACCESS_ERR";
        case WcStatus::RemOpErr:
            return "IBV_WC_REM_OP_ERR";
        case WcStatus::RetryExcErr:
            return "IBV_WC_RETRY_EXC_ERR";
        case WcStatus::RnrRetryExcErr:
            return "IBV_WC_RNR_RETRY_EXC_ERR";
        case WcStatus::LocRddViolErr:
            return "IBV_WC_LOC_RDD_VIOL_ERR";
        case WcStatus::RemInvRdReqErr:
            return "IBV_WC_REM_INV_RD_REQ_ERR";
        case WcStatus::RemAbortErr:
            return "IBV_WC_REM_ABORT_ERR";
        case WcStatus::InvEecnErr:
            return "IBV_WC_INV_EECN_ERR";
        case WcStatus::InvEecStateErr:
            return "IBV_WC_INV_EEC_STATE_ERR";
        case WcStatus::FatalErr:
            return "IBV_WC_FATAL_ERR";
        case WcStatus::RespTimeoutErr:
            return "IBV_WC_RESP_TIMEOUT_ERR";
        case WcStatus::GeneralErr:
            return "IBV_WC_GENERAL_ERR";
        case WcStatus::TmErr:
            return "IBV_WC_TM_ERR";
        case WcStatus::TmRndvIncomplete:
            return "IBV_WC_TM_RNDV_INCOMPLETE";
    }
    return kUnknownName;
}

// Completion opcodes (enum ibv_wc_opcode). Receive completions have bit 7 set, so
// (opcode & IBV_WC_RECV) tells a receive from a send-side completion.
enum class WcOpcode : uint8_t {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Tso = 7,
    Flush = 8,        // rdma-core >= v45
    AtomicWrite = 9,  // rdma-core >= v44
    Recv = 1u << 7,
    RecvRdmaWithImm = 129,
    TmAdd = 130,
    TmDel = 131,
    TmSync = 132,
    TmRecv = 133,
    TmNoTag = 134,
    Driver1 = 135,
    Driver2 = 136,
    Driver3 = 137,
};

constexpr bool is_recv(WcOpcode op) noexcept {
    return (static_cast<uint8_t>(op) & static_cast<uint8_t>(WcOpcode::Recv)) != 0;
}

constexpr std::string_view wc_opcode_name(WcOpcode op) noexcept {
    switch (op) {
        case WcOpcode::Send:
            return "IBV_WC_SEND";
        case WcOpcode::RdmaWrite:
            return "IBV_WC_RDMA_WRITE";
        case WcOpcode::RdmaRead:
            return "IBV_WC_RDMA_READ";
        case WcOpcode::CompSwap:
            return "IBV_WC_COMP_SWAP";
        case WcOpcode::FetchAdd:
            return "IBV_WC_FETCH_ADD";
        case WcOpcode::BindMw:
            return "IBV_WC_BIND_MW";
        case WcOpcode::LocalInv:
            return "IBV_WC_LOCAL_INV";
        case WcOpcode::Tso:
            return "IBV_WC_TSO";
        case WcOpcode::Flush:
            return "IBV_WC_FLUSH";
        case WcOpcode::AtomicWrite:
            return "IBV_WC_ATOMIC_WRITE";
        case WcOpcode::Recv:
            return "IBV_WC_RECV";
        case WcOpcode::RecvRdmaWithImm:
            return "IBV_WC_RECV_RDMA_WITH_IMM";
        case WcOpcode::TmAdd:
            return "IBV_WC_TM_ADD";
        case WcOpcode::TmDel:
            return "IBV_WC_TM_DEL";
        case WcOpcode::TmSync:
            return "IBV_WC_TM_SYNC";
        case WcOpcode::TmRecv:
            return "IBV_WC_TM_RECV";
        case WcOpcode::TmNoTag:
            return "IBV_WC_TM_NO_TAG";
        case WcOpcode::Driver1:
            return "IBV_WC_DRIVER1";
        case WcOpcode::Driver2:
            return "IBV_WC_DRIVER2";
        case WcOpcode::Driver3:
            return "IBV_WC_DRIVER3";
    }
    return kUnknownName;
}

// The completion opcode a send-queue work request completes with (what rxe's completer
// reports): the _WITH_IMM and _WITH_INV variants complete as their base operation. Nothing
// for Driver1, which has no standard completion.
constexpr std::optional<WcOpcode> wc_opcode_for(WrOpcode op) noexcept {
    switch (op) {
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm:
            return WcOpcode::RdmaWrite;
        case WrOpcode::Send:
        case WrOpcode::SendWithImm:
        case WrOpcode::SendWithInv:
            return WcOpcode::Send;
        case WrOpcode::RdmaRead:
            return WcOpcode::RdmaRead;
        case WrOpcode::AtomicCmpAndSwp:
            return WcOpcode::CompSwap;
        case WrOpcode::AtomicFetchAndAdd:
            return WcOpcode::FetchAdd;
        case WrOpcode::LocalInv:
            return WcOpcode::LocalInv;
        case WrOpcode::BindMw:
            return WcOpcode::BindMw;
        case WrOpcode::Tso:
            return WcOpcode::Tso;
        case WrOpcode::Flush:
            return WcOpcode::Flush;
        case WrOpcode::AtomicWrite:
            return WcOpcode::AtomicWrite;
        case WrOpcode::Driver1:
            break;
    }
    return std::nullopt;
}

// Completion flags (enum ibv_wc_flags), the bits of ibv_wc.wc_flags.
struct WcFlag {
    enum Bit : uint32_t {
        Grh = 1u << 0,
        WithImm = 1u << 1,
        IpCsumOk = 1u << 2,  // 1 << IBV_WC_IP_CSUM_OK_SHIFT
        WithInv = 1u << 3,
        TmSyncReq = 1u << 4,
        TmMatch = 1u << 5,
        TmDataValid = 1u << 6,
    };
};

constexpr std::string_view wc_flag_name(uint32_t bit) noexcept {
    switch (bit) {
        case WcFlag::Grh:
            return "IBV_WC_GRH";
        case WcFlag::WithImm:
            return "IBV_WC_WITH_IMM";
        case WcFlag::IpCsumOk:
            return "IBV_WC_IP_CSUM_OK";
        case WcFlag::WithInv:
            return "IBV_WC_WITH_INV";
        case WcFlag::TmSyncReq:
            return "IBV_WC_TM_SYNC_REQ";
        case WcFlag::TmMatch:
            return "IBV_WC_TM_MATCH";
        case WcFlag::TmDataValid:
            return "IBV_WC_TM_DATA_VALID";
        default:
            break;
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// Asynchronous events (enum ibv_event_type), delivered through ibv_get_async_event.
enum class EventType : uint8_t {
    CqErr = 0,
    QpFatal = 1,
    QpReqErr = 2,
    QpAccessErr = 3,
    CommEst = 4,
    SqDrained = 5,
    PathMig = 6,
    PathMigErr = 7,
    DeviceFatal = 8,
    PortActive = 9,
    PortErr = 10,
    LidChange = 11,
    PkeyChange = 12,
    SmChange = 13,
    SrqErr = 14,
    SrqLimitReached = 15,
    QpLastWqeReached = 16,
    ClientReregister = 17,
    GidChange = 18,
    WqFatal = 19,
};

constexpr std::string_view event_type_name(EventType e) noexcept {
    switch (e) {
        case EventType::CqErr:
            return "IBV_EVENT_CQ_ERR";
        case EventType::QpFatal:
            return "IBV_EVENT_QP_FATAL";
        case EventType::QpReqErr:
            return "IBV_EVENT_QP_REQ_ERR";
        case EventType::QpAccessErr:
            return "IBV_EVENT_QP_ACCESS_ERR";
        case EventType::CommEst:
            return "IBV_EVENT_COMM_EST";
        case EventType::SqDrained:
            return "IBV_EVENT_SQ_DRAINED";
        case EventType::PathMig:
            return "IBV_EVENT_PATH_MIG";
        case EventType::PathMigErr:
            return "IBV_EVENT_PATH_MIG_ERR";
        case EventType::DeviceFatal:
            return "IBV_EVENT_DEVICE_FATAL";
        case EventType::PortActive:
            return "IBV_EVENT_PORT_ACTIVE";
        case EventType::PortErr:
            return "IBV_EVENT_PORT_ERR";
        case EventType::LidChange:
            return "IBV_EVENT_LID_CHANGE";
        case EventType::PkeyChange:
            return "IBV_EVENT_PKEY_CHANGE";
        case EventType::SmChange:
            return "IBV_EVENT_SM_CHANGE";
        case EventType::SrqErr:
            return "IBV_EVENT_SRQ_ERR";
        case EventType::SrqLimitReached:
            return "IBV_EVENT_SRQ_LIMIT_REACHED";
        case EventType::QpLastWqeReached:
            return "IBV_EVENT_QP_LAST_WQE_REACHED";
        case EventType::ClientReregister:
            return "IBV_EVENT_CLIENT_REREGISTER";
        case EventType::GidChange:
            return "IBV_EVENT_GID_CHANGE";
        case EventType::WqFatal:
            return "IBV_EVENT_WQ_FATAL";
    }
    return kUnknownName;
}

// ---------------------------------------------------------------------------------------------
// Validation of values that arrive from the application (through the shim): a value is known
// when rdma-core defines it. Values from the other side of the rings are never trusted.
constexpr bool is_known(QpType v) noexcept {
    return qp_type_name(v) != kUnknownName;
}
constexpr bool is_known(QpState v) noexcept {
    return qp_state_name(v) != kUnknownName;
}
constexpr bool is_known(MigState v) noexcept {
    return mig_state_name(v) != kUnknownName;
}
constexpr bool is_known(WrOpcode v) noexcept {
    return wr_opcode_name(v) != kUnknownName;
}
constexpr bool is_known(WcStatus v) noexcept {
    return wc_status_name(v) != kUnknownName;
}
constexpr bool is_known(WcOpcode v) noexcept {
    return wc_opcode_name(v) != kUnknownName;
}
constexpr bool is_known(EventType v) noexcept {
    return event_type_name(v) != kUnknownName;
}

// "IBV_QP_STATE|IBV_QP_PKEY_INDEX|0x80000000": the named bits in ascending order, then any
// undefined bits in hex; "0" for an empty mask. `bit_name` is one of the *_name(uint32_t)
// functions above. For logs and test messages, not the data path.
inline std::string flag_mask_string(uint32_t mask, std::string_view (*bit_name)(uint32_t) noexcept) {
    std::string out;
    uint32_t unknown = 0;
    for (int i = 0; i < 32; ++i) {
        const uint32_t bit = 1u << i;
        if ((mask & bit) == 0) continue;
        const std::string_view name = bit_name(bit);
        if (name == kUnknownName) {
            unknown |= bit;
            continue;
        }
        if (!out.empty()) out += '|';
        out += name;
    }
    if (unknown != 0) {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex = "0x";
        bool started = false;
        for (int shift = 28; shift >= 0; shift -= 4) {
            const uint32_t nibble = (unknown >> shift) & 0xF;
            if (nibble == 0 && !started) continue;
            started = true;
            hex += kHex[nibble];
        }
        if (!out.empty()) out += '|';
        out += hex;
    }
    return out.empty() ? std::string("0") : out;
}

inline std::string qp_attr_mask_string(uint32_t mask) {
    return flag_mask_string(mask, qp_attr_name);
}
inline std::string send_flags_string(uint32_t flags) {
    return flag_mask_string(flags, send_flag_name);
}
inline std::string access_flags_string(uint32_t flags) {
    return flag_mask_string(flags, access_flag_name);
}
inline std::string wc_flags_string(uint32_t flags) {
    return flag_mask_string(flags, wc_flag_name);
}

// ---------------------------------------------------------------------------------------------
// A few values the shim's ABI depends on, pinned here as well as in the shim's cross-check.
static_assert(static_cast<int>(QpType::Rc) == 2 && static_cast<int>(QpType::Ud) == 4);
static_assert(static_cast<int>(QpState::Err) == 6);
static_assert(QpAttr::State == 1 && QpAttr::DestQpn == (1u << 20) && QpAttr::RateLimit == (1u << 25));
static_assert(static_cast<int>(WrOpcode::SendWithInv) == 9 && static_cast<int>(WrOpcode::AtomicWrite) == 15);
static_assert(static_cast<int>(WcStatus::RetryExcErr) == 12 && static_cast<int>(WcStatus::GeneralErr) == 21);
static_assert(static_cast<int>(WcOpcode::Recv) == 128 && static_cast<int>(WcOpcode::RecvRdmaWithImm) == 129);
static_assert(WcFlag::WithInv == 8 && SendFlag::Inline == 8);
static_assert(static_cast<int>(Mtu::Mtu4096) == 5 && mtu_bytes(Mtu::Mtu4096) == 4096);
static_assert(static_cast<int>(EventType::SrqLimitReached) == 15 && static_cast<int>(EventType::WqFatal) == 19);

}  // namespace rnic::transport
