// CM messages in and out of MADs: the header Linux's cm_format_mad_hdr writes, and the checks a
// received CM MAD must pass before its fields mean anything.
#include <type_traits>

#include "rnic/wire/cm_messages.hpp"

namespace rnic::wire {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

Unexpected<ParseError> fail(ParseErrc code, size_t offset) {
    return Unexpected{ParseError{code, offset}};
}

template <class Message>
CmMessage read_as(const Mad& mad) {
    return Message::read(mad.data.data());
}

}  // namespace

std::string_view cm_attr_name(uint16_t attribute_id) noexcept {
    switch (static_cast<CmAttr>(attribute_id)) {
        case CmAttr::ClassPortInfo:
            return "ClassPortInfo";
        case CmAttr::Req:
            return "REQ";
        case CmAttr::Mra:
            return "MRA";
        case CmAttr::Rej:
            return "REJ";
        case CmAttr::Rep:
            return "REP";
        case CmAttr::Rtu:
            return "RTU";
        case CmAttr::Dreq:
            return "DREQ";
        case CmAttr::Drep:
            return "DREP";
        case CmAttr::SidrReq:
            return "SIDR_REQ";
        case CmAttr::SidrRep:
            return "SIDR_REP";
        case CmAttr::Lap:
            return "LAP";
        case CmAttr::Apr:
            return "APR";
    }
    return "unknown";
}

std::string_view cm_rej_reason_name(CmRejReason reason) noexcept {
    switch (reason) {
        case CmRejReason::NoQp:
            return "no QP";
        case CmRejReason::NoEec:
            return "no EEC";
        case CmRejReason::NoResources:
            return "no resources";
        case CmRejReason::Timeout:
            return "timeout";
        case CmRejReason::Unsupported:
            return "unsupported";
        case CmRejReason::InvalidCommId:
            return "invalid comm ID";
        case CmRejReason::InvalidCommInstance:
            return "invalid comm instance";
        case CmRejReason::InvalidServiceId:
            return "invalid service ID";
        case CmRejReason::InvalidTransportType:
            return "invalid transport type";
        case CmRejReason::StaleConn:
            return "stale conn";
        case CmRejReason::RdcNotExist:
            return "RDC not exist";
        case CmRejReason::InvalidGid:
            return "invalid GID";
        case CmRejReason::InvalidLid:
            return "invalid LID";
        case CmRejReason::InvalidSl:
            return "invalid SL";
        case CmRejReason::InvalidTrafficClass:
            return "invalid traffic class";
        case CmRejReason::InvalidHopLimit:
            return "invalid hop limit";
        case CmRejReason::InvalidPacketRate:
            return "invalid packet rate";
        case CmRejReason::InvalidAltGid:
            return "invalid alt GID";
        case CmRejReason::InvalidAltLid:
            return "invalid alt LID";
        case CmRejReason::InvalidAltSl:
            return "invalid alt SL";
        case CmRejReason::InvalidAltTrafficClass:
            return "invalid alt traffic class";
        case CmRejReason::InvalidAltHopLimit:
            return "invalid alt hop limit";
        case CmRejReason::InvalidAltPacketRate:
            return "invalid alt packet rate";
        case CmRejReason::PortCmRedirect:
            return "port CM redirect";
        case CmRejReason::PortRedirect:
            return "port redirect";
        case CmRejReason::InvalidMtu:
            return "invalid MTU";
        case CmRejReason::InsufficientRespResources:
            return "insufficient resp resources";
        case CmRejReason::ConsumerDefined:
            return "consumer defined";
        case CmRejReason::InvalidRnrRetry:
            return "invalid RNR retry";
        case CmRejReason::DuplicateLocalCommId:
            return "duplicate local comm ID";
        case CmRejReason::InvalidClassVersion:
            return "invalid class version";
        case CmRejReason::InvalidFlowLabel:
            return "invalid flow label";
        case CmRejReason::InvalidAltFlowLabel:
            return "invalid alt flow label";
        case CmRejReason::VendorOptionNotSupported:
            return "vendor option is not supported";
    }
    return "unrecognized reason";
}

CmAttr cm_attr_of(const CmMessage& message) noexcept {
    return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kAttr; }, message);
}

CmCommIds cm_comm_ids(const CmMessage& message) noexcept {
    return std::visit(Overloaded{
                          [](const CmReq& m) {
                              return CmCommIds{m.local_comm_id, 0};
                          },
                          [](const CmSidrReq& m) {
                              return CmCommIds{m.request_id, 0};
                          },
                          [](const CmSidrRep& m) {
                              return CmCommIds{0, m.request_id};
                          },
                          [](const auto& m) {
                              return CmCommIds{m.local_comm_id, m.remote_comm_id};
                          },
                      },
                      message);
}

Mad encode_cm(const CmMessage& message, uint64_t transaction_id, uint32_t attribute_modifier) {
    Mad mad;
    mad.header.base_version = kMadBaseVersion;
    mad.header.mgmt_class = kMgmtClassCm;
    mad.header.class_version = kCmClassVersion;
    mad.header.method = MadMethod::Send;
    mad.header.transaction_id = transaction_id;
    mad.header.attribute_id = static_cast<uint16_t>(cm_attr_of(message));
    mad.header.attribute_modifier = attribute_modifier;
    std::visit([&mad](const auto& m) { m.write(mad.data.data()); }, message);
    return mad;
}

Expected<CmMessage, ParseError> decode_cm(const Mad& mad) {
    const MadHeader& h = mad.header;
    if (h.mgmt_class != kMgmtClassCm) return fail(ParseErrc::WrongMgmtClass, 1);
    if (h.class_version != kCmClassVersion) return fail(ParseErrc::BadClassVersion, 2);
    if (h.method != MadMethod::Send) return fail(ParseErrc::BadCmMethod, 3);
    switch (static_cast<CmAttr>(h.attribute_id)) {
        case CmAttr::Req:
            return read_as<CmReq>(mad);
        case CmAttr::Mra:
            return read_as<CmMra>(mad);
        case CmAttr::Rej: {
            CmRej rej = CmRej::read(mad.data.data());
            if (rej.ari_length > kCmRejAriSize) return fail(ParseErrc::BadCmLength, kMadHeaderSize + 9);
            return CmMessage{rej};
        }
        case CmAttr::Rep:
            return read_as<CmRep>(mad);
        case CmAttr::Rtu:
            return read_as<CmRtu>(mad);
        case CmAttr::Dreq:
            return read_as<CmDreq>(mad);
        case CmAttr::Drep:
            return read_as<CmDrep>(mad);
        case CmAttr::SidrReq:
            return read_as<CmSidrReq>(mad);
        case CmAttr::SidrRep: {
            CmSidrRep rep = CmSidrRep::read(mad.data.data());
            if (rep.info_length > kCmSidrRepInfoSize) return fail(ParseErrc::BadCmLength, kMadHeaderSize + 5);
            return CmMessage{rep};
        }
        case CmAttr::ClassPortInfo:
        case CmAttr::Lap:
        case CmAttr::Apr:
            break;
    }
    return fail(ParseErrc::UnknownCmAttribute, 16);
}

}  // namespace rnic::wire
