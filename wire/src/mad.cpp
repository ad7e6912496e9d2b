#include "rnic/wire/mad.hpp"

#include <cstring>

#include "rnic/wire/byte_order.hpp"

namespace rnic::wire {

std::string_view mad_method_name(MadMethod method) noexcept {
    switch (method) {
        case MadMethod::Get:
            return "Get";
        case MadMethod::Set:
            return "Set";
        case MadMethod::Send:
            return "Send";
        case MadMethod::Trap:
            return "Trap";
        case MadMethod::Report:
            return "Report";
        case MadMethod::TrapRepress:
            return "TrapRepress";
        case MadMethod::GetResp:
            return "GetResp";
        case MadMethod::ReportResp:
            return "ReportResp";
    }
    return "unknown";
}

MadHeader MadHeader::read(const uint8_t* p) noexcept {
    MadHeader h;
    h.base_version = p[0];
    h.mgmt_class = p[1];
    h.class_version = p[2];
    h.method = static_cast<MadMethod>(p[3]);
    h.status = load_be16(p + 4);
    h.class_specific = load_be16(p + 6);
    h.transaction_id = load_be64(p + 8);
    h.attribute_id = load_be16(p + 16);
    h.reserved = load_be16(p + 18);
    h.attribute_modifier = load_be32(p + 20);
    return h;
}

void MadHeader::write(uint8_t* p) const noexcept {
    p[0] = base_version;
    p[1] = mgmt_class;
    p[2] = class_version;
    p[3] = static_cast<uint8_t>(method);
    store_be16(p + 4, status);
    store_be16(p + 6, class_specific);
    store_be64(p + 8, transaction_id);
    store_be16(p + 16, attribute_id);
    store_be16(p + 18, reserved);
    store_be32(p + 20, attribute_modifier);
}

Mad Mad::read(const uint8_t* p) noexcept {
    Mad m;
    m.header = MadHeader::read(p);
    std::memcpy(m.data.data(), p + kMadHeaderSize, kMadDataSize);
    return m;
}

void Mad::write(uint8_t* p) const noexcept {
    header.write(p);
    std::memcpy(p + kMadHeaderSize, data.data(), kMadDataSize);
}

std::array<uint8_t, kMadSize> Mad::bytes() const noexcept {
    std::array<uint8_t, kMadSize> out;
    write(out.data());
    return out;
}

Expected<Mad, ParseError> parse_mad(std::span<const uint8_t> bytes) {
    if (bytes.size() != kMadSize) {
        return Unexpected{ParseError{ParseErrc::BadMadLength, bytes.size() < kMadSize ? bytes.size() : kMadSize}};
    }
    if (bytes[0] != kMadBaseVersion) return Unexpected{ParseError{ParseErrc::BadMadBaseVersion, 0}};
    return Mad::read(bytes.data());
}

std::optional<Mad> unmatched_method_response(const Mad& request) noexcept {
    if (request.header.method != MadMethod::Get && request.header.method != MadMethod::Set) return std::nullopt;
    Mad response = request;
    response.header.method = MadMethod::GetResp;
    response.header.status = kMadStatusMethodAttrUnsupported;
    return response;
}

}  // namespace rnic::wire
