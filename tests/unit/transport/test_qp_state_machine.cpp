#include <array>
#include <bit>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "rnic/transport/qp_state_machine.hpp"

using namespace rnic::transport;

namespace {

using A = QpAttr;

constexpr QpType kTypes[] = {QpType::Rc, QpType::Uc, QpType::Ud};
constexpr QpState kStates[] = {QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts,
                               QpState::Sqd,   QpState::Sqe,  QpState::Err};

// The masks rdma-core's ibv_rc_pingpong / ibv_uc_pingpong / ibv_ud_pingpong and perftest use.
constexpr uint32_t kRcToInit = A::State | A::PkeyIndex | A::Port | A::AccessFlags;
constexpr uint32_t kRcToRtr =
    A::State | A::Av | A::PathMtu | A::DestQpn | A::RqPsn | A::MaxDestRdAtomic | A::MinRnrTimer;
constexpr uint32_t kRcToRts = A::State | A::SqPsn | A::Timeout | A::RetryCnt | A::RnrRetry | A::MaxQpRdAtomic;
constexpr uint32_t kUcToInit = kRcToInit;
constexpr uint32_t kUcToRtr = A::State | A::Av | A::PathMtu | A::DestQpn | A::RqPsn;
constexpr uint32_t kUcToRts = A::State | A::SqPsn;
constexpr uint32_t kUdToInit = A::State | A::PkeyIndex | A::Port | A::Qkey;
constexpr uint32_t kUdToRtr = A::State;
constexpr uint32_t kUdToRts = A::State | A::SqPsn;

std::string describe(QpType t, QpState from, QpState to, uint32_t mask) {
    std::ostringstream os;
    os << qp_type_name(t) << ' ' << qp_state_name(from) << "->" << qp_state_name(to) << " mask "
       << qp_attr_mask_string(mask);
    return os.str();
}

}  // namespace

TEST_CASE("qp_state_name", "[qp_state_machine]") {
    CHECK(qp_state_name(QpState::Reset) == "IBV_QPS_RESET");
    CHECK(qp_state_name(QpState::Init) == "IBV_QPS_INIT");
    CHECK(qp_state_name(QpState::Rtr) == "IBV_QPS_RTR");
    CHECK(qp_state_name(QpState::Rts) == "IBV_QPS_RTS");
    CHECK(qp_state_name(QpState::Sqd) == "IBV_QPS_SQD");
    CHECK(qp_state_name(QpState::Sqe) == "IBV_QPS_SQE");
    CHECK(qp_state_name(QpState::Err) == "IBV_QPS_ERR");
    CHECK(qp_state_name(QpState::Unknown) == "IBV_QPS_UNKNOWN");
    CHECK(qp_state_name(static_cast<QpState>(99)) == "UNKNOWN");
}

TEST_CASE("RC bring-up RESET->INIT->RTR->RTS", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Rc, QpState::Reset, QpState::Init, kRcToInit) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Rtr, kRcToRtr) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts) == 0);
    // With the optional attributes perftest and rdma_cm add.
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Rtr, kRcToRtr | A::PkeyIndex | A::AccessFlags) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | A::MinRnrTimer | A::CurState) == 0);
    // Each step's required attributes, one at a time, are really required.
    for (const auto& [from, to, mask] :
         {std::tuple{QpState::Reset, QpState::Init, kRcToInit}, std::tuple{QpState::Init, QpState::Rtr, kRcToRtr},
          std::tuple{QpState::Rtr, QpState::Rts, kRcToRts}}) {
        for (int i = 1; i < 32; ++i) {  // bit 0 is IBV_QP_STATE: without it there is no transition
            const uint32_t bit = 1u << i;
            if ((mask & bit) == 0) continue;
            INFO(describe(QpType::Rc, from, to, mask & ~bit));
            CHECK(check_modify_qp(QpType::Rc, from, to, mask & ~bit) == EINVAL);
        }
    }
}

TEST_CASE("UD bring-up RESET->INIT->RTR->RTS", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Ud, QpState::Reset, QpState::Init, kUdToInit) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, kUdToRtr) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Rtr, QpState::Rts, kUdToRts) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Reset, QpState::Init, kUdToInit & ~A::Qkey) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Reset, QpState::Init, kUdToInit & ~A::Port) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Rtr, QpState::Rts, A::State) == EINVAL);
    // UD has no access flags, no connection and no RC timers.
    CHECK(check_modify_qp(QpType::Ud, QpState::Reset, QpState::Init, kUdToInit | A::AccessFlags) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, kUdToRtr | A::Av) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, kUdToRtr | A::DestQpn) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Rtr, QpState::Rts, kUdToRts | A::Timeout) == EINVAL);
    // The RC masks do not fit UD.
    CHECK(check_modify_qp(QpType::Ud, QpState::Reset, QpState::Init, kRcToInit) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, kRcToRtr) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Rtr, QpState::Rts, kRcToRts) == EINVAL);
    // Optional: Q_Key and P_Key index may be changed on the way.
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, A::State | A::Qkey | A::PkeyIndex) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Rtr, QpState::Rts, kUdToRts | A::Qkey) == 0);
}

TEST_CASE("UC bring-up RESET->INIT->RTR->RTS", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Uc, QpState::Reset, QpState::Init, kUcToInit) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kUcToRtr) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Rtr, QpState::Rts, kUcToRts) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kUcToRtr & ~A::DestQpn) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kUcToRtr & ~A::RqPsn) == EINVAL);
    // UC has no RDMA READ/atomics and no ACKs: the RC-only attributes are refused.
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kUcToRtr | A::MaxDestRdAtomic) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kUcToRtr | A::MinRnrTimer) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Init, QpState::Rtr, kRcToRtr) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Rtr, QpState::Rts, kRcToRts) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Rtr, QpState::Rts, kUcToRts | A::Timeout) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Rtr, QpState::Rts, kUcToRts | A::AccessFlags | A::CurState) == 0);
}

TEST_CASE("attributes not allowed on a transition are refused", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Rc, QpState::Reset, QpState::Init, kRcToInit | A::Qkey) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Reset, QpState::Init, kRcToInit | A::Av) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Rtr, kRcToRtr | A::SqPsn) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Rtr, kRcToRtr | A::Port) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | A::DestQpn) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | A::PathMtu) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | A::Cap) == EINVAL);
    // IBV_QP_RATE_LIMIT is a raw-packet attribute; bits 21-24 and 26-31 are no attribute at all.
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Rts, A::RateLimit) == EINVAL);
    for (int i = 21; i < 32; ++i) {
        INFO("bit " << i);
        CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | (1u << i)) == EINVAL);
        CHECK(check_modify_qp(QpType::Ud, QpState::Rts, QpState::Rts, 1u << i) == EINVAL);
    }
}

TEST_CASE("illegal transitions", "[qp_state_machine]") {
    for (const QpType t : kTypes) {
        INFO(qp_type_name(t));
        // Skipping steps, with every attribute the skipped steps would have needed.
        CHECK(check_modify_qp(t, QpState::Reset, QpState::Rtr, 0x1FFFFF) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Reset, QpState::Rts, 0x1FFFFF) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Init, QpState::Rts, 0x1FFFFF) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Reset, QpState::Rts, kRcToRts) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Init, QpState::Rts, kRcToRts) == EINVAL);
        // Going back, or draining, before RTS.
        CHECK(check_modify_qp(t, QpState::Rtr, QpState::Init, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Rts, QpState::Rtr, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Rts, QpState::Init, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Init, QpState::Sqd, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Rtr, QpState::Sqd, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Sqd, QpState::Rtr, A::State) == EINVAL);
        // Only the QP itself enters SQE; nothing but RESET leaves ERR... and ERR itself.
        for (const QpState from : kStates) CHECK(check_modify_qp(t, from, QpState::Sqe, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Err, QpState::Init, kRcToInit) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Err, QpState::Rts, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Sqe, QpState::Sqd, A::State) == EINVAL);
        // Self-transitions that do not exist: a modify in RTR or SQE that changes no state.
        CHECK(check_modify_qp(t, QpState::Rtr, QpState::Rtr, A::State) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Rtr, QpState::Rtr, 0) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Sqe, QpState::Sqe, 0) == EINVAL);
    }
}

TEST_CASE("any state may go to RESET, any but RESET to ERR", "[qp_state_machine]") {
    for (const QpType t : kTypes) {
        for (const QpState from : kStates) {
            INFO(qp_type_name(t) << " from " << qp_state_name(from));
            CHECK(check_modify_qp(t, from, QpState::Reset, A::State) == 0);
            // Linux has no RESET->ERR row (IBA 10.3.1 lets "any state" go to ERR; the kernel, and
            // so rxe and every HCA driver, refuses it from RESET).
            CHECK(check_modify_qp(t, from, QpState::Err, A::State) == (from == QpState::Reset ? EINVAL : 0));
            // These transitions take no attribute, not even IBV_QP_CUR_STATE.
            CHECK(check_modify_qp(t, from, QpState::Reset, A::State | A::PkeyIndex) == EINVAL);
            CHECK(check_modify_qp(t, from, QpState::Err, A::State | A::CurState) == EINVAL);
            CHECK(check_modify_qp(t, from, QpState::Reset, A::State | A::CurState) == EINVAL);
        }
        CHECK(check_modify_qp(t, QpState::Reset, QpState::Reset, 0) == 0);
        CHECK(check_modify_qp(t, QpState::Err, QpState::Err, 0) == 0);
    }
}

TEST_CASE("a state change needs IBV_QP_STATE", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Rc, QpState::Reset, QpState::Init, kRcToInit & ~A::State) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Err, 0) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Rtr, 0) == EINVAL);
    // Without a state change the self-transition applies, with or without IBV_QP_STATE.
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Rts, A::MinRnrTimer) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Rts, A::State | A::MinRnrTimer) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Init, A::AccessFlags) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Init, QpState::Init, A::Qkey) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Rts, A::Timeout) == EINVAL);  // only in SQD
    CHECK(check_modify_qp(QpType::Rc, QpState::Sqd, QpState::Sqd, A::Timeout | A::RetryCnt | A::Av) == 0);
}

TEST_CASE("IBV_QP_CUR_STATE only from RTR, RTS, SQD, SQE", "[qp_state_machine]") {
    CHECK(check_modify_qp(QpType::Rc, QpState::Rtr, QpState::Rts, kRcToRts | A::CurState) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Rts, A::CurState) == 0);
    CHECK(check_modify_qp(QpType::Rc, QpState::Sqd, QpState::Rts, A::State | A::CurState) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Sqe, QpState::Rts, A::State | A::CurState) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Sqe, QpState::Rts, A::State | A::CurState | A::AccessFlags) == 0);
    // From RESET or INIT, or on a row that does not list it, it is refused.
    CHECK(check_modify_qp(QpType::Rc, QpState::Reset, QpState::Init, kRcToInit | A::CurState) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Init, A::CurState) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Init, QpState::Rtr, kRcToRtr | A::CurState) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Sqd, A::State | A::CurState) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Sqd, QpState::Sqd, A::CurState) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Sqe, QpState::Rts, A::State | A::CurState) == EINVAL);
}

TEST_CASE("SQD and SQE transitions", "[qp_state_machine]") {
    for (const QpType t : kTypes) {
        INFO(qp_type_name(t));
        CHECK(check_modify_qp(t, QpState::Rts, QpState::Sqd, A::State) == 0);
        CHECK(check_modify_qp(t, QpState::Rts, QpState::Sqd, A::State | A::EnSqdAsyncNotify) == 0);
        CHECK(check_modify_qp(t, QpState::Sqd, QpState::Rts, A::State) == 0);
        CHECK(check_modify_qp(t, QpState::Sqd, QpState::Sqd, A::State) == 0);
        CHECK(check_modify_qp(t, QpState::Sqe, QpState::Rts, A::State) == 0);
        CHECK(check_modify_qp(t, QpState::Sqd, QpState::Rts, A::State | A::EnSqdAsyncNotify) == EINVAL);
    }
    CHECK(check_modify_qp(QpType::Ud, QpState::Sqd, QpState::Sqd, A::Qkey | A::PkeyIndex) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Sqd, QpState::Sqd, A::Port) == EINVAL);
    CHECK(check_modify_qp(QpType::Uc, QpState::Sqd, QpState::Sqd, A::Av | A::PathMigState) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Sqd, QpState::Sqd, A::Port) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Sqd, QpState::Sqd, A::Port | A::MaxDestRdAtomic) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Sqe, QpState::Rts, A::State | A::AccessFlags) == 0);
    CHECK(check_modify_qp(QpType::Uc, QpState::Sqe, QpState::Rts, A::State | A::Qkey) == EINVAL);
    CHECK(check_modify_qp(QpType::Ud, QpState::Sqe, QpState::Rts, A::State | A::Qkey) == 0);
    CHECK(check_modify_qp(QpType::Ud, QpState::Sqe, QpState::Rts, A::State | A::AccessFlags) == EINVAL);
}

TEST_CASE("unsupported QP types and out-of-range states", "[qp_state_machine]") {
    for (const QpType t : {QpType::RawPacket, QpType::XrcSend, QpType::XrcRecv, QpType::Driver, static_cast<QpType>(0),
                           static_cast<QpType>(1)}) {
        INFO(static_cast<int>(t));
        CHECK(check_modify_qp(t, QpState::Reset, QpState::Init, kRcToInit) == EINVAL);
        CHECK(check_modify_qp(t, QpState::Rts, QpState::Err, A::State) == EINVAL);
        CHECK_FALSE(transition_attrs(t, QpState::Reset, QpState::Init).valid);
    }
    CHECK(check_modify_qp(QpType::Rc, QpState::Unknown, QpState::Reset, A::State) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Rts, QpState::Unknown, A::State) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, static_cast<QpState>(200), QpState::Err, A::State) == EINVAL);
    CHECK(check_modify_qp(QpType::Rc, QpState::Unknown, QpState::Unknown, 0) == EINVAL);
    CHECK_FALSE(transition_attrs(QpType::Rc, QpState::Unknown, QpState::Reset).valid);
}

TEST_CASE("resolve_modify_qp_states follows the mask", "[qp_state_machine]") {
    constexpr auto s1 = resolve_modify_qp_states(QpState::Init, A::State, QpState::Reset, QpState::Rtr);
    static_assert(s1.from == QpState::Init && s1.to == QpState::Rtr);
    constexpr auto s2 = resolve_modify_qp_states(QpState::Rts, A::Timeout, QpState::Reset, QpState::Err);
    static_assert(s2.from == QpState::Rts && s2.to == QpState::Rts);
    constexpr auto s3 = resolve_modify_qp_states(QpState::Err, A::State | A::CurState, QpState::Sqe, QpState::Rts);
    static_assert(s3.from == QpState::Sqe && s3.to == QpState::Rts);
    constexpr auto s4 = resolve_modify_qp_states(QpState::Rts, A::CurState, QpState::Sqd, QpState::Reset);
    static_assert(s4.from == QpState::Sqd && s4.to == QpState::Sqd);
    const auto s = resolve_modify_qp_states(QpState::Rtr, kRcToRts, QpState::Reset, QpState::Rts);
    CHECK(check_modify_qp(QpType::Rc, s.from, s.to, kRcToRts) == 0);
}

// ---------------------------------------------------------------------------------------------
// The whole table against a second description of it, written independently from the kernel's
// qp_state_table in the kernel's own terms (attribute names without the IBV_QP_ prefix). Rows
// not listed are illegal transitions.
namespace {

constexpr std::string_view kExpectedTable = R"(
# types     from   to    | required                                                   | optional
RC,UC,UD    RESET  RESET |                                                            |
RC,UC       RESET  INIT  | PKEY_INDEX PORT ACCESS_FLAGS                               |
UD          RESET  INIT  | PKEY_INDEX PORT QKEY                                       |
RC,UC,UD    INIT   RESET |                                                            |
RC,UC,UD    INIT   ERR   |                                                            |
RC,UC       INIT   INIT  |                                                            | PKEY_INDEX PORT ACCESS_FLAGS
UD          INIT   INIT  |                                                            | PKEY_INDEX PORT QKEY
RC          INIT   RTR   | AV PATH_MTU DEST_QPN RQ_PSN MAX_DEST_RD_ATOMIC MIN_RNR_TIMER | ALT_PATH ACCESS_FLAGS PKEY_INDEX
UC          INIT   RTR   | AV PATH_MTU DEST_QPN RQ_PSN                                | ALT_PATH ACCESS_FLAGS PKEY_INDEX
UD          INIT   RTR   |                                                            | PKEY_INDEX QKEY
RC,UC,UD    RTR    RESET |                                                            |
RC,UC,UD    RTR    ERR   |                                                            |
RC          RTR    RTS   | TIMEOUT RETRY_CNT RNR_RETRY SQ_PSN MAX_QP_RD_ATOMIC        | CUR_STATE ALT_PATH ACCESS_FLAGS MIN_RNR_TIMER PATH_MIG_STATE
UC          RTR    RTS   | SQ_PSN                                                     | CUR_STATE ALT_PATH ACCESS_FLAGS PATH_MIG_STATE
UD          RTR    RTS   | SQ_PSN                                                     | CUR_STATE QKEY
RC,UC,UD    RTS    RESET |                                                            |
RC,UC,UD    RTS    ERR   |                                                            |
RC          RTS    RTS   |                                                            | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE MIN_RNR_TIMER
UC          RTS    RTS   |                                                            | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE
UD          RTS    RTS   |                                                            | CUR_STATE QKEY
RC,UC,UD    RTS    SQD   |                                                            | EN_SQD_ASYNC_NOTIFY
RC,UC,UD    SQD    RESET |                                                            |
RC,UC,UD    SQD    ERR   |                                                            |
RC          SQD    RTS   |                                                            | CUR_STATE ALT_PATH ACCESS_FLAGS MIN_RNR_TIMER PATH_MIG_STATE
UC          SQD    RTS   |                                                            | CUR_STATE ALT_PATH ACCESS_FLAGS PATH_MIG_STATE
UD          SQD    RTS   |                                                            | CUR_STATE QKEY
RC          SQD    SQD   |                                                            | PORT AV TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC MAX_DEST_RD_ATOMIC ALT_PATH ACCESS_FLAGS PKEY_INDEX MIN_RNR_TIMER PATH_MIG_STATE
UC          SQD    SQD   |                                                            | AV ALT_PATH ACCESS_FLAGS PKEY_INDEX PATH_MIG_STATE
UD          SQD    SQD   |                                                            | PKEY_INDEX QKEY
RC,UC,UD    SQE    RESET |                                                            |
RC,UC,UD    SQE    ERR   |                                                            |
RC          SQE    RTS   |                                                            |
UC          SQE    RTS   |                                                            | CUR_STATE ACCESS_FLAGS
UD          SQE    RTS   |                                                            | CUR_STATE QKEY
RC,UC,UD    ERR    RESET |                                                            |
RC,UC,UD    ERR    ERR   |                                                            |
)";

struct Expected {
    uint32_t required = 0;
    uint32_t optional = 0;
};

using Key = std::tuple<int, int, int>;  // type, from, to

// Splits on `sep`; empty fields are dropped unless `keep_empty`.
std::vector<std::string> split(std::string_view s, char sep, bool keep_empty = false) {
    std::vector<std::string> out;
    std::string cur;
    for (const char c : s) {
        if (c == sep) {
            if (keep_empty || !cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (keep_empty || !cur.empty()) out.push_back(cur);
    return out;
}

template <typename E, typename NameFn>
E parse_enum(const std::string& word, std::string_view prefix, NameFn name) {
    for (int v = 0; v < 256; ++v) {
        if (name(static_cast<E>(v)) == std::string(prefix) + word) return static_cast<E>(v);
    }
    FAIL("unknown word in the expected table: " << word);
    return E{};
}

uint32_t parse_attrs(std::string_view words) {
    uint32_t mask = 0;
    for (const auto& w : split(words, ' ')) {
        bool found = false;
        for (int i = 0; i < 32; ++i) {
            if (qp_attr_name(1u << i) == "IBV_QP_" + w) {
                mask |= 1u << i;
                found = true;
            }
        }
        if (!found) FAIL("unknown attribute in the expected table: " << w);
    }
    return mask;
}

const std::map<Key, Expected>& expected_table() {
    static const std::map<Key, Expected> table = [] {
        std::map<Key, Expected> t;
        for (const auto& line : split(kExpectedTable, '\n')) {
            if (line.empty() || line[0] == '#') continue;
            const auto columns = split(line, '|', /*keep_empty=*/true);
            REQUIRE(columns.size() == 3);
            const std::string& req = columns[1];
            const std::string& opt = columns[2];
            const auto words = split(columns[0], ' ');
            REQUIRE(words.size() == 3);
            const auto from = parse_enum<QpState>(words[1], "IBV_QPS_", qp_state_name);
            const auto to = parse_enum<QpState>(words[2], "IBV_QPS_", qp_state_name);
            for (const auto& type_word : split(words[0], ',')) {
                const auto type = parse_enum<QpType>(type_word, "IBV_QPT_", qp_type_name);
                const Key key{static_cast<int>(type), static_cast<int>(from), static_cast<int>(to)};
                REQUIRE(t.count(key) == 0);
                t[key] = Expected{parse_attrs(req), parse_attrs(opt)};
            }
        }
        return t;
    }();
    return table;
}

std::optional<Expected> expected_row(QpType t, QpState from, QpState to) {
    const auto& table = expected_table();
    const auto it = table.find(Key{static_cast<int>(t), static_cast<int>(from), static_cast<int>(to)});
    if (it == table.end()) return std::nullopt;
    return it->second;
}

// The verdict the kernel gives, computed from the expected table.
int expected_verdict(QpType t, QpState from, QpState to, uint32_t mask) {
    if (from != to && (mask & A::State) == 0) return EINVAL;
    const auto row = expected_row(t, from, to);
    if (!row) return EINVAL;
    const bool cur_state_ok =
        from == QpState::Rtr || from == QpState::Rts || from == QpState::Sqd || from == QpState::Sqe;
    if ((mask & A::CurState) != 0 && !cur_state_ok) return EINVAL;
    if ((mask & row->required) != row->required) return EINVAL;
    if ((mask & ~(row->required | row->optional | A::State)) != 0) return EINVAL;
    return 0;
}

// Deterministic pseudo-random masks (xorshift32).
struct Rng {
    uint32_t s = 0x9E3779B9u;
    uint32_t next() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        return s;
    }
};

}  // namespace

TEST_CASE("the expected table is well formed", "[qp_state_machine]") {
    // 22 legal (from, to) pairs, each for RC, UC and UD.
    CHECK(expected_table().size() == 66);
}

TEST_CASE("transition_attrs equals the expected table for every transition", "[qp_state_machine]") {
    for (const QpType t : kTypes) {
        for (const QpState from : kStates) {
            for (const QpState to : kStates) {
                INFO(qp_type_name(t) << ' ' << qp_state_name(from) << "->" << qp_state_name(to));
                const auto row = expected_row(t, from, to);
                const TransitionAttrs got = transition_attrs(t, from, to);
                REQUIRE(got.valid == row.has_value());
                if (!row) continue;
                CHECK(qp_attr_mask_string(got.required) == qp_attr_mask_string(row->required));
                CHECK(qp_attr_mask_string(got.optional) == qp_attr_mask_string(row->optional));
            }
        }
    }
}

TEST_CASE("check_modify_qp equals the expected verdict on a mask sweep of every transition", "[qp_state_machine]") {
    std::vector<std::string> mismatches;
    std::size_t checked = 0;
    Rng rng;
    for (const QpType t : kTypes) {
        for (const QpState from : kStates) {
            for (const QpState to : kStates) {
                const auto row = expected_row(t, from, to);
                const uint32_t req = row ? row->required : 0;
                const uint32_t opt = row ? row->optional : 0;
                std::vector<uint32_t> masks = {0, A::State, req, req | A::State, req | opt, req | opt | A::State};
                for (int i = 0; i < 32; ++i) {
                    const uint32_t bit = 1u << i;
                    masks.push_back(bit);
                    masks.push_back(A::State | bit);
                    masks.push_back((req | A::State) & ~bit);
                    masks.push_back(req | A::State | bit);
                    masks.push_back((req | opt | A::State) & ~bit);
                    masks.push_back(req | opt | A::State | bit);
                }
                for (int i = 0; i < 300; ++i) {
                    const uint32_t r = rng.next();
                    masks.push_back(r & 0x1FFFFF);                                        // any defined bits
                    masks.push_back((r & (req | opt)) | req | A::State);                  // legal, usually
                    masks.push_back(((r & (req | opt)) | A::State) ^ (1u << (r >> 27)));  // near-legal
                }
                for (const uint32_t m : masks) {
                    ++checked;
                    const int want = expected_verdict(t, from, to, m);
                    const int got = check_modify_qp(t, from, to, m);
                    if (want != got && mismatches.size() < 20) {
                        mismatches.push_back(describe(t, from, to, m) + ": got " + std::to_string(got) + ", expected " +
                                             std::to_string(want));
                    }
                }
            }
        }
    }
    INFO("checked " << checked << " masks");
    for (const auto& m : mismatches) UNSCOPED_INFO(m);
    CHECK(mismatches.empty());
}

TEST_CASE("every mask of bits 0-20 on the bring-up and SQD transitions", "[qp_state_machine]") {
    struct Case {
        QpType type;
        QpState from;
        QpState to;
    };
    const Case cases[] = {
        {QpType::Rc, QpState::Reset, QpState::Init}, {QpType::Rc, QpState::Init, QpState::Rtr},
        {QpType::Rc, QpState::Rtr, QpState::Rts},    {QpType::Ud, QpState::Init, QpState::Rtr},
        {QpType::Uc, QpState::Rts, QpState::Rts},    {QpType::Rc, QpState::Sqd, QpState::Sqd},
    };
    for (const Case& c : cases) {
        INFO(qp_type_name(c.type) << ' ' << qp_state_name(c.from) << "->" << qp_state_name(c.to));
        const auto row = expected_row(c.type, c.from, c.to);
        REQUIRE(row.has_value());
        uint32_t mismatches = 0;
        uint32_t first_mismatch = 0;
        uint64_t accepted = 0;
        for (uint32_t m = 0; m < (1u << 21); ++m) {
            const int got = check_modify_qp(c.type, c.from, c.to, m);
            if (got != expected_verdict(c.type, c.from, c.to, m) && mismatches++ == 0) first_mismatch = m;
            if (got == 0) ++accepted;
        }
        INFO("first mismatch " << qp_attr_mask_string(first_mismatch));
        CHECK(mismatches == 0);
        // Independently of both tables: the accepted masks are exactly required + any subset of
        // optional, with IBV_QP_STATE free only when the state does not change.
        const int free_bits = std::popcount(row->optional) + (c.from == c.to ? 1 : 0);
        CHECK(accepted == (uint64_t{1} << free_bits));
    }
}
