#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "rnic/transport/verbs_types.hpp"

using namespace rnic::transport;

// The numbers below are rdma-core's (include/infiniband/verbs.h), written out by hand so that a
// renumbering in verbs_types.hpp fails here even without rdma-core installed.

TEST_CASE("QP types and states have rdma-core's values", "[verbs_types]") {
    CHECK(static_cast<int>(QpType::Rc) == 2);
    CHECK(static_cast<int>(QpType::Uc) == 3);
    CHECK(static_cast<int>(QpType::Ud) == 4);
    CHECK(static_cast<int>(QpType::RawPacket) == 8);
    CHECK(static_cast<int>(QpType::XrcSend) == 9);
    CHECK(static_cast<int>(QpType::XrcRecv) == 10);
    CHECK(static_cast<int>(QpType::Driver) == 0xff);

    const QpState states[] = {QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts,
                              QpState::Sqd,   QpState::Sqe,  QpState::Err, QpState::Unknown};
    for (int i = 0; i < 8; ++i) CHECK(static_cast<int>(states[i]) == i);
    CHECK(kNumQpStates == 7);

    CHECK(static_cast<int>(MigState::Migrated) == 0);
    CHECK(static_cast<int>(MigState::Rearm) == 1);
    CHECK(static_cast<int>(MigState::Armed) == 2);
}

TEST_CASE("modify-QP attribute bits have rdma-core's values", "[verbs_types]") {
    const uint32_t bits[] = {
        QpAttr::State,
        QpAttr::CurState,
        QpAttr::EnSqdAsyncNotify,
        QpAttr::AccessFlags,
        QpAttr::PkeyIndex,
        QpAttr::Port,
        QpAttr::Qkey,
        QpAttr::Av,
        QpAttr::PathMtu,
        QpAttr::Timeout,
        QpAttr::RetryCnt,
        QpAttr::RnrRetry,
        QpAttr::RqPsn,
        QpAttr::MaxQpRdAtomic,
        QpAttr::AltPath,
        QpAttr::MinRnrTimer,
        QpAttr::SqPsn,
        QpAttr::MaxDestRdAtomic,
        QpAttr::PathMigState,
        QpAttr::Cap,
        QpAttr::DestQpn,
    };
    for (int i = 0; i < 21; ++i) CHECK(bits[i] == (1u << i));
    CHECK(QpAttr::RateLimit == (1u << 25));
}

TEST_CASE("work-request opcodes and send flags have rdma-core's values", "[verbs_types]") {
    CHECK(static_cast<int>(WrOpcode::RdmaWrite) == 0);
    CHECK(static_cast<int>(WrOpcode::RdmaWriteWithImm) == 1);
    CHECK(static_cast<int>(WrOpcode::Send) == 2);
    CHECK(static_cast<int>(WrOpcode::SendWithImm) == 3);
    CHECK(static_cast<int>(WrOpcode::RdmaRead) == 4);
    CHECK(static_cast<int>(WrOpcode::AtomicCmpAndSwp) == 5);
    CHECK(static_cast<int>(WrOpcode::AtomicFetchAndAdd) == 6);
    CHECK(static_cast<int>(WrOpcode::LocalInv) == 7);
    CHECK(static_cast<int>(WrOpcode::BindMw) == 8);
    CHECK(static_cast<int>(WrOpcode::SendWithInv) == 9);
    CHECK(static_cast<int>(WrOpcode::Tso) == 10);
    CHECK(static_cast<int>(WrOpcode::Driver1) == 11);
    CHECK(static_cast<int>(WrOpcode::Flush) == 14);
    CHECK(static_cast<int>(WrOpcode::AtomicWrite) == 15);

    CHECK(SendFlag::Fence == 1);
    CHECK(SendFlag::Signaled == 2);
    CHECK(SendFlag::Solicited == 4);
    CHECK(SendFlag::Inline == 8);
    CHECK(SendFlag::IpCsum == 16);

    CHECK(AccessFlag::LocalWrite == 1);
    CHECK(AccessFlag::RemoteWrite == 2);
    CHECK(AccessFlag::RemoteRead == 4);
    CHECK(AccessFlag::RemoteAtomic == 8);
    CHECK(AccessFlag::MwBind == 16);
    CHECK(AccessFlag::ZeroBased == 32);
    CHECK(AccessFlag::OnDemand == 64);
    CHECK(AccessFlag::HugeTlb == 128);
    CHECK(AccessFlag::FlushGlobal == 256);
    CHECK(AccessFlag::FlushPersistent == 512);
    CHECK(AccessFlag::RelaxedOrdering == (1u << 20));
}

TEST_CASE("completion statuses, opcodes and flags have rdma-core's values", "[verbs_types]") {
    const WcStatus statuses[] = {
        WcStatus::Success,        WcStatus::LocLenErr,      WcStatus::LocQpOpErr,     WcStatus::LocEecOpErr,
        WcStatus::LocProtErr,     WcStatus::WrFlushErr,     WcStatus::MwBindErr,      WcStatus::BadRespErr,
        WcStatus::LocAccessErr,   WcStatus::RemInvReqErr,   WcStatus::RemAccessErr,   WcStatus::RemOpErr,
        WcStatus::RetryExcErr,    WcStatus::RnrRetryExcErr, WcStatus::LocRddViolErr,  WcStatus::RemInvRdReqErr,
        WcStatus::RemAbortErr,    WcStatus::InvEecnErr,     WcStatus::InvEecStateErr, WcStatus::FatalErr,
        WcStatus::RespTimeoutErr, WcStatus::GeneralErr,     WcStatus::TmErr,          WcStatus::TmRndvIncomplete,
    };
    for (int i = 0; i < 24; ++i) CHECK(static_cast<int>(statuses[i]) == i);

    const WcOpcode send_side[] = {WcOpcode::Send,     WcOpcode::RdmaWrite,  WcOpcode::RdmaRead, WcOpcode::CompSwap,
                                  WcOpcode::FetchAdd, WcOpcode::BindMw,     WcOpcode::LocalInv, WcOpcode::Tso,
                                  WcOpcode::Flush,    WcOpcode::AtomicWrite};
    for (int i = 0; i < 10; ++i) CHECK(static_cast<int>(send_side[i]) == i);
    const WcOpcode recv_side[] = {WcOpcode::Recv,    WcOpcode::RecvRdmaWithImm, WcOpcode::TmAdd,   WcOpcode::TmDel,
                                  WcOpcode::TmSync,  WcOpcode::TmRecv,          WcOpcode::TmNoTag, WcOpcode::Driver1,
                                  WcOpcode::Driver2, WcOpcode::Driver3};
    for (int i = 0; i < 10; ++i) CHECK(static_cast<int>(recv_side[i]) == 128 + i);

    CHECK(WcFlag::Grh == 1);
    CHECK(WcFlag::WithImm == 2);
    CHECK(WcFlag::IpCsumOk == 4);
    CHECK(WcFlag::WithInv == 8);
    CHECK(WcFlag::TmSyncReq == 16);
    CHECK(WcFlag::TmMatch == 32);
    CHECK(WcFlag::TmDataValid == 64);
}

TEST_CASE("async event types have rdma-core's values", "[verbs_types]") {
    const EventType events[] = {
        EventType::CqErr,           EventType::QpFatal,          EventType::QpReqErr,
        EventType::QpAccessErr,     EventType::CommEst,          EventType::SqDrained,
        EventType::PathMig,         EventType::PathMigErr,       EventType::DeviceFatal,
        EventType::PortActive,      EventType::PortErr,          EventType::LidChange,
        EventType::PkeyChange,      EventType::SmChange,         EventType::SrqErr,
        EventType::SrqLimitReached, EventType::QpLastWqeReached, EventType::ClientReregister,
        EventType::GidChange,       EventType::WqFatal,
    };
    for (int i = 0; i < 20; ++i) CHECK(static_cast<int>(events[i]) == i);
}

TEST_CASE("MTU codes, bytes and the round-down conversion", "[verbs_types]") {
    CHECK(static_cast<int>(Mtu::Mtu256) == 1);
    CHECK(static_cast<int>(Mtu::Mtu512) == 2);
    CHECK(static_cast<int>(Mtu::Mtu1024) == 3);
    CHECK(static_cast<int>(Mtu::Mtu2048) == 4);
    CHECK(static_cast<int>(Mtu::Mtu4096) == 5);

    CHECK(mtu_bytes(Mtu::Mtu256) == 256);
    CHECK(mtu_bytes(Mtu::Mtu512) == 512);
    CHECK(mtu_bytes(Mtu::Mtu1024) == 1024);
    CHECK(mtu_bytes(Mtu::Mtu2048) == 2048);
    CHECK(mtu_bytes(Mtu::Mtu4096) == 4096);
    CHECK(mtu_bytes(static_cast<Mtu>(0)) == 0);
    CHECK(mtu_bytes(static_cast<Mtu>(6)) == 0);
    CHECK_FALSE(is_known(static_cast<Mtu>(0)));
    CHECK_FALSE(is_known(static_cast<Mtu>(6)));

    for (uint8_t code = 1; code <= 5; ++code) {
        const auto m = static_cast<Mtu>(code);
        REQUIRE(mtu_from_bytes(mtu_bytes(m)) == m);      // exact sizes round-trip
        REQUIRE(mtu_from_bytes(mtu_bytes(m) + 1) == m);  // round down
        if (code > 1) REQUIRE(mtu_from_bytes(mtu_bytes(m) - 1) == static_cast<Mtu>(code - 1));
    }
    CHECK(mtu_from_bytes(1500) == Mtu::Mtu1024);  // standard Ethernet
    CHECK(mtu_from_bytes(9000) == Mtu::Mtu4096);  // jumbo frames
    CHECK(mtu_from_bytes(0xFFFFFFFFu) == Mtu::Mtu4096);
    CHECK_FALSE(mtu_from_bytes(255).has_value());
    CHECK_FALSE(mtu_from_bytes(0).has_value());

    static_assert(mtu_bytes(Mtu::Mtu1024) == 1024);
    static_assert(mtu_from_bytes(4096) == Mtu::Mtu4096);
}

TEST_CASE("names use rdma-core's enumerator spelling", "[verbs_types]") {
    CHECK(qp_type_name(QpType::Rc) == "IBV_QPT_RC");
    CHECK(qp_type_name(QpType::Ud) == "IBV_QPT_UD");
    CHECK(qp_type_name(static_cast<QpType>(5)) == "UNKNOWN");
    CHECK(qp_state_name(QpState::Rts) == "IBV_QPS_RTS");
    CHECK(qp_state_name(QpState::Err) == "IBV_QPS_ERR");
    CHECK(qp_state_name(static_cast<QpState>(8)) == "UNKNOWN");
    CHECK(mig_state_name(MigState::Rearm) == "IBV_MIG_REARM");
    CHECK(mtu_name(Mtu::Mtu4096) == "IBV_MTU_4096");
    CHECK(wr_opcode_name(WrOpcode::AtomicFetchAndAdd) == "IBV_WR_ATOMIC_FETCH_AND_ADD");
    CHECK(wr_opcode_name(static_cast<WrOpcode>(12)) == "UNKNOWN");
    CHECK(wc_status_name(WcStatus::RetryExcErr) == "IBV_WC_RETRY_EXC_ERR");
    CHECK(wc_status_name(WcStatus::RnrRetryExcErr) == "IBV_WC_RNR_RETRY_EXC_ERR");
    CHECK(wc_status_name(WcStatus::GeneralErr) == "IBV_WC_GENERAL_ERR");
    CHECK(wc_status_name(static_cast<WcStatus>(24)) == "UNKNOWN");
    CHECK(wc_opcode_name(WcOpcode::RecvRdmaWithImm) == "IBV_WC_RECV_RDMA_WITH_IMM");
    CHECK(wc_opcode_name(static_cast<WcOpcode>(10)) == "UNKNOWN");
    CHECK(event_type_name(EventType::QpLastWqeReached) == "IBV_EVENT_QP_LAST_WQE_REACHED");
    CHECK(event_type_name(static_cast<EventType>(20)) == "UNKNOWN");
    CHECK(qp_attr_name(QpAttr::MaxDestRdAtomic) == "IBV_QP_MAX_DEST_RD_ATOMIC");
    CHECK(qp_attr_name(QpAttr::State | QpAttr::Port) == "UNKNOWN");  // not a single bit
    CHECK(send_flag_name(SendFlag::Signaled) == "IBV_SEND_SIGNALED");
    CHECK(access_flag_name(AccessFlag::RemoteAtomic) == "IBV_ACCESS_REMOTE_ATOMIC");
    CHECK(wc_flag_name(WcFlag::WithInv) == "IBV_WC_WITH_INV");
}

namespace {

// Every value 0..255 of a uint8_t enum: the known ones have distinct names that carry `prefix`,
// and there are exactly `expected_known` of them.
template <typename E, typename NameFn>
void check_name_table(NameFn name, std::string_view prefix, int expected_known) {
    std::set<std::string_view> seen;
    int known = 0;
    for (int v = 0; v < 256; ++v) {
        const auto e = static_cast<E>(v);
        const std::string_view n = name(e);
        REQUIRE(is_known(e) == (n != kUnknownName));
        if (n == kUnknownName) continue;
        ++known;
        INFO(n);
        REQUIRE(n.substr(0, prefix.size()) == prefix);
        REQUIRE(seen.insert(n).second);
    }
    CHECK(known == expected_known);
}

// The same for a flag set: every defined single bit has a distinct name with `prefix`.
void check_flag_names(std::string_view (*name)(uint32_t) noexcept, std::string_view prefix, int expected_known) {
    std::set<std::string_view> seen;
    int known = 0;
    for (int i = 0; i < 32; ++i) {
        const std::string_view n = name(1u << i);
        if (n == kUnknownName) continue;
        ++known;
        INFO(n);
        REQUIRE(n.substr(0, prefix.size()) == prefix);
        REQUIRE(seen.insert(n).second);
    }
    CHECK(known == expected_known);
    CHECK(name(0) == kUnknownName);
}

}  // namespace

TEST_CASE("every defined value has a distinct name, nothing else has one", "[verbs_types]") {
    check_name_table<QpType>(qp_type_name, "IBV_QPT_", 7);
    check_name_table<QpState>(qp_state_name, "IBV_QPS_", 8);
    check_name_table<MigState>(mig_state_name, "IBV_MIG_", 3);
    check_name_table<WrOpcode>(wr_opcode_name, "IBV_WR_", 14);
    check_name_table<WcStatus>(wc_status_name, "IBV_WC_", 24);
    check_name_table<WcOpcode>(wc_opcode_name, "IBV_WC_", 20);
    check_name_table<EventType>(event_type_name, "IBV_EVENT_", 20);
    check_name_table<Mtu>(mtu_name, "IBV_MTU_", 5);
    check_flag_names(qp_attr_name, "IBV_QP_", 22);
    check_flag_names(send_flag_name, "IBV_SEND_", 5);
    check_flag_names(access_flag_name, "IBV_ACCESS_", 11);
    check_flag_names(wc_flag_name, "IBV_WC_", 7);
}

TEST_CASE("receive completions are told apart by bit 7", "[verbs_types]") {
    CHECK(is_recv(WcOpcode::Recv));
    CHECK(is_recv(WcOpcode::RecvRdmaWithImm));
    CHECK(is_recv(WcOpcode::TmRecv));
    CHECK_FALSE(is_recv(WcOpcode::Send));
    CHECK_FALSE(is_recv(WcOpcode::RdmaRead));
    CHECK_FALSE(is_recv(WcOpcode::AtomicWrite));
}

TEST_CASE("work requests complete with their base operation's opcode", "[verbs_types]") {
    CHECK(wc_opcode_for(WrOpcode::RdmaWrite) == WcOpcode::RdmaWrite);
    CHECK(wc_opcode_for(WrOpcode::RdmaWriteWithImm) == WcOpcode::RdmaWrite);
    CHECK(wc_opcode_for(WrOpcode::Send) == WcOpcode::Send);
    CHECK(wc_opcode_for(WrOpcode::SendWithImm) == WcOpcode::Send);
    CHECK(wc_opcode_for(WrOpcode::SendWithInv) == WcOpcode::Send);
    CHECK(wc_opcode_for(WrOpcode::RdmaRead) == WcOpcode::RdmaRead);
    CHECK(wc_opcode_for(WrOpcode::AtomicCmpAndSwp) == WcOpcode::CompSwap);
    CHECK(wc_opcode_for(WrOpcode::AtomicFetchAndAdd) == WcOpcode::FetchAdd);
    CHECK(wc_opcode_for(WrOpcode::LocalInv) == WcOpcode::LocalInv);
    CHECK(wc_opcode_for(WrOpcode::BindMw) == WcOpcode::BindMw);
    CHECK(wc_opcode_for(WrOpcode::Tso) == WcOpcode::Tso);
    CHECK(wc_opcode_for(WrOpcode::Flush) == WcOpcode::Flush);
    CHECK(wc_opcode_for(WrOpcode::AtomicWrite) == WcOpcode::AtomicWrite);
    CHECK_FALSE(wc_opcode_for(WrOpcode::Driver1).has_value());
    CHECK_FALSE(wc_opcode_for(static_cast<WrOpcode>(12)).has_value());
    for (int v = 0; v < 256; ++v) {
        const auto op = static_cast<WrOpcode>(v);
        if (const auto wc = wc_opcode_for(op)) REQUIRE_FALSE(is_recv(*wc));
    }
}

TEST_CASE("flag masks print as their names", "[verbs_types]") {
    CHECK(qp_attr_mask_string(0) == "0");
    CHECK(qp_attr_mask_string(QpAttr::State) == "IBV_QP_STATE");
    CHECK(qp_attr_mask_string(QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) ==
          "IBV_QP_STATE|IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX|IBV_QP_PORT");
    CHECK(qp_attr_mask_string(QpAttr::SqPsn | (1u << 21) | (1u << 31)) == "IBV_QP_SQ_PSN|0x80200000");
    CHECK(qp_attr_mask_string(1u << 22) == "0x400000");
    CHECK(send_flags_string(SendFlag::Signaled | SendFlag::Inline) == "IBV_SEND_SIGNALED|IBV_SEND_INLINE");
    CHECK(access_flags_string(AccessFlag::LocalWrite | AccessFlag::RemoteRead) ==
          "IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_READ");
    CHECK(wc_flags_string(WcFlag::Grh | WcFlag::WithImm) == "IBV_WC_GRH|IBV_WC_WITH_IMM");
    CHECK(wc_flags_string(0x80) == "0x80");
}
