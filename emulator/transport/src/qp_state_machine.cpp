#include "rnic/transport/qp_state_machine.hpp"

#include <array>
#include <cerrno>
#include <cstddef>

namespace rnic::transport {
namespace {

using A = QpAttr;

// Attribute sets per QP type. A type left out of a row gets nothing (required: none,
// optional: none).
struct PerType {
    uint32_t rc = 0;
    uint32_t uc = 0;
    uint32_t ud = 0;
};

struct Rule {
    QpState from;
    QpState to;
    PerType required;
    PerType optional;
};

constexpr QpState kReset = QpState::Reset;
constexpr QpState kInit = QpState::Init;
constexpr QpState kRtr = QpState::Rtr;
constexpr QpState kRts = QpState::Rts;
constexpr QpState kSqd = QpState::Sqd;
constexpr QpState kSqe = QpState::Sqe;
constexpr QpState kErr = QpState::Err;

// Attribute sets shared by several rows.
constexpr uint32_t kRcUcPathOpt = A::AltPath | A::AccessFlags | A::PathMigState;  // re-arm APM, change access
constexpr uint32_t kRcRtsOpt = A::CurState | kRcUcPathOpt | A::MinRnrTimer;
constexpr uint32_t kUcRtsOpt = A::CurState | kRcUcPathOpt;
constexpr uint32_t kUdRtsOpt = A::CurState | A::Qkey;

// The IBA 10.3.1 transition table as Linux enforces it (ib_modify_qp_is_ok). Every pair not
// listed is illegal; in particular nothing leads to SQE (only the QP itself enters it, on a
// send-queue error) and RESET does not lead to ERR. Transitions to RESET and to ERR take no
// attribute but IBV_QP_STATE.
// clang-format off
constexpr Rule kRules[] = {
    // ---- from RESET
    {kReset, kReset, {}, {}},
    {kReset, kInit,
     /*required*/ {.rc = A::PkeyIndex | A::Port | A::AccessFlags,
                   .uc = A::PkeyIndex | A::Port | A::AccessFlags,
                   .ud = A::PkeyIndex | A::Port | A::Qkey},
     /*optional*/ {}},

    // ---- from INIT
    {kInit, kReset, {}, {}},
    {kInit, kErr, {}, {}},
    {kInit, kInit,
     /*required*/ {},
     /*optional*/ {.rc = A::PkeyIndex | A::Port | A::AccessFlags,
                   .uc = A::PkeyIndex | A::Port | A::AccessFlags,
                   .ud = A::PkeyIndex | A::Port | A::Qkey}},
    {kInit, kRtr,
     /*required*/ {.rc = A::Av | A::PathMtu | A::DestQpn | A::RqPsn | A::MaxDestRdAtomic | A::MinRnrTimer,
                   .uc = A::Av | A::PathMtu | A::DestQpn | A::RqPsn,
                   .ud = 0},
     /*optional*/ {.rc = A::AltPath | A::AccessFlags | A::PkeyIndex,
                   .uc = A::AltPath | A::AccessFlags | A::PkeyIndex,
                   .ud = A::PkeyIndex | A::Qkey}},

    // ---- from RTR
    {kRtr, kReset, {}, {}},
    {kRtr, kErr, {}, {}},
    {kRtr, kRts,
     /*required*/ {.rc = A::SqPsn | A::Timeout | A::RetryCnt | A::RnrRetry | A::MaxQpRdAtomic,
                   .uc = A::SqPsn,
                   .ud = A::SqPsn},
     /*optional*/ {.rc = kRcRtsOpt, .uc = kUcRtsOpt, .ud = kUdRtsOpt}},

    // ---- from RTS
    {kRts, kReset, {}, {}},
    {kRts, kErr, {}, {}},
    {kRts, kRts,
     /*required*/ {},
     /*optional*/ {.rc = kRcRtsOpt, .uc = kUcRtsOpt, .ud = kUdRtsOpt}},
    {kRts, kSqd,
     /*required*/ {},
     /*optional*/ {.rc = A::EnSqdAsyncNotify, .uc = A::EnSqdAsyncNotify, .ud = A::EnSqdAsyncNotify}},

    // ---- from SQD
    {kSqd, kReset, {}, {}},
    {kSqd, kErr, {}, {}},
    {kSqd, kRts,
     /*required*/ {},
     /*optional*/ {.rc = kRcRtsOpt, .uc = kUcRtsOpt, .ud = kUdRtsOpt}},
    {kSqd, kSqd,
     /*required*/ {},
     /*optional*/ {.rc = A::Port | A::Av | A::Timeout | A::RetryCnt | A::RnrRetry | A::MaxQpRdAtomic |
                         A::MaxDestRdAtomic | A::AltPath | A::AccessFlags | A::PkeyIndex | A::MinRnrTimer |
                         A::PathMigState,
                   .uc = A::Av | A::AltPath | A::AccessFlags | A::PkeyIndex | A::PathMigState,
                   .ud = A::PkeyIndex | A::Qkey}},

    // ---- from SQE (only UC and UD QPs enter SQE; the kernel still lists an RC row, attribute-free)
    {kSqe, kReset, {}, {}},
    {kSqe, kErr, {}, {}},
    {kSqe, kRts,
     /*required*/ {},
     /*optional*/ {.rc = 0, .uc = A::CurState | A::AccessFlags, .ud = A::CurState | A::Qkey}},

    // ---- from ERR
    {kErr, kReset, {}, {}},
    {kErr, kErr, {}, {}},
};
// clang-format on

constexpr std::size_t index(QpState s) {
    return static_cast<std::size_t>(s);
}

// Dense [from][to] view of kRules: the index of the rule, or -1.
using RuleIndex = std::array<std::array<int, kNumQpStates>, kNumQpStates>;

constexpr bool rules_unique_and_in_range() {
    for (std::size_t i = 0; i < std::size(kRules); ++i) {
        if (index(kRules[i].from) >= kNumQpStates || index(kRules[i].to) >= kNumQpStates) return false;
        for (std::size_t j = i + 1; j < std::size(kRules); ++j) {
            if (kRules[i].from == kRules[j].from && kRules[i].to == kRules[j].to) return false;
        }
    }
    return true;
}

static_assert(rules_unique_and_in_range(), "each (from, to) pair appears once in kRules");
static_assert(std::size(kRules) == 22, "IBA 10.3.1 as in Linux: 22 legal (from, to) pairs");

constexpr RuleIndex build_index() {
    RuleIndex idx{};
    for (auto& row : idx) row.fill(-1);
    for (std::size_t i = 0; i < std::size(kRules); ++i)
        idx[index(kRules[i].from)][index(kRules[i].to)] = static_cast<int>(i);
    return idx;
}

constexpr RuleIndex kRuleIndex = build_index();

constexpr bool in_table(QpState s) {
    return static_cast<uint8_t>(s) <= static_cast<uint8_t>(QpState::Err);
}

constexpr uint32_t for_type(const PerType& p, QpType type) {
    switch (type) {
        case QpType::Rc:
            return p.rc;
        case QpType::Uc:
            return p.uc;
        case QpType::Ud:
            return p.ud;
        default:
            return 0;
    }
}

constexpr bool type_supported(QpType type) {
    return type == QpType::Rc || type == QpType::Uc || type == QpType::Ud;
}

}  // namespace

TransitionAttrs transition_attrs(QpType type, QpState from, QpState to) noexcept {
    if (!type_supported(type) || !in_table(from) || !in_table(to)) return {};
    const int i = kRuleIndex[index(from)][index(to)];
    if (i < 0) return {};
    const Rule& rule = kRules[i];
    return {true, for_type(rule.required, type), for_type(rule.optional, type)};
}

int check_modify_qp(QpType type, QpState current, QpState next, uint32_t attr_mask) noexcept {
    if (!type_supported(type) || !in_table(current) || !in_table(next)) return EINVAL;

    // A new state is only named through IBV_QP_STATE.
    if (next != current && (attr_mask & QpAttr::State) == 0) return EINVAL;

    // IBV_QP_CUR_STATE (the consumer asserting the state it believes the QP is in) is only
    // accepted when starting from RTR, RTS, SQD or SQE. The table lists it as optional only on
    // rows from those states, so this check is implied by the one below; kept as Linux has it.
    if ((attr_mask & QpAttr::CurState) != 0 && current != QpState::Rtr && current != QpState::Rts &&
        current != QpState::Sqd && current != QpState::Sqe) {
        return EINVAL;
    }

    const TransitionAttrs t = transition_attrs(type, current, next);
    if (!t.valid) return EINVAL;
    if ((attr_mask & t.required) != t.required) return EINVAL;                         // missing attribute
    if ((attr_mask & ~(t.required | t.optional | QpAttr::State)) != 0) return EINVAL;  // not allowed here
    return 0;
}

}  // namespace rnic::transport
