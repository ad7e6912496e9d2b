// The Stats op's reply: one JSON document rnicctl prints (schema in docs/host_interface.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/wire/rdma_cm_header.hpp"
#include "process_memory.hpp"
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

std::string HostService::Impl::stats_json(std::optional<uint32_t> viewer, uint32_t what, uint32_t first_qpn) const {
    using nlohmann::json;
    json doc = json::object();
    if (what & abi::kStatsDevice) device_part(doc, viewer);
    if (what & abi::kStatsQps) qp_page(doc, viewer, first_qpn);
    if (what & abi::kStatsCmIds) cm_page(doc, viewer, first_qpn);
    return doc.dump();
}

// A user sees their own sessions and QPs (as `rdma resource` shows an unprivileged user only their
// own processes' objects); the device's counters and object totals are everyone's. nullopt: all.
bool HostService::Impl::sees(std::optional<uint32_t> viewer, uint32_t uid) const {
    return !viewer || *viewer == 0 || *viewer == daemon_uid || uid == *viewer;
}

void HostService::Impl::device_part(nlohmann::json& doc, std::optional<uint32_t> viewer) const {
    using nlohmann::json;
    const bool all = sees(viewer, UINT32_MAX);
    auto visible = [&](uint32_t uid) { return sees(viewer, uid); };
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

    // DCQCN's knobs by their mlx5 names (rnicctl cc, docs/congestion.md).
    json congestion = json::object();
    for (const auto& info : cc::dcqcn_param_table())
        congestion[std::string(info.name)] = cc::get_param(engine.congestion_params(), info);
    congestion["port_rate_mbps"] = engine.config().port_rate_mbps;
    // PFC/PAUSE received (docs/congestion.md): each DSCP's priority (rnicd --dscp-prio, index =
    // DSCP), and each priority's pause end on the engine's clock (0: never paused). Apart from
    // "congestion", whose entries are all knobs.
    json paused = json::array();
    for (uint8_t p = 0; p < 8; ++p) paused.push_back(engine.priority_paused_until(p));
    doc["pfc"] = {{"dscp_priority", engine.config().dscp_priority}, {"paused_until_ns", paused}};
    doc["congestion"] = congestion;

    json counters_doc = json::object();
    for (const auto& [name, v] : engine.device_counters().list()) counters_doc[std::string(name)] = v;
    for (const auto& [name, v] : engine.total_qp_counters().list()) counters_doc[std::string(name)] = v;
    // Why keys and accesses were refused, by kind; *_access_fault are accesses to pages a client
    // took away (its file shrunk under the daemon's mapping). mw_*: memory windows in use, binds.
    // odp_*: accesses to on-demand regions served through their owners' address spaces, their
    // bytes, and those that failed. mr_reregistrations: ibv_rereg_mr that succeeded.
    for (const auto& [name, v] : engine.memory().counters())
        if (name.starts_with("local_access_") || name.starts_with("remote_access_") || name.starts_with("mw_") ||
            name.starts_with("odp_") || name == "mr_reregistrations")
            counters_doc[std::string(name)] = v;
    const ServiceCounters& c = counters;
    const std::pair<const char*, uint64_t> own[] = {
        {"host_sessions_opened", c.sessions_opened},
        {"host_sessions_closed", c.sessions_closed},
        {"host_sessions_refused", c.sessions_refused},
        {"host_user_limit_refusals", c.user_limit_refusals},
        {"host_memlock_refusals", c.memlock_refusals},
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
    // The ODP workers (process_memory.hpp): the daemon's, over all its devices.
    const OdpWorkerTotals odp = odp_worker_totals();
    counters_doc["host_odp_workers"] = odp.workers_alive;
    counters_doc["host_odp_workers_stuck"] = odp.workers_stuck;
    counters_doc["host_odp_copies"] = odp.copies;
    counters_doc["host_odp_wait_timeouts"] = odp.waits_timed_out;
    counters_doc["host_odp_busy_pending"] = odp.busy_pending;
    counters_doc["host_odp_budget_pending"] = odp.budget_pending;
    if (extra_counters)
        for (const auto& [name, v] : extra_counters()) counters_doc[name] = v;
    doc["counters"] = counters_doc;
    latency_part(doc);

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
        if (!visible(s->uid)) continue;
        uint64_t pinned_pages = 0;
        for (const auto& [lkey, mr] : s->mrs) pinned_pages += mr.pinned_pages;
        const auto unsealed =
            std::count_if(mapped.begin(), mapped.end(), [](const Segment* seg) { return !seg->memory.sealed(); });
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
                                {"segments", mapped.size()},
                                {"pinned_pages", pinned_pages},
                                {"segments_unsealed", unsealed}});
    }
    doc["sessions"] = sessions_doc;
    // What each uid holds against its caps ("max": none but the device's).
    auto limit_json = [](uint32_t v) { return v == kUnlimited ? json("max") : json(v); };
    json users_doc = json::array();
    auto add_user = [&](uint32_t uid, const UserUsage* usage) {
        json held = json::object(), max = json::object();
        const UserLimits& l = limits_of(uid);
        for (size_t i = 0; i < kResourceCount; ++i) {
            held[std::string(kResourceNames[i])] = usage ? usage->held[i] : 0;
            max[std::string(kResourceNames[i])] = limit_json(l.max[i]);
        }
        users_doc.push_back({{"uid", uid}, {"held", held}, {"max", max}});
    };
    for (const auto& [uid, usage] : users)
        if (visible(uid)) add_user(uid, &usage);
    if (!all && !users.count(*viewer)) add_user(*viewer, nullptr);
    doc["users"] = users_doc;
    // What the device holds right now, counted by the engine itself rather than summed over the
    // sessions: an object a reclaimed session failed to free still shows here.
    doc["objects"] = {
        {"sessions", sessions.size()},        {"pds", engine.pd_count()},
        {"mrs", engine.mr_count()},           {"cqs", engine.cq_count()},
        {"qps", engine.qp_count()},           {"srqs", engine.srq_count()},
        {"ahs", engine.ah_count()},           {"channels", channels},
        {"segments", all_segments.size()},    {"cm_ids", cm->id_count()},
        {"cm_channels", cm->channel_count()},
    };

    doc["log_level"] = std::string(spdlog::level::to_string_view(spdlog::get_level()).data(),
                                   spdlog::level::to_string_view(spdlog::get_level()).size());
}

void HostService::Impl::qp_page(nlohmann::json& doc, std::optional<uint32_t> viewer, uint32_t first_qpn) const {
    using nlohmann::json;
    // Only the QPs that fit are built: the reply is one message, and the poll loop that builds it
    // serves every other client meanwhile.
    std::vector<uint32_t> qpns;  // listed in QPN order, as `rdma resource show qp` does
    qpns.reserve(qps.size());
    for (const auto& entry : qps)
        if (entry.first >= first_qpn) qpns.push_back(entry.first);
    std::sort(qpns.begin(), qpns.end());
    // What the rest of the document, "qps":[] and "next_qpn" take.
    constexpr size_t kPageFrame = 48;
    size_t used = doc.dump().size() + kPageFrame;
    json qps_doc = json::array();
    for (const uint32_t qpn : qpns) {
        const HostQp* qp = qps.at(qpn).get();
        tp::QpAttributes a{};
        const auto seq = engine.qp_sequence(qpn);
        if (!sees(viewer, qp->owner->uid) || engine.query_qp(qpn, a) != 0 || !seq) continue;
        json qc = json::object();
        if (const tp::QpCounters* pc = engine.qp_counters(qpn))
            for (const auto& [name, v] : pc->list()) qc[std::string(name)] = v;
        json entry = {{"qpn", qpn},
                      {"type", short_name(tp::qp_type_name(qp->type), "IBV_QPT_")},
                      {"state", short_name(tp::qp_state_name(a.qp_state), "IBV_QPS_")},
                      {"session", qp->owner->id},
                      {"pid", qp->owner->pid},
                      {"uid", qp->owner->uid},
                      {"sq_psn", a.sq_psn},  // query_qp's are the live ones
                      {"sq_una_psn", seq->unacked_psn},
                      {"rq_psn", a.rq_psn},
                      {"dest_qpn", a.dest_qp_num},
                      {"path_mtu", tp::mtu_bytes(a.path_mtu)},
                      {"counters", qc}};
        if (const auto cc = engine.qp_congestion(qpn))
            entry["cc"] = {{"limited", cc->limited},         {"rate_mbps", cc->rate_kbps / 1000},
                           {"target_mbps", cc->target_kbps / 1000}, {"alpha", cc->alpha},
                           {"cnps_received", cc->cnps},       {"rate_cuts", cc->cuts},
                           {"cnps_sent", cc->cnps_sent}};
        const size_t bytes = entry.dump().size() + 1;  // and its comma
        if (used + bytes > abi::kMaxMessage - sizeof(abi::MessageHeader)) {
            doc["next_qpn"] = qpn;
            break;
        }
        used += bytes;
        qps_doc.push_back(std::move(entry));
    }
    doc["qps"] = std::move(qps_doc);
}

void HostService::Impl::cm_page(nlohmann::json& doc, std::optional<uint32_t> viewer, uint32_t first_id) const {
    using nlohmann::json;
    auto address = [](const abi::CmAddress& a) -> std::string {
        if (a.family == 0) return "-";
        wire::Gid g;
        std::memcpy(g.raw.data(), a.addr, 16);
        const std::string ip = g.to_ip_string();
        return (a.family == cm::kAfInet6 ? "[" + ip + "]" : ip) + ":" + std::to_string(a.port);
    };
    constexpr size_t kPageFrame = 48;
    size_t used = doc.dump().size() + kPageFrame;
    json ids = json::array();
    for (const cm::IdInfo& i : cm->ids()) {  // in id order
        if (i.id < first_id) continue;
        const auto owner = sessions.find(i.owner);
        const uint32_t uid = owner != sessions.end() ? owner->second->uid : UINT32_MAX;
        if (!sees(viewer, uid)) continue;
        json entry = {{"id", i.id},
                      {"session", i.owner},
                      {"pid", owner != sessions.end() ? owner->second->pid : 0},
                      {"uid", uid},
                      {"channel", i.channel},
                      {"port_space", wire::rdma_port_space_name(static_cast<wire::RdmaPortSpace>(i.port_space))},
                      {"qp_type", short_name(tp::qp_type_name(static_cast<tp::QpType>(i.qp_type)), "IBV_QPT_")},
                      {"state", short_name(cm::rdma_state_name(i.state), "RDMA_CM_")},
                      {"ib_state", short_name(cm::ib_state_name(i.ib_state), "IB_CM_")},
                      {"src", address(i.src)},
                      {"dst", address(i.dst)},
                      {"local_comm_id", i.local_comm_id},
                      {"remote_comm_id", i.remote_comm_id},
                      {"qpn", i.qpn},
                      {"remote_qpn", i.remote_qpn}};
        const size_t bytes = entry.dump().size() + 1;
        if (used + bytes > abi::kMaxMessage - sizeof(abi::MessageHeader)) {
            doc["next_cm_id"] = i.id;
            break;
        }
        used += bytes;
        ids.push_back(std::move(entry));
    }
    doc["cm_ids"] = std::move(ids);
}

}  // namespace rnic::host::server
