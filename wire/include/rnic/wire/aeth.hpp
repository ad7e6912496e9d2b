// AETH syndrome encoding (IBA 9.7.5.1, tables 43-45): ACK with end-to-end credits, RNR NAK
// with a timer code, NAK with an error code.
#pragma once

#include <cstdint>
#include <string_view>

namespace rnic::wire {

enum class AckType : uint8_t { Ack = 0, RnrNak = 1, Reserved = 2, Nak = 3 };

enum class NakCode : uint8_t {
    PsnSequenceError = 0,
    InvalidRequest = 1,
    RemoteAccessError = 2,
    RemoteOperationalError = 3,
    InvalidRdRequest = 4,
};

// Credit code 31 means "no credit information" (rxe and most HCAs send it: unlimited).
inline constexpr uint8_t kCreditsInvalid = 31;

struct AethSyndrome {
    AckType type = AckType::Ack;
    uint8_t value = kCreditsInvalid;  // credit code, RNR timer code or NakCode, 5 bits

    constexpr uint8_t encode() const noexcept {
        return static_cast<uint8_t>((static_cast<uint8_t>(type) << 5) | (value & 0x1F));
    }
    static constexpr AethSyndrome decode(uint8_t syndrome) noexcept {
        return {static_cast<AckType>((syndrome >> 5) & 0x3), static_cast<uint8_t>(syndrome & 0x1F)};
    }
    // Bit 7 of the syndrome is reserved and must be zero.
    static constexpr bool reserved_bit_clear(uint8_t syndrome) noexcept {
        return (syndrome & 0x80) == 0;
    }

    static constexpr AethSyndrome ack(uint8_t credit_code = kCreditsInvalid) noexcept {
        return {AckType::Ack, credit_code};
    }
    static constexpr AethSyndrome rnr_nak(uint8_t timer_code) noexcept {
        return {AckType::RnrNak, timer_code};
    }
    static constexpr AethSyndrome nak(NakCode code) noexcept {
        return {AckType::Nak, static_cast<uint8_t>(code)};
    }
    constexpr NakCode nak_code() const noexcept { return static_cast<NakCode>(value); }
};

// RNR NAK timer code (5 bits) -> minimum wait in nanoseconds (table 45; code 0 is 655.36 ms).
uint64_t rnr_timer_ns(uint8_t code) noexcept;
// Smallest code whose wait is at least `ns` (31 when nothing is long enough).
uint8_t rnr_timer_code_at_least(uint64_t ns) noexcept;

// Credit code -> number of receive WQEs it stands for (table 44); -1 for code 31 (invalid).
int32_t credits_from_code(uint8_t code) noexcept;
// Largest code whose credit count does not exceed `available` (at most 30).
uint8_t credit_code_for(uint32_t available) noexcept;

std::string_view ack_type_name(AckType t) noexcept;
std::string_view nak_code_name(NakCode c) noexcept;

}  // namespace rnic::wire
