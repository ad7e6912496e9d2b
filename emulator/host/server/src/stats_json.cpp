// The Stats op's reply: one JSON document rnicctl prints (schema in docs/host_interface.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "service_impl.hpp"

namespace rnic::host::server {
namespace {

namespace tp = rnic::transport;

std::string mac_text(const wire::MacAddr& m) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return buf;
}

std::string_view short_name(std::string_view name, std::string_view prefix) {
    return name.substr(0, prefix.size()) == prefix ? name.substr(prefix.size()) : name;
}

// Every segment a session keeps mapped: those it still names and those only its MRs hold after
// ReleaseSegment, each once.
void add_mapped_segments(const Session& s, std::set<const Segment*>& out) {
    for (const auto& [id, seg] : s.segments) out.insert(seg.get());
    for (const auto& [lkey, mr] : s.mrs)
        for (const auto& seg : mr.segments) out.insert(seg.get());
}

}  // namespace

std::string HostService::Impl::stats_json() const {
    using nlohmann::json;
    json doc;
    const tp::PortAttributes port = engine.query_port();
    json gids = json::array();
    for (size_t i = 0; i < engine.gids().size(); ++i)
        gids.push_back({{"index", i}, {"gid", engine.gids()[i].to_string()}, {"type", "RoCE v2"}});
    doc["device"] = {
        {"name", config.name},
        {"pid", daemon_pid},
        {"mac", mac_text(config.mac)},
        {"ipv4", wire::ipv4_to_string(config.ipv4) + "/" + std::to_string(config.prefix_length)},
        {"ipv6", config.ipv6},
        {"port_state", port.active ? "ACTIVE" : "DOWN"},
        {"active_mtu", tp::mtu_bytes(port.active_mtu)},
        {"max_mtu", tp::mtu_bytes(port.max_mtu)},
        {"ethernet_mtu", config.ethernet_mtu},
        {"link_speed_mbps", config.link_speed_mbps},
        {"gids", gids},
        {"socket", path},
    };

    json counters_doc = json::object();
    for (const auto& [name, v] : engine.device_counters().list()) counters_doc[std::string(name)] = v;
    for (const auto& [name, v] : engine.total_qp_counters().list()) counters_doc[std::string(name)] = v;
    const ServiceCounters& c = counters;
    const std::pair<const char*, uint64_t> own[] = {
        {"host_sessions_opened", c.sessions_opened},
        {"host_sessions_closed", c.sessions_closed},
        {"host_sessions_refused", c.sessions_refused},
        {"host_control_messages", c.control_messages},
        {"host_control_errors", c.control_errors},
        {"host_deferred_replies", c.deferred_replies},
        {"host_wqes_posted", c.wqes_posted},
        {"host_wqes_rejected", c.wqes_rejected},
        {"host_wqes_engine_full", c.wqes_engine_full},
        {"host_cqes_delivered", c.cqes_delivered},
        {"host_cqes_dropped", c.cqes_dropped},
        {"host_cqes_overrun", c.cqes_overrun},
        {"host_cq_events", c.cq_events},
        {"host_async_events", c.async_events},
        {"host_async_events_dropped", c.async_events_dropped},
        {"host_corrupt_rings", c.corrupt_rings},
        {"host_kicks", c.kicks},
        {"host_naps", c.naps},
    };
    for (const auto& [name, v] : own) counters_doc[name] = v;
    if (extra_counters)
        for (const auto& [name, v] : extra_counters()) counters_doc[name] = v;
    doc["counters"] = counters_doc;

    json caches = json::object();
    for (const auto& [name, v] : engine.cache_counters()) caches[std::string(name)] = v;
    doc["caches"] = caches;

    json sessions_doc = json::array();
    std::set<const Segment*> all_segments;
    size_t channels = 0;
    for (const auto& [id, s] : sessions) {
        std::set<const Segment*> mapped;
        add_mapped_segments(*s, mapped);
        all_segments.insert(mapped.begin(), mapped.end());
        channels += s->channels.size();
        sessions_doc.push_back({{"id", s->id},
                                {"pid", s->pid},
                                {"uid", s->uid},
                                {"pds", s->pds.size()},
                                {"mrs", s->mrs.size()},
                                {"cqs", s->cqs.size()},
                                {"qps", s->qps.size()},
                                {"srqs", s->srqs.size()},
                                {"ahs", s->ahs.size()},
                                {"channels", s->channels.size()},
                                {"segments", mapped.size()}});
    }
    doc["sessions"] = sessions_doc;
    // What the device holds right now, counted by the engine itself rather than summed over the
    // sessions: an object a reclaimed session failed to free still shows here.
    doc["objects"] = {
        {"sessions", sessions.size()}, {"pds", engine.pd_count()}, {"mrs", engine.mr_count()},
        {"cqs", engine.cq_count()},    {"qps", engine.qp_count()}, {"srqs", engine.srq_count()},
        {"ahs", engine.ah_count()},    {"channels", channels},     {"segments", all_segments.size()},
    };

    json qps_doc = json::array();
    std::vector<uint32_t> qpns;  // listed in QPN order, as `rdma resource show qp` does
    qpns.reserve(qps.size());
    for (const auto& entry : qps) qpns.push_back(entry.first);
    std::sort(qpns.begin(), qpns.end());
    for (const uint32_t qpn : qpns) {
        const HostQp* qp = qps.at(qpn).get();
        tp::QpAttributes a{};
        const auto seq = engine.qp_sequence(qpn);
        if (engine.query_qp(qpn, a) != 0 || !seq) continue;
        json qc = json::object();
        if (const tp::QpCounters* pc = engine.qp_counters(qpn))
            for (const auto& [name, v] : pc->list()) qc[std::string(name)] = v;
        qps_doc.push_back({{"qpn", qpn},
                           {"type", short_name(tp::qp_type_name(qp->type), "IBV_QPT_")},
                           {"state", short_name(tp::qp_state_name(a.qp_state), "IBV_QPS_")},
                           {"session", qp->owner->id},
                           {"pid", qp->owner->pid},
                           {"sq_psn", a.sq_psn},  // query_qp's are the live ones
                           {"sq_una_psn", seq->unacked_psn},
                           {"rq_psn", a.rq_psn},
                           {"dest_qpn", a.dest_qp_num},
                           {"path_mtu", tp::mtu_bytes(a.path_mtu)},
                           {"counters", qc}});
    }
    doc["qps"] = qps_doc;
    doc["log_level"] = std::string(spdlog::level::to_string_view(spdlog::get_level()).data(),
                                   spdlog::level::to_string_view(spdlog::get_level()).size());
    return doc.dump();
}

}  // namespace rnic::host::server
