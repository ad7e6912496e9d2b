#include "rnic/wire/opcode.hpp"

#include <array>

#include "rnic/wire/headers.hpp"

namespace rnic::wire {
namespace {

constexpr uint8_t ext_length(uint16_t ext) {
    size_t n = Bth::kSize;
    if (ext & kExtDeth) n += Deth::kSize;
    if (ext & kExtReth) n += Reth::kSize;
    if (ext & kExtAtomicEth) n += AtomicEth::kSize;
    if (ext & kExtAeth) n += Aeth::kSize;
    if (ext & kExtAtomicAckEth) n += AtomicAckEth::kSize;
    if (ext & kExtImmDt) n += ImmDt::kSize;
    if (ext & kExtIeth) n += Ieth::kSize;
    if (ext & kExtCnp) n += kCnpReservedSize;
    if (ext & kExtFeth) n += Feth::kSize;
    return static_cast<uint8_t>(n);
}

constexpr OpcodeInfo entry(std::string_view name, Transport t, OpKind k, Segment s, uint16_t ext,
                           bool payload) {
    return OpcodeInfo{name, t, k, s, ext, payload, ext_length(ext)};
}

using enum Transport;
using enum OpKind;

// SEND and WRITE opcodes are laid out identically for RC (0x00) and UC (0x20).
template <size_t N>
constexpr void add_send_write(std::array<OpcodeInfo, N>& t, uint8_t base, Transport tr,
                              const std::string_view (&names)[12]) {
    t[base + 0x00] = entry(names[0], tr, Send, Segment::First, 0, true);
    t[base + 0x01] = entry(names[1], tr, Send, Segment::Middle, 0, true);
    t[base + 0x02] = entry(names[2], tr, Send, Segment::Last, 0, true);
    t[base + 0x03] = entry(names[3], tr, Send, Segment::Last, kExtImmDt, true);
    t[base + 0x04] = entry(names[4], tr, Send, Segment::Only, 0, true);
    t[base + 0x05] = entry(names[5], tr, Send, Segment::Only, kExtImmDt, true);
    t[base + 0x06] = entry(names[6], tr, RdmaWrite, Segment::First, kExtReth, true);
    t[base + 0x07] = entry(names[7], tr, RdmaWrite, Segment::Middle, 0, true);
    t[base + 0x08] = entry(names[8], tr, RdmaWrite, Segment::Last, 0, true);
    t[base + 0x09] = entry(names[9], tr, RdmaWrite, Segment::Last, kExtImmDt, true);
    t[base + 0x0A] = entry(names[10], tr, RdmaWrite, Segment::Only, kExtReth, true);
    t[base + 0x0B] = entry(names[11], tr, RdmaWrite, Segment::Only, kExtReth | kExtImmDt, true);
}

constexpr std::string_view kRcNames[12] = {
    "RC_SEND_FIRST",       "RC_SEND_MIDDLE",
    "RC_SEND_LAST",        "RC_SEND_LAST_WITH_IMMEDIATE",
    "RC_SEND_ONLY",        "RC_SEND_ONLY_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
    "RC_RDMA_WRITE_LAST",  "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_ONLY",  "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
};
constexpr std::string_view kUcNames[12] = {
    "UC_SEND_FIRST",       "UC_SEND_MIDDLE",
    "UC_SEND_LAST",        "UC_SEND_LAST_WITH_IMMEDIATE",
    "UC_SEND_ONLY",        "UC_SEND_ONLY_WITH_IMMEDIATE",
    "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE",
    "UC_RDMA_WRITE_LAST",  "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "UC_RDMA_WRITE_ONLY",  "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
};

constexpr std::array<OpcodeInfo, 256> make_table() {
    std::array<OpcodeInfo, 256> t{};
    for (auto& e : t) e = entry("INVALID", Transport::None, Invalid, Segment::None, 0, false);

    add_send_write(t, op::kRcSendFirst, RC, kRcNames);
    t[op::kRcReadRequest] = entry("RC_RDMA_READ_REQUEST", RC, RdmaReadRequest, Segment::Only, kExtReth, false);
    t[op::kRcReadResponseFirst] =
        entry("RC_RDMA_READ_RESPONSE_FIRST", RC, RdmaReadResponse, Segment::First, kExtAeth, true);
    t[op::kRcReadResponseMiddle] =
        entry("RC_RDMA_READ_RESPONSE_MIDDLE", RC, RdmaReadResponse, Segment::Middle, 0, true);
    t[op::kRcReadResponseLast] =
        entry("RC_RDMA_READ_RESPONSE_LAST", RC, RdmaReadResponse, Segment::Last, kExtAeth, true);
    t[op::kRcReadResponseOnly] =
        entry("RC_RDMA_READ_RESPONSE_ONLY", RC, RdmaReadResponse, Segment::Only, kExtAeth, true);
    t[op::kRcAcknowledge] = entry("RC_ACKNOWLEDGE", RC, Acknowledge, Segment::Only, kExtAeth, false);
    t[op::kRcAtomicAcknowledge] = entry("RC_ATOMIC_ACKNOWLEDGE", RC, AtomicAcknowledge, Segment::Only,
                                        kExtAeth | kExtAtomicAckEth, false);
    t[op::kRcCompareSwap] = entry("RC_COMPARE_SWAP", RC, CompareSwap, Segment::Only, kExtAtomicEth, false);
    t[op::kRcFetchAdd] = entry("RC_FETCH_ADD", RC, FetchAdd, Segment::Only, kExtAtomicEth, false);
    t[op::kRcSendLastInv] = entry("RC_SEND_LAST_WITH_INVALIDATE", RC, Send, Segment::Last, kExtIeth, true);
    t[op::kRcSendOnlyInv] = entry("RC_SEND_ONLY_WITH_INVALIDATE", RC, Send, Segment::Only, kExtIeth, true);
    // IBTA 1.5 (rxe's rxe_opcode.c has the same layouts): FLUSH carries FETH then RETH and no
    // payload; ATOMIC WRITE carries a RETH and exactly 8 bytes of payload.
    t[op::kRcFlush] = entry("RC_FLUSH", RC, Flush, Segment::Only, kExtFeth | kExtReth, false);
    t[op::kRcAtomicWrite] = entry("RC_ATOMIC_WRITE", RC, AtomicWrite, Segment::Only, kExtReth, true);

    add_send_write(t, op::kUcBase, UC, kUcNames);

    t[op::kUdSendOnly] = entry("UD_SEND_ONLY", UD, Send, Segment::Only, kExtDeth, true);
    t[op::kUdSendOnlyImm] =
        entry("UD_SEND_ONLY_WITH_IMMEDIATE", UD, Send, Segment::Only, kExtDeth | kExtImmDt, true);

    t[op::kCnp] = entry("CNP", CNP, Cnp, Segment::Only, kExtCnp, false);
    return t;
}

constexpr auto kTable = make_table();

constexpr auto make_valid_list() {
    std::array<uint8_t, 256> list{};
    size_t n = 0;
    for (size_t i = 0; i < kTable.size(); ++i)
        if (kTable[i].valid()) list[n++] = static_cast<uint8_t>(i);
    return std::pair{list, n};
}

constexpr auto kValid = make_valid_list();

static_assert(kTable[op::kRcWriteOnlyImm].header_length == 12 + 16 + 4);
static_assert(kTable[op::kRcAtomicAcknowledge].header_length == 12 + 4 + 8);
static_assert(kTable[op::kUdSendOnlyImm].header_length == 12 + 8 + 4);
static_assert(kTable[op::kCnp].header_length == 12 + 16);
static_assert(kTable[op::kRcFlush].header_length == 12 + 4 + 16);
static_assert(kValid.second == 25 + 12 + 2 + 1);

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) noexcept { return kTable[opcode]; }

const uint8_t* valid_opcodes(size_t* count) noexcept {
    *count = kValid.second;
    return kValid.first.data();
}

std::string_view transport_name(Transport t) noexcept {
    switch (t) {
        case Transport::RC: return "RC";
        case Transport::UC: return "UC";
        case Transport::RD: return "RD";
        case Transport::UD: return "UD";
        case Transport::CNP: return "CNP";
        case Transport::None: break;
    }
    return "NONE";
}

}  // namespace rnic::wire
