#include "rnic/wire/aeth.hpp"

#include <array>

namespace rnic::wire {
namespace {

// IBA table 45, in nanoseconds.
constexpr std::array<uint64_t, 32> kRnrTimerNs = {
    655'360'000, 10'000,     20'000,     30'000,     40'000,      60'000,      80'000,
    120'000,     160'000,    240'000,    320'000,    480'000,     640'000,     960'000,
    1'280'000,   1'920'000,  2'560'000,  3'840'000,  5'120'000,   7'680'000,   10'240'000,
    15'360'000,  20'480'000, 30'720'000, 40'960'000, 61'440'000,  81'920'000,  122'880'000,
    163'840'000, 245'760'000, 327'680'000, 491'520'000,
};

// IBA table 44.
constexpr std::array<int32_t, 32> kCredits = {
    0,    1,    2,    3,    4,    6,     8,     12,    16,    24,    32,
    48,   64,   96,   128,  192,  256,   384,   512,   768,   1024,  1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, -1,
};

}  // namespace

uint64_t rnr_timer_ns(uint8_t code) noexcept { return kRnrTimerNs[code & 0x1F]; }

uint8_t rnr_timer_code_at_least(uint64_t ns) noexcept {
    // Codes 1..31 ascend; code 0 (the longest) is the fallback past code 31.
    for (uint8_t code = 1; code < 32; ++code)
        if (kRnrTimerNs[code] >= ns) return code;
    return ns <= kRnrTimerNs[0] ? 0 : 31;
}

int32_t credits_from_code(uint8_t code) noexcept { return kCredits[code & 0x1F]; }

uint8_t credit_code_for(uint32_t available) noexcept {
    uint8_t code = 0;
    for (uint8_t c = 0; c < kCreditsInvalid; ++c)
        if (static_cast<uint32_t>(kCredits[c]) <= available) code = c;
    return code;
}

std::string_view ack_type_name(AckType t) noexcept {
    switch (t) {
        case AckType::Ack: return "ACK";
        case AckType::RnrNak: return "RNR_NAK";
        case AckType::Nak: return "NAK";
        case AckType::Reserved: break;
    }
    return "RESERVED";
}

std::string_view nak_code_name(NakCode c) noexcept {
    switch (c) {
        case NakCode::PsnSequenceError: return "PSN_SEQ_ERR";
        case NakCode::InvalidRequest: return "INVALID_REQUEST";
        case NakCode::RemoteAccessError: return "REMOTE_ACCESS_ERR";
        case NakCode::RemoteOperationalError: return "REMOTE_OP_ERR";
        case NakCode::InvalidRdRequest: return "INVALID_RD_REQUEST";
    }
    return "RESERVED";
}

}  // namespace rnic::wire
