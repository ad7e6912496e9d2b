// Two connection managers wired back to back in simulated time: A at 10.0.0.1 (and fd00::1,
// fe80::1), B at 10.0.0.2 (fd00::2, fe80::2). MADs each puts in its outbound queue reach the other
// as frames would (the link may drop every n-th one, or all), every MAD is kept for inspection,
// and time only moves when a test moves it.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rnic/cm/cm_service.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace cmtest {

namespace abi = rnic::host::abi;
using rnic::cm::CmService;
using rnic::cm::EventType;
using rnic::cm::IbState;
using rnic::cm::RdmaState;
using rnic::wire::Gid;

inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint16_t kTcp = 0x0106;
inline constexpr uint16_t kUdp = 0x0111;
inline constexpr uint16_t kIb = 0x013F;

inline Gid gid(const char* text) {
    return *Gid::parse(text);
}

inline abi::CmAddress addr(const char* ip, uint16_t port, uint32_t scope = 0) {
    abi::CmAddress a{};
    const Gid g = gid(ip);
    a.family = g.is_ipv4_mapped() ? rnic::cm::kAfInet : rnic::cm::kAfInet6;
    a.port = port;
    a.scope_id = scope;
    std::memcpy(a.addr, g.raw.data(), 16);
    return a;
}

inline Gid addr_gid(const abi::CmAddress& a) {
    Gid g;
    std::memcpy(g.raw.data(), a.addr, 16);
    return g;
}

struct Hooks : rnic::cm::CmHooks {
    void event_queued(uint32_t channel) override { ++wakeups[channel]; }
    int admit_id(uint32_t owner) override {
        if (ids[owner] >= limit) return EMFILE;
        ++ids[owner];
        return 0;
    }
    void id_released(uint32_t owner) override { --ids[owner]; }
    bool privileged(uint32_t owner) override { return owner == 0; }
    std::map<uint32_t, uint32_t> wakeups;
    std::map<uint32_t, uint32_t> ids;
    uint32_t limit = 1u << 30;
};

// A MAD as it went over the link: who sent it, the decoded message (if it is a CM Send).
struct Sent {
    char from = 'A';
    rnic::cm::OutboundMad mad;
    bool dropped = false;
    std::optional<rnic::wire::CmMessage> msg() const {
        const auto m = rnic::wire::decode_cm(mad.mad);
        if (!m) return std::nullopt;
        return *m;
    }
    uint16_t attr() const { return mad.mad.header.attribute_id; }
};

// Peer liveness probes (keepalive_idle_ms/probe_ms/probes); off unless a test asks: the other
// tests count MADs and silence links as Linux's CM, which has none.
struct Keepalive {
    uint32_t idle_ms = 0, probe_ms = 0, probes = 0;
};

struct Side {
    Side(const char* side_name, const char* v4, const char* v6, const char* ll, uint64_t guid, uint64_t seed,
         std::function<rnic::cm::Resolution(const Gid&, uint64_t, rnic::wire::MacAddr&)> resolver,
         Keepalive keepalive)
        : name(side_name) {
        rnic::cm::CmConfig c;
        c.keepalive_idle_ms = keepalive.idle_ms;
        c.keepalive_probe_ms = keepalive.probe_ms;
        c.keepalive_probes = keepalive.probes;
        c.node_guid = guid;
        c.local_ca_ack_delay = 15;
        c.active_mtu = 3;
        c.addresses = {{gid(v4), 24}, {gid(ll), 64}, {gid(v6), 64}};
        c.seed = seed;
        svc = std::make_unique<CmService>(c, std::move(resolver), &hooks);
    }
    const char* name;
    Hooks hooks;
    std::unique_ptr<CmService> svc;
};

class Link {
public:
    explicit Link(Keepalive keepalive = {})
        : a("A", "10.0.0.1", "fd00::1", "fe80::1", 0x0200'00FF'FE00'0001ull, 11, resolver_for('A'), keepalive),
          b("B", "10.0.0.2", "fd00::2", "fe80::2", 0x0200'00FF'FE00'0002ull, 22, resolver_for('B'), keepalive) {}

    Side a, b;
    uint64_t now = 1'000 * kMs;
    uint32_t drop_every = 0;  // drop every n-th MAD (0: none)
    bool drop_all = false;
    std::function<bool(const Sent&)> drop_if;  // more drops, chosen by the test
    std::vector<Sent> log;
    // Neighbours: known unless listed here.
    std::map<std::string, rnic::cm::Resolution> neighbours;
    uint32_t delivered = 0;
    uint32_t misaddressed = 0;

    // Moves every queued MAD to the other side until both queues are empty.
    void pump() {
        for (int round = 0; round < 1000; ++round) {
            bool any = false;
            any |= drain(a, b, 'A');
            any |= drain(b, a, 'B');
            if (!any) return;
        }
        FAIL("MADs still flowing after 1000 rounds");
    }
    // Lets `ms` of simulated time pass, firing timers on both sides at their deadlines.
    void run_for(uint64_t ms) {
        const uint64_t end = now + ms * kMs;
        pump();
        for (;;) {
            std::optional<uint64_t> next;
            for (Side* s : {&a, &b})
                if (const auto d = s->svc->next_deadline(); d && (!next || *d < *next)) next = d;
            if (!next || *next > end) break;
            now = std::max(now, *next);
            a.svc->advance(now);
            b.svc->advance(now);
            pump();
        }
        now = end;
        a.svc->advance(now);
        b.svc->advance(now);
        pump();
    }
    std::vector<Sent> sent(char from, rnic::wire::CmAttr attr) const {
        std::vector<Sent> out;
        for (const Sent& s : log)
            if (s.from == from && s.attr() == static_cast<uint16_t>(attr)) out.push_back(s);
        return out;
    }
    size_t count(char from, rnic::wire::CmAttr attr) const { return sent(from, attr).size(); }

private:
    std::function<rnic::cm::Resolution(const Gid&, uint64_t, rnic::wire::MacAddr&)> resolver_for(char) {
        return [this](const Gid& g, uint64_t, rnic::wire::MacAddr& mac) {
            const auto it = neighbours.find(g.to_ip_string());
            const auto r = it == neighbours.end() ? rnic::cm::Resolution::Resolved : it->second;
            if (r == rnic::cm::Resolution::Resolved) mac = {0x02, 0, 0, 0, 0, g.raw[15]};
            return r;
        };
    }
    bool drain(Side& from, Side& to, char name) {
        bool any = false;
        while (from.svc->has_outbound()) {
            any = true;
            Sent s{name, from.svc->front_outbound()};
            from.svc->pop_outbound();
            ++delivered;
            s.dropped = drop_all || (drop_every && delivered % drop_every == 0) || (drop_if && drop_if(s));
            log.push_back(s);
            if (s.dropped) continue;
            const rnic::cm::MadRoute& r = s.mad.route;
            // Only what is addressed to the other side's addresses arrives there.
            bool ours = false;
            for (const char* ip :
                 {to.name[0] == 'A' ? "10.0.0.1" : "10.0.0.2", to.name[0] == 'A' ? "fd00::1" : "fd00::2",
                  to.name[0] == 'A' ? "fe80::1" : "fe80::2"})
                ours |= r.remote_gid == gid(ip);
            if (!ours || r.remote_qpn != 1) {
                ++misaddressed;
                continue;
            }
            rnic::cm::MadRoute in;
            in.local_gid = r.remote_gid;
            in.remote_gid = r.local_gid;
            in.remote_qpn = 1;
            in.traffic_class = r.traffic_class;
            in.hop_limit = r.hop_limit;
            in.flow_label = r.flow_label;
            const auto bytes = s.mad.mad.bytes();
            to.svc->receive(in, bytes, now);
        }
        return any;
    }
};

// One application on a side: an owner with a channel, and helpers that call the service as the
// library would.
struct App {
    App(Side& s, uint32_t owner_) : side(s), owner(owner_) { REQUIRE(side.svc->create_channel(owner, channel) == 0); }
    Side& side;
    uint32_t owner;
    uint32_t channel = 0;

    CmService& svc() { return *side.svc; }
    uint32_t create(uint16_t ps = kTcp, uint32_t qp_type = 0) {
        uint32_t id = 0;
        abi::CmCreateIdRequest r{channel, ps, qp_type, 0};
        REQUIRE(svc().create_id(owner, r, id) == 0);
        return id;
    }
    std::optional<abi::CmEvent> event() {
        abi::CmEvent ev{};
        if (svc().get_event(owner, channel, ev) != 0) return std::nullopt;
        return ev;
    }
    abi::CmEvent expect(EventType type, int32_t status = 0) {
        auto ev = event();
        REQUIRE(ev.has_value());
        INFO("got " << rnic::cm::event_name(static_cast<EventType>(ev->event)) << " status " << ev->status);
        REQUIRE(ev->event == static_cast<uint32_t>(type));
        REQUIRE(ev->status == status);
        return *ev;
    }
    void expect_none() {
        auto ev = event();
        INFO("unexpected " << (ev ? rnic::cm::event_name(static_cast<EventType>(ev->event)) : ""));
        REQUIRE(!ev);
    }
    int resolve(uint32_t id, const abi::CmAddress& dst, uint64_t now, uint32_t timeout_ms = 2000,
                abi::CmAddress src = {}) {
        abi::CmResolveAddrRequest r{};
        r.id = id;
        r.timeout_ms = timeout_ms;
        r.src = src;
        r.dst = dst;
        return svc().resolve_addr(owner, r, now);
    }
    abi::CmQueryReply query(uint32_t id) {
        abi::CmQueryReply q{};
        REQUIRE(svc().query(owner, id, q) == 0);
        return q;
    }
    abi::CmInitQpAttrReply qp_attr(uint32_t id, uint32_t state) {
        abi::CmInitQpAttrReply r{};
        REQUIRE(svc().init_qp_attr(owner, id, state, r) == 0);
        return r;
    }
    uint32_t destroy(uint32_t id, uint64_t now) {
        uint32_t reported = 0;
        REQUIRE(svc().destroy_id(owner, id, now, reported) == 0);
        return reported;
    }
};

inline abi::CmConnParam conn_param(uint32_t qpn, const std::string& pd = "", uint8_t res = 1, uint8_t depth = 1) {
    abi::CmConnParam p{};
    p.qp_num = qpn;
    p.responder_resources = res;
    p.initiator_depth = depth;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    p.private_data_len = static_cast<uint32_t>(pd.size());
    std::memcpy(p.private_data, pd.data(), pd.size());
    return p;
}

// A listener on B and a client on A, connected and established; the ids on both sides.
struct Connected {
    uint32_t listener = 0, server = 0, client = 0;
};

inline uint32_t listen_on(App& app, const abi::CmAddress& where, uint32_t backlog = 16, uint16_t ps = kTcp,
                          uint32_t qp_type = 0) {
    const uint32_t l = app.create(ps, qp_type);
    REQUIRE(app.svc().bind_addr(app.owner, l, where) == 0);
    REQUIRE(app.svc().listen(app.owner, l, backlog) == 0);
    return l;
}

// Resolves and sends the REQ (or SIDR_REQ); the CONNECT_REQUEST is B's to take.
inline uint32_t start_connect(Link& link, App& client, const abi::CmAddress& dst, const abi::CmConnParam& p,
                              uint16_t ps = kTcp, uint32_t qp_type = 0) {
    const uint32_t c = client.create(ps, qp_type);
    REQUIRE(client.resolve(c, dst, link.now) == 0);
    client.expect(EventType::AddrResolved);
    REQUIRE(client.svc().resolve_route(client.owner, c, 2000, link.now) == 0);
    client.expect(EventType::RouteResolved);
    REQUIRE(client.svc().connect(client.owner, c, p, link.now) == 0);
    link.pump();
    return c;
}

inline Connected connect_pair(Link& link, App& client, App& server, uint16_t port = 7174,
                              const char* server_ip = "10.0.0.2", uint32_t client_qpn = 0x11,
                              uint32_t server_qpn = 0x22) {
    Connected c;
    c.listener = listen_on(server, addr(server_ip, port));
    c.client = start_connect(link, client, addr(server_ip, port), conn_param(client_qpn, "hello"));
    const auto req = server.expect(EventType::ConnectRequest);
    c.server = req.id;
    REQUIRE(server.svc().accept(server.owner, c.server, conn_param(server_qpn, "welcome"), link.now) == 0);
    link.pump();
    client.expect(EventType::ConnectResponse);
    REQUIRE(client.svc().accept(client.owner, c.client, conn_param(0), link.now) == 0);
    link.pump();
    server.expect(EventType::Established);
    return c;
}

}  // namespace cmtest
