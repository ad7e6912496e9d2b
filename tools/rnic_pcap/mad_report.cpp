#include "mad_report.hpp"

#include <cinttypes>
#include <cstdio>

#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::tools {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

std::string hex(uint64_t v, int width) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, width, v);
    return buf;
}

bool is_decoded_cm_attr(uint16_t attr) {
    return attr >= static_cast<uint16_t>(wire::CmAttr::Req) && attr <= static_cast<uint16_t>(wire::CmAttr::SidrRep);
}

std::optional<uint64_t> service_id_of(const wire::CmMessage& m) {
    if (const auto* req = std::get_if<wire::CmReq>(&m)) return req->service_id;
    if (const auto* sreq = std::get_if<wire::CmSidrReq>(&m)) return sreq->service_id;
    if (const auto* srep = std::get_if<wire::CmSidrRep>(&m)) return srep->service_id;
    return std::nullopt;
}

// The rdma_cm header of REQ and SIDR_REQ private data, when the service ID is an IP port space's.
std::optional<wire::RdmaCmIpHeader> rdma_cm_header_of(const wire::CmMessage& m) {
    std::span<const uint8_t> pd;
    if (const auto* req = std::get_if<wire::CmReq>(&m)) pd = req->private_data;
    if (const auto* sreq = std::get_if<wire::CmSidrReq>(&m)) pd = sreq->private_data;
    const auto sid = service_id_of(m);
    if (pd.empty() || !sid) return std::nullopt;
    const auto svc = wire::parse_rdma_cm_service_id(*sid);
    if (!svc || svc->port_space == wire::RdmaPortSpace::Ib) return std::nullopt;
    auto h = wire::parse_rdma_cm_ip_header(pd);
    if (!h) return std::nullopt;
    return *h;
}

std::string ip_text(const wire::Gid& g, uint8_t ip_version) {
    return ip_version == 4 ? g.to_ip_string() : "[" + g.to_ip_string() + "]";
}

// A few fields per message beyond the IDs: what a reader of a CM exchange looks for first.
std::string message_details(const wire::CmMessage& m) {
    return std::visit(Overloaded{
                          [](const wire::CmReq& r) {
                              return " qpn=" + hex(r.local_qpn, 6) + " start_psn=" + std::to_string(r.starting_psn) +
                                     " mtu=" + std::to_string(r.path_mtu) + " retry=" + std::to_string(r.retry_count) +
                                     " rnr_retry=" + std::to_string(r.rnr_retry_count);
                          },
                          [](const wire::CmRep& r) {
                              return " qpn=" + hex(r.local_qpn, 6) + " start_psn=" + std::to_string(r.starting_psn);
                          },
                          [](const wire::CmRej& r) {
                              return " reason=" + std::to_string(static_cast<unsigned>(r.reason)) + " (" +
                                     std::string(wire::cm_rej_reason_name(r.reason)) + ")";
                          },
                          [](const wire::CmMra& r) {
                              return " mraed=" + std::to_string(static_cast<unsigned>(r.message_mraed)) +
                                     " timeout=" + std::to_string(r.service_timeout);
                          },
                          [](const wire::CmDreq& r) { return " remote_qpn=" + hex(r.remote_qpn_eecn, 6); },
                          [](const wire::CmSidrRep& r) {
                              return " status=" + std::to_string(static_cast<unsigned>(r.status)) +
                                     " qpn=" + hex(r.qpn, 6) + " qkey=" + hex(r.qkey, 8);
                          },
                          [](const auto&) { return std::string(); },
                      },
                      m);
}

nlohmann::json message_json(const wire::CmMessage& m) {
    return std::visit(
        Overloaded{
            [](const wire::CmReq& r) {
                return nlohmann::json{{"local_qpn", r.local_qpn},
                                      {"starting_psn", r.starting_psn},
                                      {"path_mtu", r.path_mtu},
                                      {"retry_count", r.retry_count},
                                      {"rnr_retry_count", r.rnr_retry_count},
                                      {"responder_resources", r.responder_resources},
                                      {"initiator_depth", r.initiator_depth},
                                      {"flow_label", r.primary_path.flow_label},
                                      {"hop_limit", r.primary_path.hop_limit},
                                      {"traffic_class", r.primary_path.traffic_class}};
            },
            [](const wire::CmRep& r) {
                return nlohmann::json{{"local_qpn", r.local_qpn},
                                      {"starting_psn", r.starting_psn},
                                      {"responder_resources", r.responder_resources},
                                      {"initiator_depth", r.initiator_depth},
                                      {"rnr_retry_count", r.rnr_retry_count}};
            },
            [](const wire::CmRej& r) {
                return nlohmann::json{{"reason", static_cast<unsigned>(r.reason)},
                                      {"reason_name", wire::cm_rej_reason_name(r.reason)},
                                      {"message_rejected", static_cast<unsigned>(r.message_rejected)},
                                      {"ari_length", r.ari_length}};
            },
            [](const wire::CmMra& r) {
                return nlohmann::json{{"message_mraed", static_cast<unsigned>(r.message_mraed)},
                                      {"service_timeout", r.service_timeout}};
            },
            [](const wire::CmDreq& r) {
                return nlohmann::json{{"remote_qpn", r.remote_qpn_eecn}};
            },
            [](const wire::CmSidrRep& r) {
                return nlohmann::json{{"status", static_cast<unsigned>(r.status)}, {"qpn", r.qpn}, {"qkey", r.qkey}};
            },
            [](const auto&) { return nlohmann::json::object(); },
        },
        m);
}

}  // namespace

wire::Expected<GsiReport, wire::ParseError> check_gsi(const wire::RoceFrame& frame) {
    auto mad = wire::gsi_mad(frame);
    if (!mad) return wire::Unexpected{mad.error()};
    GsiReport report{*mad, std::nullopt};
    const wire::MadHeader& h = mad->header;
    if (h.mgmt_class == wire::kMgmtClassCm && is_decoded_cm_attr(h.attribute_id)) {
        auto cm = wire::decode_cm(*mad);
        if (!cm) {
            const size_t mad_offset = frame.bth_offset + frame.info->header_length;
            return wire::Unexpected{wire::ParseError{cm.error().code, mad_offset + cm.error().offset}};
        }
        report.cm = std::move(*cm);
    }
    return report;
}

std::string gsi_histogram_key(const GsiReport& r) {
    const wire::MadHeader& h = r.mad.header;
    if (h.mgmt_class == wire::kMgmtClassCm) return "CM " + std::string(wire::cm_attr_name(h.attribute_id));
    return "MAD class " + hex(h.mgmt_class, 2) + " attr " + hex(h.attribute_id, 4);
}

std::string describe_gsi(const GsiReport& r) {
    const wire::MadHeader& h = r.mad.header;
    std::string s = gsi_histogram_key(r);
    if (h.method != wire::MadMethod::Send) s += " " + std::string(wire::mad_method_name(h.method));
    s += " tid=" + hex(h.transaction_id, 16);
    if (h.status != 0) s += " status=" + hex(h.status, 4);
    if (!r.cm) return s;
    const wire::CmCommIds ids = wire::cm_comm_ids(*r.cm);
    s += " comm=" + hex(ids.local, 8) + "->" + hex(ids.remote, 8);
    if (const auto sid = service_id_of(*r.cm)) {
        s += " sid=" + hex(*sid, 16);
        if (const auto svc = wire::parse_rdma_cm_service_id(*sid))
            s +=
                " (" + std::string(wire::rdma_port_space_name(svc->port_space)) + ":" + std::to_string(svc->port) + ")";
    }
    if (const auto ip = rdma_cm_header_of(*r.cm))
        s += " from " + ip_text(ip->src_addr, ip->ip_version) + ":" + std::to_string(ip->src_port) + " to " +
             ip_text(ip->dst_addr, ip->ip_version);
    return s + message_details(*r.cm);
}

nlohmann::json gsi_to_json(const GsiReport& r) {
    const wire::MadHeader& h = r.mad.header;
    nlohmann::json j{
        {"base_version", h.base_version},
        {"mgmt_class", h.mgmt_class},
        {"class_version", h.class_version},
        {"method", static_cast<unsigned>(h.method)},
        {"method_name", wire::mad_method_name(h.method)},
        {"status", h.status},
        {"transaction_id", h.transaction_id},
        {"attribute_id", h.attribute_id},
        {"attribute_modifier", h.attribute_modifier},
    };
    if (h.mgmt_class == wire::kMgmtClassCm) j["attribute"] = wire::cm_attr_name(h.attribute_id);
    if (!r.cm) return j;
    const wire::CmCommIds ids = wire::cm_comm_ids(*r.cm);
    nlohmann::json cm = message_json(*r.cm);
    cm["local_comm_id"] = ids.local;
    cm["remote_comm_id"] = ids.remote;
    if (const auto sid = service_id_of(*r.cm)) {
        cm["service_id"] = *sid;
        if (const auto svc = wire::parse_rdma_cm_service_id(*sid)) {
            cm["port_space"] = wire::rdma_port_space_name(svc->port_space);
            cm["port"] = svc->port;
        }
    }
    if (const auto ip = rdma_cm_header_of(*r.cm))
        cm["rdma_cm"] = {{"ip_version", ip->ip_version},
                         {"src", ip->src_addr.to_ip_string()},
                         {"dst", ip->dst_addr.to_ip_string()},
                         {"src_port", ip->src_port}};
    j["cm"] = std::move(cm);
    return j;
}

}  // namespace rnic::tools
