#include "cm_actions.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "invariant.hpp"
#include "rnic/cm/cm_types.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::host::fuzz {

using abi::CmOp;
using cm::EventType;
using test::SessionReply;

namespace {

constexpr int kReplyTurns = 8;
constexpr size_t kMaxHeld = 48;  // ids and channels remembered per session (the daemon may hold more)
constexpr size_t kSentKept = 32;

constexpr abi::Op op_of(CmOp o) {
    return static_cast<abi::Op>(o);
}

const wire::Gid kOwn4 = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
const wire::Gid kOwn6 = wire::Gid::from_ipv6(port::test::kSelfIp6);
const wire::Gid kOwnLinkLocal = wire::Gid::from_ipv6(port::test::kSelf.ipv6[0].addr);
const wire::Gid kPeer4 = wire::Gid::from_ipv4(port::test::kPeerIp);
const wire::Gid kPeer6 = wire::Gid::from_ipv6(port::test::kPeerIp6);
const wire::Gid kPeerLinkLocal = wire::Gid::from_ipv6(port::test::kPeerLinkLocal);
constexpr uint32_t kSilentIp = 0x0A4D0009;   // on the link, never answers ARP
constexpr uint32_t kOffLinkIp = 0xC0000201;  // 192.0.2.1: no route

// The CA GUID RoCE devices make from their MAC (EUI-64), as rnicd's CM does.
uint64_t eui64(const wire::MacAddr& m) {
    const uint8_t g[8] = {uint8_t(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
    uint64_t v = 0;
    for (uint8_t b : g) v = (v << 8) | b;
    return v;
}
const uint64_t kOwnGuid = eui64(port::test::kSelf.mac);
const uint64_t kPeerGuid = eui64(port::test::kPeerMac);
constexpr uint32_t kPeerCommBase = 0x5EE00000;  // the peer's communication ids answering ours
constexpr uint32_t kPeerQpnBase = 0x00C0D0;

template <class T>
void keep(std::vector<T>& v, T x) {
    if (v.size() < kMaxHeld) v.push_back(std::move(x));
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

abi::CmAddress make_address(uint16_t family, const wire::Gid& g, uint16_t port) {
    abi::CmAddress a{};
    a.family = family;
    a.port = port;
    std::memcpy(a.addr, g.raw.data(), 16);
    return a;
}

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// Reads whatever the socket holds, without waiting.
size_t read_all(int fd) {
    size_t n = 0;
    char buf[512];
    for (int i = 0; i < 64; ++i) {
        const ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r <= 0) break;
        n += static_cast<size_t>(r);
    }
    return n;
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
    if (!r) return test::kNoReply;
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
            break;
        case CmOp::GetEvent: {
            INVARIANT_V(r.body.size() == sizeof(abi::CmEvent), r.body.size(), 0);
            const auto ev = r.as<abi::CmEvent>();
            check_event(s, ev);
            if (ev.event == static_cast<uint32_t>(EventType::ConnectRequest)) keep(s.held->ids, ev.id);
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
    const long me = s.client->session_id;
    // An event names an id of the session that takes it, never one that is gone or another's.
    INVARIANT_V(owner_of(ev.id) == me, ev.id, ev.event);
    if (ev.event == static_cast<uint32_t>(EventType::ConnectRequest))
        INVARIANT_V(owner_of(ev.listen_id) == me, ev.listen_id, owner_of(ev.listen_id));
    else
        INVARIANT_V(ev.listen_id == 0, ev.listen_id, ev.event);
}

// ---------------------------------------------------------------------------------------------
// CmControl: one op, fields from the program

void CmFuzzer::control() {
    const CmParty s = session();
    const uint8_t which = p_.u8() % 22;
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
// CmMad: a MAD from the wire

void CmFuzzer::collect_sent() {
    auto& frames = rig_.port.sent();
    if (sent_seen_ > frames.size()) sent_seen_ = 0;
    for (; sent_seen_ < frames.size(); ++sent_seen_) {
        const auto g = wire::parse_gsi_frame(frames[sent_seen_]);
        if (!g) continue;
        sent_.push_back({g->mad});
        if (sent_.size() > kSentKept) sent_.pop_front();
    }
}

// The peer's CM (or something posing as one, or ourselves) sends a MAD to QP 1: any CM message
// with fields from the program and communication ids that match a live connection of the
// daemon, nearly match it, answer a MAD the daemon sent to the peer, or are anything; Gets and
// Sets; the daemon's own MAD echoed back; then a bad MAD header, or a frame with the wrong Q_Key,
// length, opcode, P_Key or source QP, or a flipped byte.
void CmFuzzer::mad() {
    const uint8_t attr = p_.u8() % 12;
    const uint8_t route = p_.u8();
    const uint8_t ids_mode = p_.u8() % 4;
    const uint8_t index = p_.u8(), delta = p_.u8();
    uint32_t local = 0, remote = 0;  // the sender's communication id, the daemon's
    uint64_t tid = (uint64_t{0xFEED} << 32) | psn_;
    std::optional<wire::Mad> echo;
    if (ids_mode == 3) {
        local = p_.u32();
        remote = p_.u32();
    } else if (ids_mode == 2) {
        collect_sent();
        if (!sent_.empty()) {
            const wire::Mad& m = sent_[sent_.size() - 1 - index % sent_.size()].mad;
            echo = m;
            tid = m.header.transaction_id;
            if (const auto msg = wire::decode_cm(m)) {
                const wire::CmCommIds ids = wire::cm_comm_ids(*msg);
                remote = ids.local ? ids.local : ids.remote;
                local = ids.local && ids.remote ? ids.remote : kPeerCommBase ^ remote;
            }
        }
    } else {
        const auto ids = live();
        if (!ids.empty()) {
            const cm::IdInfo& i = ids[index % ids.size()];
            local = i.remote_comm_id;
            remote = i.local_comm_id;
            if (ids_mode == 1) {  // off by one, or by a bit, on either side
                uint32_t& which = delta & 0x80 ? local : remote;
                which = delta & 0x40 ? which ^ (1u << (delta % 32)) : which + static_cast<int8_t>(delta << 2) / 4;
            }
        }
    }
    // What the daemon knows of the connection these ids name (for QPNs).
    uint32_t daemon_qpn = 0, sender_qpn = 0;
    for (const cm::IdInfo& i : live())
        if (remote && i.local_comm_id == remote) {
            daemon_qpn = i.qpn;
            sender_qpn = i.remote_qpn;
        }
    const uint8_t guid_sel = p_.u8() % 4;
    const uint64_t guid = guid_sel == 0   ? kPeerGuid
                          : guid_sel == 1 ? kOwnGuid
                          : guid_sel == 2 ? kPeerGuid + 1
                                          : p_.u64();
    const uint8_t q = p_.u8();
    const uint32_t qpn_any = q >= 0xC0 ? p_.u32() : 0;
    const uint32_t qpn = q >= 0xC0 ? qpn_any : (q & 0x20) && sender_qpn ? sender_qpn : kPeerQpnBase + q % 8;
    const uint32_t psn = p_.u32();
    const uint8_t a = p_.u8(), b = p_.u8(), c = p_.u8(), d = p_.u8();
    const uint16_t code = p_.u16();
    const uint8_t ps_sel = p_.u8();
    uint64_t service_id = 0;
    if (ps_sel >= kPickRaw) {
        service_id = p_.u64();
    } else {
        static constexpr wire::RdmaPortSpace kSpaces[] = {wire::RdmaPortSpace::Tcp, wire::RdmaPortSpace::Udp,
                                                          wire::RdmaPortSpace::Ib, wire::RdmaPortSpace::Ipoib};
        service_id = wire::rdma_cm_service_id(kSpaces[ps_sel % 4], port());
    }
    const uint8_t header_mode = p_.u8();
    const uint16_t header_port = p_.u16();
    const uint8_t pd_length = p_.u8();
    const uint8_t seed = p_.u8();
    const uint8_t mad_mutation = p_.u8();
    const uint32_t mad_value = p_.u32();
    const uint8_t frame_mutation = p_.u8();
    const uint32_t frame_value = p_.u32();

    // Where it comes from: the peer over IPv4, IPv6 or link-local IPv6, ourselves (spoofed), or a
    // neighbour that never answers ARP (the daemon's answers wait, then are dropped).
    wire::GsiFrameSpec spec;
    spec.dst_mac = port::test::kSelf.mac;
    spec.src_mac = port::test::kPeerMac;
    spec.src_gid = kPeer4;
    spec.dst_gid = kOwn4;
    switch (route % 6) {
        case 2:
            spec.src_gid = kPeer6;
            spec.dst_gid = kOwn6;
            break;
        case 3:
            spec.src_mac = port::test::kSelf.mac;
            spec.src_gid = kOwn4;
            break;
        case 4:
            spec.src_mac = {0x02, 0, 0, 0, 0, 0x09};
            spec.src_gid = wire::Gid::from_ipv4(kSilentIp);
            break;
        case 5:
            spec.src_gid = kPeerLinkLocal;
            spec.dst_gid = kOwnLinkLocal;
            break;
        default:
            break;
    }
    spec.psn = psn_++ & 0xFFFFFF;
    spec.hop_limit = static_cast<uint8_t>(route & 0x40 ? 1 : 64);

    // The rdma_cm header of REQ and SIDR_REQ: valid towards our address, towards our other
    // family's address, wildcards, a bad version or IP version, or none at all.
    auto cm_private = [&](std::span<uint8_t> out) {
        const size_t user = std::min<size_t>(pd_length, out.size());
        fill(out.data(), user, seed);
        if (header_mode % 6 == 5) return;
        const wire::Gid dst = header_mode % 6 == 1   ? (spec.dst_gid.is_ipv4_mapped() ? kOwn6 : kOwn4)
                              : header_mode % 6 == 4 ? wire::Gid::from_ipv4(0)
                                                     : spec.dst_gid;
        auto h = wire::RdmaCmIpHeader::make(spec.src_gid, dst, header_port);
        if (header_mode % 6 == 2) h.version = 1;
        if (header_mode % 6 == 3) h.ip_version = 5;
        uint8_t hdr[wire::RdmaCmIpHeader::kSize];
        h.write(hdr);
        std::memcpy(out.data(), hdr, sizeof hdr);
        if (header_mode % 6 == 3) out[1] = 0x50;
    };
    auto plain_private = [&](std::span<uint8_t> out) {
        fill(out.data(), std::min<size_t>(pd_length, out.size()), seed);
    };
    const uint8_t cm_timeout = c & 31 ? c & 31 : 20;

    wire::Mad m;
    switch (attr) {
        case 0: {
            wire::CmReq r;
            r.local_comm_id = local ? local : kPeerCommBase ^ psn_;
            r.service_id = service_id;
            r.local_ca_guid = guid;
            r.local_qpn = qpn & 0xFFFFFF;
            r.responder_resources = a;
            r.initiator_depth = b;
            r.remote_cm_response_timeout = cm_timeout;
            r.local_cm_response_timeout = static_cast<uint8_t>((c >> 5) ? (c >> 3) & 31 : 20);
            r.transport = static_cast<wire::CmTransport>(d & 3);
            r.end_to_end_flow_control = d & 4;
            r.starting_psn = psn & 0xFFFFFF;
            r.retry_count = (d >> 3) & 7;
            r.rnr_retry_count = (d >> 5) & 7;
            r.max_cm_retries = code & 15;
            r.srq = code & 16;
            r.path_mtu = static_cast<uint8_t>((code >> 5) & 7);
            r.pkey = code & 0x100 ? static_cast<uint16_t>(code) : 0xFFFF;
            r.primary_path.local_lid = r.primary_path.remote_lid = 0xFFFF;
            r.primary_path.local_gid = spec.src_gid;
            r.primary_path.remote_gid = code & 0x200 ? kPeer4 : spec.dst_gid;  // a GID not ours: REJ 12
            r.primary_path.flow_label = psn >> 12;
            r.primary_path.hop_limit = 64;
            r.primary_path.traffic_class = a;
            r.primary_path.local_ack_timeout = static_cast<uint8_t>((code >> 10) & 31);
            if (code & 0x8000) r.alternate_path = r.primary_path;
            cm_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 1: {
            wire::CmMra r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.message_mraed = static_cast<wire::CmMsgResponse>(d & 3);
            r.service_timeout = c & 31;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 2: {
            wire::CmRej r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.message_rejected = static_cast<wire::CmMsgResponse>(d & 3);
            static constexpr wire::CmRejReason kReasons[] = {
                wire::CmRejReason::ConsumerDefined, wire::CmRejReason::InvalidServiceId, wire::CmRejReason::StaleConn,
                wire::CmRejReason::Timeout, wire::CmRejReason::InvalidGid};
            r.reason =
                code < 0xF000 ? kReasons[code % std::size(kReasons)] : static_cast<wire::CmRejReason>(code & 0xFFF);
            r.ari_length = static_cast<uint8_t>(std::min<size_t>(a & 0x7F, wire::kCmRejAriSize));
            for (int i = 0; i < 8; ++i) r.ari[i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 3: {
            wire::CmRep r;
            r.local_comm_id = local ? local : kPeerCommBase ^ remote;
            r.remote_comm_id = remote;
            r.local_qpn = qpn & 0xFFFFFF;
            r.starting_psn = psn & 0xFFFFFF;
            r.responder_resources = a;
            r.initiator_depth = b;
            r.target_ack_delay = c & 31;
            r.end_to_end_flow_control = d & 4;
            r.rnr_retry_count = (d >> 5) & 7;
            r.srq = code & 16;
            r.local_ca_guid = guid;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 4: {
            wire::CmRtu r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 5: {
            wire::CmDreq r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            r.remote_qpn_eecn = (q & 0x10 ? qpn : daemon_qpn) & 0xFFFFFF;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 6: {
            wire::CmDrep r;
            r.local_comm_id = local;
            r.remote_comm_id = remote;
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 7: {
            wire::CmSidrReq r;
            r.request_id = local ? local : kPeerCommBase ^ psn_;
            r.pkey = code & 0x100 ? static_cast<uint16_t>(code) : 0xFFFF;
            r.service_id = service_id;
            cm_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 8: {
            wire::CmSidrRep r;
            r.request_id = remote;
            r.status = static_cast<wire::CmSidrStatus>(d % 8);
            r.qpn = qpn & 0xFFFFFF;
            r.service_id = service_id;
            r.qkey = code & 1 ? psn : cm::verbs::kRdmaUdpQkey;
            r.info_length = static_cast<uint8_t>(a % 80);
            plain_private(r.private_data);
            m = wire::encode_cm(r, tid);
            break;
        }
        case 9:  // Get(ClassPortInfo) of the CM class
        case 10: {
            m.header.mgmt_class = attr == 9 ? wire::kMgmtClassCm : a;
            m.header.class_version = attr == 9 ? wire::kCmClassVersion : b;
            m.header.method = attr == 9 ? wire::MadMethod::Get : static_cast<wire::MadMethod>(c);
            m.header.transaction_id = tid;
            m.header.attribute_id = attr == 9 ? static_cast<uint16_t>(wire::CmAttr::ClassPortInfo) : code;
            plain_private(m.data);
            break;
        }
        default:  // the daemon's own MAD back at it
            if (echo)
                m = *echo;
            else
                m = wire::encode_cm(wire::CmRtu{}, tid);
            break;
    }
    switch (mad_mutation % 10) {
        case 3:
            m.header.base_version = static_cast<uint8_t>(mad_value);
            break;
        case 4:
            m.header.class_version = static_cast<uint8_t>(mad_value);
            break;
        case 5:
            m.header.method = static_cast<wire::MadMethod>(mad_value);
            break;
        case 6:
            m.header.mgmt_class = static_cast<uint8_t>(mad_value);
            break;
        case 7:
            m.header.method = static_cast<wire::MadMethod>(static_cast<uint8_t>(m.header.method) | 0x80);
            break;
        case 8:
            m.header.status = static_cast<uint16_t>(mad_value);
            break;
        case 9:
            m.header.attribute_id = static_cast<uint16_t>(mad_value);
            break;
        default:
            break;
    }

    std::vector<uint8_t> frame(wire::kGsiFrameSizeIpv6 + 512);
    size_t length = 0;
    const uint8_t fm = frame_mutation % 10;
    if (fm == 4) spec.qkey = frame_value;
    if (fm == 8) spec.pkey = static_cast<uint16_t>(frame_value);
    if (fm == 9) spec.src_qp = frame_value & 0xFFFFFF;
    if (fm == 5 || fm == 7) {
        // Not a 256-byte MAD, or not a UD SEND ONLY: the generic builder, the same headers.
        auto bytes = m.bytes();
        std::vector<uint8_t> payload(bytes.begin(), bytes.end());
        if (fm == 5) payload.resize(static_cast<size_t>(std::clamp(256 + static_cast<int8_t>(frame_value), 0, 511)));
        wire::FrameSpec f;
        f.dst_mac = spec.dst_mac;
        f.src_mac = spec.src_mac;
        f.src_gid = spec.src_gid;
        f.dst_gid = spec.dst_gid;
        f.hop_limit = spec.hop_limit;
        f.src_port = wire::kGsiSourcePort;
        f.bth.opcode = fm == 7 ? static_cast<uint8_t>(frame_value) : wire::op::kUdSendOnly;
        f.bth.dest_qp = wire::kGsiQpn;
        f.bth.ack_req = true;
        f.bth.psn = spec.psn;
        const wire::OpcodeInfo& info = wire::opcode_info(f.bth.opcode);
        if (info.has(wire::kExtDeth)) f.ext.deth = wire::Deth{spec.qkey, 0, spec.src_qp};
        if (info.has(wire::kExtReth)) f.ext.reth = wire::Reth{0, 0, 0};
        if (info.has(wire::kExtAeth)) f.ext.aeth = wire::Aeth{0, 0};
        if (info.has(wire::kExtImmDt)) f.ext.immdt = wire::ImmDt{0};
        if (info.has(wire::kExtIeth)) f.ext.ieth = wire::Ieth{0};
        if (info.has(wire::kExtAtomicEth)) f.ext.atomic_eth = wire::AtomicEth{0, 0, 0, 0};
        if (info.has(wire::kExtAtomicAckEth)) f.ext.atomic_ack_eth = wire::AtomicAckEth{0};
        if (info.has_payload) f.payload = payload;
        const auto built = wire::build_frame(f, frame);
        if (!built) return;
        length = *built;
    } else {
        const auto built = wire::build_gsi_frame(spec, m, frame);
        if (!built) return;
        length = *built;
    }
    frame.resize(length);
    if (fm == 6) frame[frame_value % frame.size()] ^= static_cast<uint8_t>(1 + (frame_value >> 24) % 255);
    used_ = true;
    TRACE("cm mad attr %#x (%u) route %u ids %#x/%#x guid %#llx qpn %#x mutations %u/%u: %zu bytes\n",
          m.header.attribute_id, attr, route % 6, local, remote, static_cast<unsigned long long>(guid), qpn,
          mad_mutation % 10, fm, frame.size());
    rig_.port.inject(std::move(frame));
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
    // Events wait only behind a readable socket.
    if (ch.in_sync && !was_readable) INVARIANT_V(rc != 0, rc, ch.handle);
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

// ---------------------------------------------------------------------------------------------
// After the program

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
    const uint64_t known = sum_received(c) + c.class_port_info_answered + c.unsupported_answered;
    INVARIANT_V(known <= c.mads_received, known, c.mads_received);
    INVARIANT_V(c.mads_received <= known + c.bad_mads + c.unmatched_mads, c.mads_received, known);
    INVARIANT_V(c.duplicates <= c.mads_received, c.duplicates, c.mads_received);
    const uint64_t made = sum_sent(c) + c.class_port_info_answered + c.unsupported_answered + c.mads_resent;
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
