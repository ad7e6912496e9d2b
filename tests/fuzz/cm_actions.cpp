// The client side of the CM actions (cm_actions.hpp): selectors, the ops and their replies, the
// compound flows, the clock, the channel sockets.
#include "cm_actions.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cm_fuzz_support.hpp"
#include "invariant.hpp"
#include "rnic/cm/cm_types.hpp"
#include "rnic/wire/gsi_frame.hpp"

namespace rnic::host::fuzz {

using abi::CmOp;
using cm::EventType;
using test::SessionReply;
using namespace cmf;

namespace {

constexpr int kReplyTurns = 8;
constexpr size_t kMaxHeld = 48;  // ids and channels remembered per session (the daemon may hold more)

template <class T>
void keep(std::vector<T>& v, T x) {
    if (v.size() < kMaxHeld) v.push_back(std::move(x));
}

}  // namespace

CmFuzzer::CmFuzzer(ProgramReader& program, test::ServiceRig& rig, CmSessions& sessions)
    : p_(program), rig_(rig), sessions_(sessions) {}

std::vector<cm::IdInfo> CmFuzzer::live() const {
    return rig_.host->cm().ids();
}

CmParty CmFuzzer::session() {
    const uint8_t b = p_.u8();
    if (sessions_.count() == 0) return {};
    CmParty s = sessions_.party(b % sessions_.count());
    if (s.client && s.client->connected()) used_ = true;
    return s;
}

// ---------------------------------------------------------------------------------------------
// Selectors

uint32_t CmFuzzer::pick_id(const CmParty& s) {
    const uint8_t b = p_.u8();
    if (b >= kPickLive) {
        const uint8_t i = p_.u8();
        const auto ids = live();
        return ids.empty() ? 0 : ids[i % ids.size()].id;
    }
    if (b >= kPickRaw) return p_.u32();
    if (b >= kPickOther) {
        const uint8_t si = p_.u8(), oi = p_.u8();
        if (sessions_.count() == 0) return 0;
        const CmParty o = sessions_.party(si % sessions_.count());
        return !o.held || o.held->ids.empty() ? 0 : o.held->ids[oi % o.held->ids.size()];
    }
    return !s.held || s.held->ids.empty() ? 0 : s.held->ids[b % s.held->ids.size()];
}

uint32_t CmFuzzer::pick_channel(const CmParty& s) {
    const uint8_t b = p_.u8();
    if (b >= kPickRaw) return p_.u32();
    if (b >= kPickOther) {
        const uint8_t si = p_.u8(), oi = p_.u8();
        if (sessions_.count() == 0) return 0;
        const CmParty o = sessions_.party(si % sessions_.count());
        return !o.held || o.held->channels.empty() ? 0 : o.held->channels[oi % o.held->channels.size()].handle;
    }
    return !s.held || s.held->channels.empty() ? 0 : s.held->channels[b % s.held->channels.size()].handle;
}

uint32_t CmFuzzer::pick_qpn(const CmParty& s) {
    const uint8_t b = p_.u8();
    if (b >= kPickRaw) return p_.u32();
    return s.qps.empty() ? b : s.qps[b % s.qps.size()].qpn;
}

// The device's own addresses (each family, link-local with and without a scope, an IPv4-mapped
// IPv6 one), the peer (which answers ARP once Inject sent its reply; ND never), the wildcards,
// loopback, a silent neighbour, an off-link host, no family, or anything.
abi::CmAddress CmFuzzer::address() {
    const uint8_t kind = p_.u8();
    abi::CmAddress a{};
    switch (kind % 14) {
        case 0:
            a = make_address(cm::kAfInet, kOwn4, 0);
            break;
        case 1:
            a = make_address(cm::kAfInet6, kOwn6, 0);
            break;
        case 2:
            a = make_address(cm::kAfInet6, kOwnLinkLocal, 0);
            a.scope_id = kind >> 4;
            break;
        case 3:
            a = make_address(cm::kAfInet, kPeer4, 0);
            break;
        case 4:
            a = make_address(cm::kAfInet6, kind & 0x80 ? kPeerLinkLocal : kPeer6, 0);
            a.scope_id = 1;
            break;
        case 5:
            a = make_address(cm::kAfInet, wire::Gid::from_ipv4(0), 0);
            break;
        case 6:
            a = make_address(cm::kAfInet6, wire::Gid{}, 0);
            break;
        case 7:
            a = make_address(cm::kAfInet, wire::Gid::from_ipv4(0x7F000001), 0);
            break;
        case 8:
            a = make_address(cm::kAfInet, wire::Gid::from_ipv4(kSilentIp), 0);
            break;
        case 9:
            a = make_address(cm::kAfInet, wire::Gid::from_ipv4(kOffLinkIp), 0);
            break;
        case 10: {
            wire::Gid loopback;
            loopback.raw[15] = 1;
            a = make_address(cm::kAfInet6, loopback, 0);
            break;
        }
        case 11:
            break;  // family 0
        case 12:
            a = make_address(cm::kAfInet6, kOwn4, 0);  // ::ffff:10.77.0.1 as an IPv6 address
            break;
        default:
            a.family = p_.u16();
            for (auto& b : a.addr) b = p_.u8();
            a.scope_id = p_.u32();
            break;
    }
    a.port = port();
    return a;
}

uint16_t CmFuzzer::port() {
    static constexpr uint16_t kPorts[] = {0, 7174, 7175, 20079, 1023, 80, 65535, 32768};
    const uint8_t b = p_.u8();
    if (b < 0x80) return kPorts[b % std::size(kPorts)];
    if (b < 0xC0) {
        const auto ids = live();
        return ids.empty() ? 0 : ids[b % ids.size()].src.port;
    }
    return p_.u16();
}

uint32_t CmFuzzer::port_space() {
    static constexpr uint32_t kSpaces[] = {0x0106, 0x0111, 0x013F, 0x0002};
    const uint8_t b = p_.u8();
    return b < kPickRaw ? kSpaces[b % std::size(kSpaces)] : p_.u32();
}

uint32_t CmFuzzer::qp_type() {
    const uint8_t b = p_.u8();
    return b < kPickRaw ? cm::verbs::kQptRc + b % 3 : p_.u32();
}

uint32_t CmFuzzer::timeout() {
    static constexpr uint32_t kMs[] = {0, 100, 1000, 2000};
    const uint8_t b = p_.u8();
    return b % 5 < 4 ? kMs[b % 5] : p_.u32();
}

uint32_t CmFuzzer::backlog() {
    static constexpr uint32_t kBacklogs[] = {0, 1, 2, 4, 16, 1024, 1025};
    const uint8_t b = p_.u8();
    return b < kPickRaw ? kBacklogs[b % std::size(kBacklogs)] : p_.u32();
}

// Every length at which a message's private data ends, one past it, and past the ABI's 256.
uint32_t CmFuzzer::private_length() {
    static constexpr uint32_t kLengths[] = {0,   1,   56,  57,  92,  136, 137, 148, 149,
                                            180, 181, 196, 197, 216, 222, 224, 256, 257};
    const uint8_t b = p_.u8();
    return b < kPickRaw ? kLengths[b % std::size(kLengths)] : p_.u32();
}

abi::CmConnParam CmFuzzer::conn_param(const CmParty& s) {
    abi::CmConnParam c{};
    c.private_data_len = private_length();
    fill(c.private_data, std::min<size_t>(c.private_data_len, abi::kCmPrivateDataMax), p_.u8());
    c.qp_num = pick_qpn(s);
    const uint8_t q = p_.u8();
    static constexpr uint32_t kQkeys[] = {0, cm::verbs::kRdmaUdpQkey, wire::kGsiQkey};
    c.qkey = q % 4 < 3 ? kQkeys[q % 4] : p_.u32();
    c.responder_resources = p_.u8();
    c.initiator_depth = p_.u8();
    const uint8_t flags = p_.u8();
    c.flow_control = flags & 1;
    c.srq = (flags >> 1) & 1;
    c.retry_count = p_.u8();
    c.rnr_retry_count = p_.u8();
    return c;
}

CmFuzzer::Reactions CmFuzzer::reactions(const CmParty& s) {
    Reactions r;
    r.count = static_cast<uint8_t>(1 + p_.u8() % 8);
    for (auto& w : r.what) w = p_.u8();
    r.param = conn_param(s);
    r.reject_length = private_length();
    r.reject_seed = p_.u8();
    return r;
}

// ---------------------------------------------------------------------------------------------
// Calls and what their replies say

int CmFuzzer::call(const CmParty& s, CmOp op, const void* body, size_t length, SessionReply* out) {
    if (!s.client) return test::kNoReply;
    auto r = s.client->call(op_of(op), body, length, {}, kReplyTurns);
    if (!r) {
        // Served later (behind a request waiting for a neighbour), its reply unread: what it made
        // is unknown.
        s.held->raw = true;
        return test::kNoReply;
    }
    const int status = r->status();
    track(s, op, *r);
    if (out) *out = std::move(*r);
    return status;
}

void CmFuzzer::track(const CmParty& s, CmOp op, SessionReply& r) {
    if (r.status() != 0) return;
    switch (op) {
        case CmOp::CreateChannel: {
            INVARIANT_V(r.fds.size() == 2, r.fds.size(), 0);
            CmChannelEnds ch;
            ch.handle = r.as<abi::HandleReply>().handle;
            ch.client = OwnedFd(r.take_fd(0));
            ch.daemon = OwnedFd(r.take_fd(1));
            // A new channel has nothing queued and its socket nothing to read.
            INVARIANT(!readable(ch.client.get()));
            keep(s.held->channels, std::move(ch));
            break;
        }
        case CmOp::CreateId:
            keep(s.held->ids, r.as<abi::HandleReply>().handle);
            s.held->told.insert(r.as<abi::HandleReply>().handle);
            break;
        case CmOp::GetEvent: {
            INVARIANT_V(r.body.size() == sizeof(abi::CmEvent), r.body.size(), 0);
            const auto ev = r.as<abi::CmEvent>();
            check_event(s, ev);
            if (ev.event == static_cast<uint32_t>(EventType::ConnectRequest)) {
                keep(s.held->ids, ev.id);
                s.held->told.insert(ev.id);
            }
            break;
        }
        case CmOp::BindAddr:
        case CmOp::Query:
            INVARIANT_V(r.body.size() == sizeof(abi::CmQueryReply), r.body.size(), static_cast<int>(op));
            break;
        default:
            break;
    }
}

void CmFuzzer::check_event(const CmParty& s, const abi::CmEvent& ev) {
    TRACE("  cm event %u status %d id %#x listen %#x\n", ev.event, ev.status, ev.id, ev.listen_id);
    INVARIANT_V(ev.event <= static_cast<uint32_t>(EventType::TimewaitExit), ev.event, ev.id);
    const auto ids = live();
    auto owner_of = [&ids](uint32_t h) -> long {
        for (const cm::IdInfo& i : ids)
            if (i.id == h) return i.owner;
        return -1;
    };
    // An event names an id of the session that takes it, never one that is gone or another's.
    // (A session that said Hello in a raw message never heard its id: any live owner then.)
    const long me = s.client->session_id ? static_cast<long>(s.client->session_id) : owner_of(ev.id);
    INVARIANT_V(owner_of(ev.id) == me && me >= 0, ev.id, ev.event);
    const bool request = ev.event == static_cast<uint32_t>(EventType::ConnectRequest);
    if (request)
        INVARIANT_V(owner_of(ev.listen_id) == me, ev.listen_id, owner_of(ev.listen_id));
    else
        INVARIANT_V(ev.listen_id == 0, ev.listen_id, ev.event);
    // A connection request's id is new to the session, and nothing is said of it before its
    // CONNECT_REQUEST.
    if (!s.held->raw) {
        if (request) INVARIANT_V(s.held->told.count(ev.listen_id) && !s.held->told.count(ev.id), ev.id, ev.listen_id);
        if (!request) INVARIANT_V(s.held->told.count(ev.id), ev.id, ev.event);
    }
}

// ---------------------------------------------------------------------------------------------
// CmControl: one op, fields from the program

void CmFuzzer::control() {
    const CmParty s = session();
    const uint8_t which = p_.u8() % 23;
    if (which == 22) return stats_page(s);
    const auto op = static_cast<CmOp>(abi::kCmOpFirst + which);
    std::vector<uint8_t> body;
    auto put = [&body](const auto& v) {
        const auto* b = reinterpret_cast<const uint8_t*>(&v);
        body.insert(body.end(), b, b + sizeof v);
    };
    switch (op) {
        case CmOp::CreateChannel:
            break;
        case CmOp::DestroyChannel:
        case CmOp::GetEvent:
            put(abi::HandleRequest{pick_channel(s), 0});
            break;
        case CmOp::CreateId: {
            const uint32_t ch = pick_channel(s);
            const uint32_t ps = port_space();
            put(abi::CmCreateIdRequest{ch, ps, qp_type(), 0});
            break;
        }
        case CmOp::DestroyId:
        case CmOp::Query:
        case CmOp::Disconnect:
        case CmOp::Establish:
            put(abi::HandleRequest{pick_id(s), 0});
            break;
        case CmOp::MigrateId: {
            const uint32_t id = pick_id(s);
            put(abi::CmMigrateIdRequest{id, pick_channel(s)});
            break;
        }
        case CmOp::BindAddr: {
            const uint32_t id = pick_id(s);
            put(abi::CmAddrRequest{id, 0, address()});
            break;
        }
        case CmOp::ResolveAddr: {
            abi::CmResolveAddrRequest req{};
            req.id = pick_id(s);
            req.timeout_ms = timeout();
            req.src = address();
            req.dst = address();
            put(req);
            break;
        }
        case CmOp::ResolveRoute: {
            const uint32_t id = pick_id(s);
            put(abi::CmTimeoutRequest{id, timeout()});
            break;
        }
        case CmOp::Listen: {
            const uint32_t id = pick_id(s);
            put(abi::CmListenRequest{id, backlog()});
            break;
        }
        case CmOp::Connect:
        case CmOp::Accept: {
            abi::CmConnectRequest req{};
            req.id = pick_id(s);
            req.param = conn_param(s);
            put(req);
            break;
        }
        case CmOp::Reject: {
            abi::CmRejectRequest req{};
            req.id = pick_id(s);
            const uint8_t reason = p_.u8();
            static constexpr uint32_t kReasons[] = {0, 28, 35, 8};
            req.reason = reason % 5 < 4 ? kReasons[reason % 5] : p_.u32();
            req.private_data_len = private_length();
            fill(req.private_data, std::min<size_t>(req.private_data_len, abi::kCmPrivateDataMax), p_.u8());
            put(req);
            break;
        }
        case CmOp::InitQpAttr: {
            const uint32_t id = pick_id(s);
            const uint8_t state = p_.u8();
            put(abi::CmInitQpAttrRequest{id, state < kPickRaw ? state % 6u : p_.u32()});
            break;
        }
        case CmOp::Notify: {
            const uint32_t id = pick_id(s);
            static constexpr uint32_t kEvents[] = {cm::verbs::kEventCommEst, cm::verbs::kEventPathMig, 0};
            const uint8_t e = p_.u8();
            put(abi::CmNotifyRequest{id, e % 4 < 3 ? kEvents[e % 4] : p_.u32()});
            break;
        }
        case CmOp::SetOption: {
            abi::CmSetOptionRequest req{};
            req.id = pick_id(s);
            const uint8_t level = p_.u8();
            req.level = level % 3 < 2 ? level % 3u : p_.u32();
            const uint8_t name = p_.u8();
            req.optname = name % 6 < 5 ? name % 6u : p_.u32();
            static constexpr uint32_t kValues[] = {0, 1, 18, 19, 31, 255, 256};
            const uint8_t value = p_.u8();
            req.value = value % 8 < 7 ? kValues[value % 8] : p_.u32();
            put(req);
            break;
        }
        case CmOp::JoinMulticast: {
            abi::CmJoinRequest req{};
            req.id = pick_id(s);
            req.join_flags = p_.u8();
            req.group = address();
            put(req);
            break;
        }
        case CmOp::LeaveMulticast: {
            abi::CmLeaveRequest req{};
            req.id = pick_id(s);
            req.group = address();
            put(req);
            break;
        }
        default:  // past the last CM op
            put(p_.u64());
            break;
    }
    const uint8_t shape = p_.u8();
    if (shape >= 0xF8)
        body.resize(body.size() + 1 + (shape & 7) * 8);
    else if (shape >= 0xF0)
        body.resize(body.size() - std::min<size_t>(body.size(), 1 + (shape & 7)));
    if (!s.client) return;
    const int rc = call(s, op, body.data(), body.size());
    TRACE("cm control session %u op %u (%zu bytes): %d\n", s.client->session_id, static_cast<unsigned>(op), body.size(),
          rc);
}

// Stats' page of CM ids (rnicctl cm) from the first id, a live id or any number, alone or with
// the rest of Stats: valid JSON listing live ids in order from there (a parse costs 10-20 ms
// under ASan: rare enough here).
void CmFuzzer::stats_page(const CmParty& s) {
    const uint8_t what = p_.u8();
    const uint8_t from = p_.u8();
    const auto ids = live();
    const uint32_t first = from < 0x80 ? 0 : from < kPickRaw && !ids.empty() ? ids[from % ids.size()].id : p_.u32();
    if (!s.client) return;
    const abi::StatsRequest req{abi::kStatsCmIds | (what & abi::kStatsAll), first};
    auto r = s.client->call(abi::Op::Stats, req, {}, kReplyTurns);
    if (!r) {
        s.held->raw = true;
        return;
    }
    TRACE("cm stats page from %#x: %d (%zu bytes)\n", first, r->status(), r->body.size());
    if (r->status() != 0) return;
    const auto doc = nlohmann::json::parse(r->body.begin(), r->body.end(), nullptr, false);
    INVARIANT(doc.is_object() && doc["cm_ids"].is_array());
    // Listed ids lived when the page was made: before the call, after it, or made in between
    // (handles only grow), as requests that arrived while the daemon turned.
    const auto after = live();
    auto held = [](const std::vector<cm::IdInfo>& l, uint32_t id) {
        return std::any_of(l.begin(), l.end(), [id](const cm::IdInfo& i) { return i.id == id; });
    };
    const uint32_t newest = ids.empty() ? 0 : ids.back().id;
    uint32_t last = 0;
    for (const auto& e : doc["cm_ids"]) {
        const uint32_t id = e["id"].get<uint32_t>();
        INVARIANT_V(id >= first && id > last, id, last);
        last = id;
        INVARIANT_V(held(ids, id) || held(after, id) || id > newest, id, newest);
    }
}

// ---------------------------------------------------------------------------------------------
// Compound flows

uint32_t CmFuzzer::own_channel(const CmParty& s, uint8_t which) {
    if (which != 0xFF && !s.held->channels.empty()) return s.held->channels[which % s.held->channels.size()].handle;
    SessionReply r;
    if (call(s, CmOp::CreateChannel, nullptr, 0, &r) != 0) return 0;
    return r.as<abi::HandleReply>().handle;
}

uint32_t CmFuzzer::create_id(const CmParty& s, uint32_t channel, uint32_t ps, uint32_t type) {
    SessionReply r;
    if (call(s, CmOp::CreateId, abi::CmCreateIdRequest{channel, ps, type, 0}, &r) != 0) return 0;
    return r.as<abi::HandleReply>().handle;
}

void CmFuzzer::listen() {
    const CmParty s = session();
    const uint8_t which = p_.u8();
    const uint32_t ps = port_space();
    const uint32_t type = qp_type();
    const uint8_t options = p_.u8();
    const abi::CmAddress addr = address();
    const uint32_t backlog_value = backlog();
    if (!s.client || !s.client->connected()) return;
    const uint32_t ch = own_channel(s, which);
    const uint32_t id = create_id(s, ch, ps, type);
    if (!id) return;
    if (options & 1) call(s, CmOp::SetOption, abi::CmSetOptionRequest{id, 0, cm::verbs::kOptionIdReuseAddr, 1});
    if (options & 2)
        call(s, CmOp::SetOption, abi::CmSetOptionRequest{id, 0, cm::verbs::kOptionIdAfOnly, (options >> 2) & 1u});
    const int bound = options & 8 ? 0 : call(s, CmOp::BindAddr, abi::CmAddrRequest{id, 0, addr});
    const int rc = call(s, CmOp::Listen, abi::CmListenRequest{id, backlog_value});
    TRACE("cm listen session %u id %#x port %u: bind %d listen %d\n", s.client->session_id, id, addr.port, bound, rc);
}

void CmFuzzer::connect() {
    const CmParty s = session();
    const uint8_t which = p_.u8();
    const uint32_t ps = port_space();
    const uint32_t type = qp_type();
    const uint8_t options = p_.u8();
    const abi::CmAddress src = address();
    const abi::CmAddress dst = address();
    const uint32_t timeout_ms = timeout();
    const Reactions r = reactions(s);
    if (!s.client || !s.client->connected()) return;
    const uint32_t ch = own_channel(s, which);
    const uint32_t id = create_id(s, ch, ps, type);
    if (!id) return;
    if (options & 1) call(s, CmOp::SetOption, abi::CmSetOptionRequest{id, 0, cm::verbs::kOptionIdReuseAddr, 1});
    if (options & 4) call(s, CmOp::SetOption, abi::CmSetOptionRequest{id, 0, cm::verbs::kOptionIdTos, options});
    if (options & 8) call(s, CmOp::SetOption, abi::CmSetOptionRequest{id, 0, cm::verbs::kOptionIdAckTimeout, 14});
    if (options & 2) call(s, CmOp::BindAddr, abi::CmAddrRequest{id, 0, src});
    abi::CmResolveAddrRequest req{};
    req.id = id;
    req.timeout_ms = timeout_ms;
    req.dst = dst;
    if (options & 0x10) req.src = src;
    const int rc = call(s, CmOp::ResolveAddr, req);
    TRACE("cm connect session %u id %#x to port %u: resolve %d\n", s.client->session_id, id, dst.port, rc);
    if (rc == 0) react(s, ch, r);
}

void CmFuzzer::respond() {
    const CmParty s = session();
    const uint8_t which = p_.u8();
    const Reactions r = reactions(s);
    if (!s.client || !s.held || s.held->channels.empty()) return;
    react(s, s.held->channels[which % s.held->channels.size()].handle, r);
}

// Takes up to r.count events of the channel (turning the daemon a little while none is queued)
// and answers each as an application might: move an address on to its route and the route to a
// connection, accept, reject or ignore a request, complete a connection with the RTU or
// rdma_establish, disconnect, answer the peer's DREQ, destroy, and now and then ask for QP
// attributes first.
void CmFuzzer::react(const CmParty& s, uint32_t channel, const Reactions& r) {
    for (uint8_t i = 0; i < r.count; ++i) {
        SessionReply reply;
        int rc = call(s, CmOp::GetEvent, abi::HandleRequest{channel, 0}, &reply);
        for (int t = 0; rc == EAGAIN && t < 4; ++t) {
            rig_.turn(100'000);
            rc = call(s, CmOp::GetEvent, abi::HandleRequest{channel, 0}, &reply);
        }
        if (rc != 0) return;
        const auto ev = reply.as<abi::CmEvent>();
        const uint8_t w = r.what[i] & 0x7F;
        const abi::HandleRequest id{ev.id, 0};
        if (r.what[i] & 0x80) call(s, CmOp::InitQpAttr, abi::CmInitQpAttrRequest{ev.id, 1u + ((w >> 5) & 3u)});
        abi::CmConnectRequest conn{};
        conn.id = ev.id;
        conn.param = r.param;
        abi::CmRejectRequest rej{};
        rej.id = ev.id;
        rej.private_data_len = r.reject_length;
        fill(rej.private_data, std::min<size_t>(rej.private_data_len, abi::kCmPrivateDataMax), r.reject_seed);
        int done = 0;
        switch (static_cast<EventType>(ev.event)) {
            case EventType::AddrResolved:
                done = w % 4 < 2   ? call(s, CmOp::ResolveRoute, abi::CmTimeoutRequest{ev.id, 1000})
                       : w % 4 < 3 ? call(s, CmOp::DestroyId, id)
                                   : 0;
                break;
            case EventType::RouteResolved:
                done = w % 4 < 2 ? call(s, CmOp::Connect, conn) : w % 4 < 3 ? call(s, CmOp::DestroyId, id) : 0;
                break;
            case EventType::ConnectRequest:
                done = w % 5 < 2   ? call(s, CmOp::Accept, conn)
                       : w % 5 < 3 ? call(s, CmOp::Reject, rej)
                       : w % 5 < 4 ? call(s, CmOp::DestroyId, id)
                                   : 0;
                break;
            case EventType::ConnectResponse:
                done = w % 5 < 2   ? call(s, CmOp::Accept, abi::CmConnectRequest{ev.id, 0, {}})
                       : w % 5 < 3 ? call(s, CmOp::Establish, id)
                       : w % 5 < 4 ? call(s, CmOp::Reject, rej)
                                   : 0;
                break;
            case EventType::Established:
                done = w % 4 == 0   ? call(s, CmOp::Disconnect, id)
                       : w % 4 == 1 ? 0
                       : w % 4 == 2 ? call(s, CmOp::DestroyId, id)
                                    : call(s, CmOp::Notify, abi::CmNotifyRequest{ev.id, cm::verbs::kEventCommEst});
                break;
            case EventType::Disconnected:
                done = w % 3 < 2 ? call(s, CmOp::Disconnect, id) : call(s, CmOp::DestroyId, id);
                break;
            default:
                done = w & 1 ? call(s, CmOp::DestroyId, id) : 0;
                break;
        }
        TRACE("cm react session %u event %u id %#x with %#x: %d\n", s.client->session_id, ev.event, ev.id, w, done);
    }
}

// ---------------------------------------------------------------------------------------------
// CmTime: the CM's timers fire

void CmFuzzer::time() {
    const int n = 1 + p_.u8() % 8;
    const uint8_t mode = p_.u8() % 4;
    // Timers of up to 2^23 ms (an ACK timeout of 31 makes a timewait that long): a jump is capped
    // there.
    constexpr uint64_t kMaxJump = uint64_t{1} << 23 << 20;
    for (int i = 0; i < n; ++i) {
        uint64_t step = 0;
        if (mode == 0 || mode == 1) {
            const auto next = mode == 0 ? rig_.host->cm().next_deadline() : rig_.dp.next_deadline();
            step = next && *next > rig_.now ? std::min(*next - rig_.now + 1, kMaxJump) : 1'000'000'000;
        } else {
            step = mode == 2 ? 66'000'000'000 : 2'100'000'000;  // an MRA's wait; a timewait
        }
        rig_.turn(step);
        rig_.turn(1000);  // MADs sent to our own address arrive a turn later
    }
    TRACE("cm time: %d jumps (mode %u), now %llu\n", n, mode, static_cast<unsigned long long>(rig_.now));
}

// ---------------------------------------------------------------------------------------------
// CmChannelIo: the channel's socket

void CmFuzzer::drain(const CmParty& s, CmChannelEnds& ch) {
    if (ch.client.get() < 0) return;
    const bool was_readable = readable(ch.client.get());
    const size_t bytes = read_all(ch.client.get());
    SessionReply r;
    int rc = call(s, CmOp::GetEvent, abi::HandleRequest{ch.handle, 0}, &r);
    // Events wait only behind a readable socket: one handed out now was queued while the daemon
    // turned for the call, and its byte is there.
    if (ch.in_sync && !was_readable && rc == 0) INVARIANT_V(readable(ch.client.get()), rc, ch.handle);
    size_t taken = 0;
    while (rc == 0 && taken++ < abi::kCmEventsQueuedMax + 16)
        rc = call(s, CmOp::GetEvent, abi::HandleRequest{ch.handle, 0}, &r);
    if (rc == EAGAIN) ch.in_sync = true;
    TRACE("cm drain channel %#x: %zu bytes, %zu events, %d\n", ch.handle, bytes, taken, rc);
}

void CmFuzzer::channel_io() {
    const CmParty s = session();
    const uint8_t which = p_.u8();
    const uint8_t mode = p_.u8() % 6;
    const uint8_t count = p_.u8();
    if (!s.held || s.held->channels.empty()) return;
    CmChannelEnds& ch = s.held->channels[which % s.held->channels.size()];
    std::vector<uint8_t> junk(size_t{count} * 64 + 1, 0xA5);
    switch (mode) {
        case 0:
        case 1:
            drain(s, ch);
            break;
        case 2:  // the bytes only: the events stay queued behind an empty socket
            if (ch.client.get() >= 0) read_all(ch.client.get());
            ch.in_sync = false;
            break;
        case 3:  // into the daemon's end: nothing the daemon reads, its own socket fills
            if (ch.client.get() >= 0) (void)!send(ch.client.get(), junk.data(), junk.size(), MSG_DONTWAIT);
            break;
        case 4:  // into the application's end, from the daemon's end it was given
            if (ch.daemon.get() >= 0) (void)!send(ch.daemon.get(), junk.data(), junk.size(), MSG_DONTWAIT);
            break;
        default:  // the application closes its end: the daemon's bytes go nowhere
            ch.client.reset();
            break;
    }
}

}  // namespace rnic::host::fuzz
