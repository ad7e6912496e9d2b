// Management datagrams (IBA vol. 1, 13.4): the 256-byte MAD that GSI QP 1 sends and receives, as a
// 24-byte common header and 232 bytes of class data. Classes interpret the data (cm_messages.hpp);
// this header only frames it. Everything is a plain value: read()/write() use the exact wire
// layout, and the reserved header field is carried so parse -> write gives back the same bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "rnic/wire/expected.hpp"
#include "rnic/wire/parse_error.hpp"

namespace rnic::wire {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHeaderSize = 24;
inline constexpr size_t kMadDataSize = kMadSize - kMadHeaderSize;  // 232
inline constexpr uint8_t kMadBaseVersion = 1;

// Methods of the common MAD header (IBA 13.4.5). Bit 7 marks a response.
enum class MadMethod : uint8_t {
    Get = 0x01,
    Set = 0x02,
    Send = 0x03,
    Trap = 0x05,
    Report = 0x06,
    TrapRepress = 0x07,
    GetResp = 0x81,
    ReportResp = 0x86,
};
inline constexpr uint8_t kMadMethodResponseBit = 0x80;
std::string_view mad_method_name(MadMethod method) noexcept;  // "Send", "GetResp", ...; "unknown"

// Common status bits (IBA 13.4.7, table 110). Bits 2-4 hold the "invalid field" code.
inline constexpr uint16_t kMadStatusBusy = 0x0001;
inline constexpr uint16_t kMadStatusRedirect = 0x0002;
inline constexpr uint16_t kMadStatusBadVersion = 0x0004;             // class version not supported
inline constexpr uint16_t kMadStatusMethodUnsupported = 0x0008;      // method not supported
inline constexpr uint16_t kMadStatusMethodAttrUnsupported = 0x000C;  // method/attribute combination
inline constexpr uint16_t kMadStatusInvalidAttrValue = 0x001C;       // attribute or modifier value

struct MadHeader {
    static constexpr size_t kSize = kMadHeaderSize;
    uint8_t base_version = kMadBaseVersion;
    uint8_t mgmt_class = 0;
    uint8_t class_version = 0;
    MadMethod method = MadMethod::Send;
    uint16_t status = 0;
    uint16_t class_specific = 0;
    uint64_t transaction_id = 0;
    uint16_t attribute_id = 0;
    uint16_t reserved = 0;  // bytes 18-19, carried for bit-exact round trips
    uint32_t attribute_modifier = 0;

    bool is_response() const noexcept { return static_cast<uint8_t>(method) & kMadMethodResponseBit; }
    static MadHeader read(const uint8_t* p) noexcept;  // kSize bytes
    void write(uint8_t* p) const noexcept;

    friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

struct Mad {
    MadHeader header;
    std::array<uint8_t, kMadDataSize> data{};

    static Mad read(const uint8_t* p) noexcept;  // kMadSize bytes, unchecked
    void write(uint8_t* p) const noexcept;       // kMadSize bytes
    std::array<uint8_t, kMadSize> bytes() const noexcept;

    friend bool operator==(const Mad&, const Mad&) = default;
};

// Exactly 256 bytes with base version 1, else BadMadLength or BadMadBaseVersion; offsets are
// relative to the start of `bytes`. Any class is accepted: classes check their own header fields.
Expected<Mad, ParseError> parse_mad(std::span<const uint8_t> bytes);

// What Linux's MAD layer (ib_mad's generate_unmatched_resp) sends when no agent registered the
// class, version and method of a received Get or Set: the request echoed as a GetResp with status
// "unsupported method/attribute combination" (0x000C). The CM registers only the Send method, so
// this is how a Linux host answers a Get(ClassPortInfo) to the CM class. nullopt for any other
// method: Linux drops those silently.
std::optional<Mad> unmatched_method_response(const Mad& request) noexcept;

}  // namespace rnic::wire
