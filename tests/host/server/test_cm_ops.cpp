// The CM ops over the control socket, two sessions of one in-process rnicd connecting to each
// other through its own address (the CM's MADs loop back through the datapath): channels whose
// socket has a byte per event, ids owned by their session, Linux's errnos, the per-user cap on
// ids, and a session's end disconnecting its connections as a process's death does.
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "raw_client.hpp"
#include "rnic/cm/cm_types.hpp"
#include "rnic/host/abi/cm.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::CmOp;
using cm::EventType;

namespace {

constexpr abi::Op op(CmOp o) {
    return static_cast<abi::Op>(o);
}

abi::CmAddress self_address(uint16_t port) {
    abi::CmAddress a{};
    a.family = cm::kAfInet;
    a.port = port;
    const auto g = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
    std::memcpy(a.addr, g.raw.data(), 16);
    return a;
}

// One session's CM channel: its socket (the client's end) and handle.
struct CmChannel {
    uint32_t handle = 0;
    int fd = -1;
    ~CmChannel() {
        if (fd >= 0) close(fd);
    }
};

struct CmClient {
    CmClient(Rig& r) : rig(r), c(r.host->socket_path()) { REQUIRE(rig.hello(c).header.status == 0); }
    Rig& rig;
    RawClient c;

    void channel(CmChannel& ch) {
        Reply r = rig.call(c, op(CmOp::CreateChannel), nullptr, 0);
        REQUIRE(r.header.status == 0);
        REQUIRE(r.fds.size() == 2);
        ch.handle = r.as<abi::HandleReply>().handle;
        ch.fd = r.take_fd(0);
    }
    uint32_t id(const CmChannel& ch, uint16_t ps = 0x0106) {
        Reply r = rig.call(c, op(CmOp::CreateId), abi::CmCreateIdRequest{ch.handle, ps, 0, 0});
        REQUIRE(r.header.status == 0);
        return r.as<abi::HandleReply>().handle;
    }
    int status(CmOp o, const auto& body) { return rig.call(c, op(o), body).header.status; }
    // Waits (turning the loop) for the channel's byte, then takes the event.
    abi::CmEvent event(const CmChannel& ch) {
        for (int i = 0; i < 2000; ++i) {
            pollfd p{ch.fd, POLLIN, 0};
            if (poll(&p, 1, 0) == 1) break;
            rig.turn();
        }
        char byte = 0;
        REQUIRE(read(ch.fd, &byte, 1) == 1);
        Reply r = rig.call(c, op(CmOp::GetEvent), abi::HandleRequest{ch.handle, 0});
        REQUIRE(r.header.status == 0);
        REQUIRE(r.body.size() == sizeof(abi::CmEvent));
        return r.as<abi::CmEvent>();
    }
};

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

}  // namespace

TEST_CASE("cm ops: two sessions connect through the daemon's own address, events on channel sockets", "[cm]") {
    Rig rig;
    CmClient server(rig), client(rig);
    CmChannel sch, cch;
    server.channel(sch);
    client.channel(cch);
    const uint32_t listener = server.id(sch);
    Reply bound = rig.call(server.c, op(CmOp::BindAddr), abi::CmAddrRequest{listener, 0, self_address(7174)});
    REQUIRE(bound.header.status == 0);
    CHECK(bound.as<abi::CmQueryReply>().src.port == 7174);
    CHECK(bound.as<abi::CmQueryReply>().state == static_cast<uint8_t>(cm::RdmaState::AddrBound));
    REQUIRE(server.status(CmOp::Listen, abi::CmListenRequest{listener, 8}) == 0);

    const uint32_t cid = client.id(cch);
    // Another session's id is nobody to this one.
    CHECK(server.status(CmOp::Disconnect, abi::HandleRequest{cid, 0}) == ENOENT);
    abi::CmResolveAddrRequest ra{};
    ra.id = cid;
    ra.timeout_ms = 1000;
    ra.dst = self_address(7174);
    REQUIRE(client.status(CmOp::ResolveAddr, ra) == 0);
    CHECK(client.event(cch).event == static_cast<uint32_t>(EventType::AddrResolved));
    REQUIRE(client.status(CmOp::ResolveRoute, abi::CmTimeoutRequest{cid, 1000}) == 0);
    CHECK(client.event(cch).event == static_cast<uint32_t>(EventType::RouteResolved));
    Reply q = rig.call(client.c, op(CmOp::Query), abi::HandleRequest{cid, 0});
    REQUIRE(q.header.status == 0);
    CHECK(q.as<abi::CmQueryReply>().path_count == 1);
    abi::CmConnectRequest conn{};
    conn.id = cid;
    conn.param.qp_num = 0x44;
    conn.param.private_data_len = 3;
    std::memcpy(conn.param.private_data, "hey", 3);
    REQUIRE(client.status(CmOp::Connect, conn) == 0);

    const abi::CmEvent req = server.event(sch);
    CHECK(req.event == static_cast<uint32_t>(EventType::ConnectRequest));
    CHECK(req.listen_id == listener);
    CHECK(std::memcmp(req.param.private_data, "hey", 3) == 0);
    Reply attr = rig.call(server.c, op(CmOp::InitQpAttr), abi::CmInitQpAttrRequest{req.id, 2});
    REQUIRE(attr.header.status == 0);
    CHECK(attr.as<abi::CmInitQpAttrReply>().attr.dest_qp_num == 0x44);
    abi::CmConnectRequest acc{};
    acc.id = req.id;
    acc.param.qp_num = 0x55;
    REQUIRE(server.status(CmOp::Accept, acc) == 0);
    const abi::CmEvent resp = client.event(cch);
    CHECK(resp.event == static_cast<uint32_t>(EventType::ConnectResponse));
    CHECK(resp.param.qp_num == 0x55);
    abi::CmConnectRequest rtu{};
    rtu.id = cid;
    REQUIRE(client.status(CmOp::Accept, rtu) == 0);
    CHECK(server.event(sch).event == static_cast<uint32_t>(EventType::Established));

    // No byte, no event.
    CHECK_FALSE(readable(cch.fd));
    CHECK(client.status(CmOp::GetEvent, abi::HandleRequest{cch.handle, 0}) == EAGAIN);
    CHECK(client.status(CmOp::GetEvent, abi::HandleRequest{sch.handle, 0}) == ENOENT);
    CHECK(client.status(CmOp::DestroyChannel, abi::HandleRequest{cch.handle, 0}) == EBUSY);
    CHECK(client.status(CmOp::JoinMulticast, abi::CmJoinRequest{cid, 0, {}}) == ENOSYS);
    CHECK(client.status(CmOp::JoinMulticast, abi::CmJoinRequest{cid + 999, 0, {}}) == ENOENT);
    CHECK(client.status(CmOp::LeaveMulticast, abi::CmLeaveRequest{cid, 0, {}}) == ENOENT);

    const auto listed = nlohmann::json::parse(rig.host->stats_json(abi::kStatsCmIds, 0));
    REQUIRE(listed["cm_ids"].size() == 3);
    CHECK(listed["cm_ids"][0]["state"] == "LISTEN");
    CHECK(listed["cm_ids"][1]["state"] == "CONNECT");
    CHECK(listed["cm_ids"][1]["ib_state"] == "ESTABLISHED");
    CHECK(listed["cm_ids"][1]["port_space"] == "TCP");
    CHECK(listed["cm_ids"][1]["qp_type"] == "RC");
    CHECK(listed["cm_ids"][1]["dst"].get<std::string>().starts_with("10.77.0.1:"));
    CHECK(nlohmann::json::parse(rig.host->stats_json())["objects"]["cm_ids"] == 3);
    const auto stats = nlohmann::json::parse(rig.host->stats_json())["counters"];
    CHECK(stats["cm_req_sent"] == 1);
    CHECK(stats["cm_rtu_received"] == 1);
    CHECK(stats["gsi_rx"] == 3);

    // The client's session ends: its connection's DREQ reaches the server.
    client.c.close_now();
    const abi::CmEvent gone = server.event(sch);
    CHECK(gone.event == static_cast<uint32_t>(EventType::Disconnected));
    CHECK(gone.id == req.id);
    Reply destroyed = rig.call(server.c, op(CmOp::DestroyId), abi::HandleRequest{req.id, 0});
    REQUIRE(destroyed.header.status == 0);
    CHECK(destroyed.as<abi::CmDestroyIdReply>().events_reported == 2);  // ESTABLISHED, DISCONNECTED
}

TEST_CASE("cm ops: ids count against their user's cm_ids cap", "[cm]") {
    Rig rig([](server::ServerConfig& c) { c.user_limits_default[server::Resource::CmIds] = 2; });
    CmClient app(rig);
    CmChannel ch;
    app.channel(ch);
    const uint32_t a = app.id(ch);
    app.id(ch);
    CHECK(app.status(CmOp::CreateId, abi::CmCreateIdRequest{ch.handle, 0x0106, 0, 0}) == EAGAIN);
    Reply d = rig.call(app.c, op(CmOp::DestroyId), abi::HandleRequest{a, 0});
    REQUIRE(d.header.status == 0);
    CHECK(app.status(CmOp::CreateId, abi::CmCreateIdRequest{ch.handle, 0x0106, 0, 0}) == 0);
    const auto users = nlohmann::json::parse(rig.host->stats_json())["users"];
    CHECK(users[0]["held"]["cm_ids"] == 2);
}
