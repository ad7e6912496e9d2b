// What holds after a program (cm_actions.hpp, check_cm_after_close): the CM empty once every
// session closed, its counters consistent with the datapath's, Stats agreeing, and a well-behaved
// pair of sessions still connecting.
#include <cstring>
#include <nlohmann/json.hpp>

#include "cm_actions.hpp"
#include "cm_fuzz_support.hpp"
#include "invariant.hpp"
#include "rnic/cm/cm_types.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::host::fuzz {

using abi::CmOp;
using cm::EventType;
using test::SessionReply;
using namespace cmf;

namespace {

uint64_t sum_received(const cm::CmCounters& c) {
    return c.req_received + c.mra_received + c.rej_received + c.rep_received + c.rtu_received + c.dreq_received +
           c.drep_received + c.sidr_req_received + c.sidr_rep_received;
}
uint64_t sum_sent(const cm::CmCounters& c) {
    return c.req_sent + c.mra_sent + c.rej_sent + c.rep_sent + c.rtu_sent + c.dreq_sent + c.drep_sent +
           c.sidr_req_sent + c.sidr_rep_sent;
}

// Every MAD the CM took is counted once as what it was or why it was dropped; every MAD it put
// out (answers, retransmissions) once as sent or dropped; the datapath handed it no MAD it did
// not count, and sent none the CM did not make.
void check_cm_counters(test::ServiceRig& rig) {
    const cm::CmCounters& c = rig.host->cm().counters();
    const auto& d = rig.dp.counters();
    const uint64_t known =
        sum_received(c) + c.class_port_info_answered + c.unsupported_answered + c.keepalive_answers;
    INVARIANT_V(known <= c.mads_received, known, c.mads_received);
    INVARIANT_V(c.mads_received <= known + c.bad_mads + c.unmatched_mads, c.mads_received, known);
    INVARIANT_V(c.duplicates <= c.mads_received, c.duplicates, c.mads_received);
    const uint64_t made =
        sum_sent(c) + c.class_port_info_answered + c.unsupported_answered + c.mads_resent + c.keepalives_sent;
    INVARIANT_V(c.mads_sent + c.outbound_dropped == made, c.mads_sent + c.outbound_dropped, made);
    INVARIANT_V(c.send_timeouts <= c.req_sent + c.rep_sent + c.dreq_sent + c.sidr_req_sent, c.send_timeouts,
                c.req_sent);
    INVARIANT_V(c.established <= c.req_sent + c.req_received, c.established, c.req_sent + c.req_received);
    INVARIANT_V(c.mads_received <= d.gsi_rx && d.gsi_rx <= c.mads_received + d.gsi_bad + d.gsi_no_cm, d.gsi_rx,
                c.mads_received);
    INVARIANT_V(d.gsi_tx <= c.mads_sent, d.gsi_tx, c.mads_sent);
}

void check_cm_empty(test::ServiceRig& rig) {
    const cm::CmService& cm = rig.host->cm();
    // Connections whose ids went while connected finish their disconnect first: each within 16
    // DREQs and a timewait of at most 8 s (kOrphanMaxWaitMs).
    for (int i = 0; i < 200 && cm.id_count() > 0; ++i) rig.turn(1'000'000'000);
    INVARIANT_V(cm.id_count() == 0, cm.id_count(), cm.channel_count());
    INVARIANT_V(cm.channel_count() == 0, cm.channel_count(), cm.id_count());
    INVARIANT(!cm.next_deadline().has_value());
    check_cm_counters(rig);
}

// Stats agrees: no id listed, none counted, no user charged for one.
void check_stats_empty(test::ServiceRig& rig) {
    const auto page = nlohmann::json::parse(rig.host->stats_json(abi::kStatsCmIds, 0), nullptr, false);
    INVARIANT(page.is_object() && page["cm_ids"].is_array());
    INVARIANT_V(page["cm_ids"].empty(), page["cm_ids"].size(), 0);
    const auto doc = nlohmann::json::parse(rig.host->stats_json(), nullptr, false);
    INVARIANT(doc.is_object());
    INVARIANT(doc["objects"]["cm_ids"] == 0 && doc["objects"]["cm_channels"] == 0);
    for (const auto& u : doc["users"]) INVARIANT(u["held"]["cm_ids"] == 0);
}

// A well-behaved application's session on the CM: its channel and the socket it polls.
struct WellBehaved {
    explicit WellBehaved(test::ServiceRig& r) : rig(r), c(r) {
        INVARIANT(c.hello() == 0);
        auto reply = c.call(op_of(CmOp::CreateChannel), nullptr, 0);
        INVARIANT(reply && reply->status() == 0 && reply->fds.size() == 2);
        channel = reply->as<abi::HandleReply>().handle;
        fd = OwnedFd(reply->take_fd(0));
    }
    template <class T>
    SessionReply call(CmOp o, const T& body) {
        auto r = c.call(op_of(o), body);
        INVARIANT_V(r.has_value(), static_cast<int>(o), 0);
        return std::move(*r);
    }
    template <class T>
    void ok(CmOp o, const T& body) {
        const int status = call(o, body).status();
        INVARIANT_V(status == 0, static_cast<int>(o), status);
    }
    uint32_t id() {
        auto r = call(CmOp::CreateId, abi::CmCreateIdRequest{channel, 0x0106, 0, 0});
        INVARIANT_V(r.status() == 0, r.status(), 0);
        return r.as<abi::HandleReply>().handle;
    }
    // The next event, after its byte: the daemon turns until the socket is readable.
    abi::CmEvent event(EventType want, uint32_t id) {
        for (int i = 0; i < 400 && !readable(fd.get()); ++i) rig.turn(100'000);
        INVARIANT_V(readable(fd.get()), static_cast<int>(want), id);
        read_all(fd.get());
        auto r = call(CmOp::GetEvent, abi::HandleRequest{channel, 0});
        INVARIANT_V(r.status() == 0, r.status(), static_cast<int>(want));
        const auto ev = r.as<abi::CmEvent>();
        INVARIANT_V(ev.event == static_cast<uint32_t>(want), ev.event, static_cast<int>(want));
        INVARIANT_V(ev.id == id || want == EventType::ConnectRequest, ev.id, id);
        INVARIANT_V(ev.status == 0, ev.status, ev.event);
        return ev;
    }
    test::ServiceRig& rig;
    test::SessionClient c;
    uint32_t channel = 0;
    OwnedFd fd;
};

void well_behaved_cm(test::ServiceRig& rig) {
    {
        WellBehaved server(rig), client(rig);
        const uint32_t listener = server.id();
        auto bound = server.call(CmOp::BindAddr, abi::CmAddrRequest{listener, 0, make_address(cm::kAfInet, kOwn4, 0)});
        INVARIANT_V(bound.status() == 0, bound.status(), 0);
        const uint16_t port = bound.as<abi::CmQueryReply>().src.port;
        INVARIANT(port != 0);
        server.ok(CmOp::Listen, abi::CmListenRequest{listener, 4});

        const uint32_t active = client.id();
        abi::CmResolveAddrRequest ra{};
        ra.id = active;
        ra.timeout_ms = 1000;
        ra.dst = make_address(cm::kAfInet, kOwn4, port);
        client.ok(CmOp::ResolveAddr, ra);
        client.event(EventType::AddrResolved, active);
        client.ok(CmOp::ResolveRoute, abi::CmTimeoutRequest{active, 1000});
        client.event(EventType::RouteResolved, active);
        abi::CmConnectRequest conn{};
        conn.id = active;
        conn.param.qp_num = 0xABC01;
        conn.param.responder_resources = conn.param.initiator_depth = 1;
        conn.param.retry_count = conn.param.rnr_retry_count = 7;
        conn.param.private_data_len = wire::kRdmaCmReqUserDataSize;
        fill(conn.param.private_data, conn.param.private_data_len, 0x31);
        client.ok(CmOp::Connect, conn);

        const abi::CmEvent req = server.event(EventType::ConnectRequest, 0);
        INVARIANT(req.listen_id == listener && req.param.qp_num == 0xABC01);
        INVARIANT(req.param.private_data_len == wire::kRdmaCmReqUserDataSize &&
                  std::memcmp(req.param.private_data, conn.param.private_data, wire::kRdmaCmReqUserDataSize) == 0);
        abi::CmConnectRequest acc{};
        acc.id = req.id;
        acc.param.qp_num = 0xABC02;
        acc.param.responder_resources = acc.param.initiator_depth = 1;
        server.ok(CmOp::Accept, acc);
        const abi::CmEvent resp = client.event(EventType::ConnectResponse, active);
        INVARIANT(resp.param.qp_num == 0xABC02);
        client.ok(CmOp::Accept, abi::CmConnectRequest{active, 0, {}});
        server.event(EventType::Established, req.id);

        client.ok(CmOp::Disconnect, abi::HandleRequest{active, 0});
        server.event(EventType::Disconnected, req.id);
        server.ok(CmOp::Disconnect, abi::HandleRequest{req.id, 0});
        client.event(EventType::Disconnected, active);
        for (uint32_t id : {active}) client.ok(CmOp::DestroyId, abi::HandleRequest{id, 0});
        for (uint32_t id : {req.id, listener}) server.ok(CmOp::DestroyId, abi::HandleRequest{id, 0});
    }
    for (int i = 0; i < 64 && rig.host->session_count() > 0; ++i) rig.turn(1'000'000);
    INVARIANT_V(rig.host->session_count() == 0, rig.host->session_count(), 0);
}

}  // namespace

void check_cm_after_close(test::ServiceRig& rig, bool deep) {
    check_cm_empty(rig);
    if (deep) check_stats_empty(rig);
    well_behaved_cm(rig);
    check_cm_empty(rig);
}

}  // namespace rnic::host::fuzz
