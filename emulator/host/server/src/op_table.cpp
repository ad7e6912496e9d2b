// Every control op's row: what its request must be (body size, descriptors, Hello) and the
// handler that answers it. dispatch() is the only way from the socket to a handler, and it
// applies the row first, in the order the protocol always has (docs/host_interface.md): op,
// body size, Hello, descriptors; a message failing any of them closes its session.
//
// Adding a message: an Op value and its request/reply structs in abi/control.hpp, a row below (in
// Op order: row i is op i + 1), and its handler, a member of HostService::Impl in the
// handlers_*.cpp of its kind taking (Request&, const <its request struct>&) (or only Request&
// when the request has no body). The handler starts with a body of the right size, the
// descriptors the row names and the session on the right side of Hello; every field is still
// its to check.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <type_traits>

#include "control_request.hpp"
#include "rnic/host/abi/cm.hpp"

namespace rnic::host::server {
namespace {

using namespace rnic::host::abi;
using Impl = HostService::Impl;

// What a request of an op must carry besides its body's struct.
struct Rules {
    uint8_t fds = 0;     // descriptors (SCM_RIGHTS), exactly this many
    bool tail = false;   // the body may go on past its struct (RegMr's runs): the handler checks the rest
    bool hello = false;  // Hello: the first message and only that; every other op only after it
};

using Call = void (*)(Impl&, Request&);
using ResolvedCall = void (*)(Impl&, Request&, const wire::MacAddr&);

struct OpRow {
    Op op;  // a row whose `handle` is null holds the place of a number not assigned here
    uint32_t body_size;  // exactly, or at least with `rules.tail`
    Rules rules;
    Call handle;
    ResolvedCall resolved;  // finishes what the handler defer()red, once ARP or ND answers; else null
};

// The request struct a handler takes (void: the op has no body).
template <class F>
struct HandlerOf;
template <>
struct HandlerOf<void (Impl::*)(Request&)> {
    using Body = void;
};
template <class B>
struct HandlerOf<void (Impl::*)(Request&, const B&)> {
    using Body = B;
};
template <class B>
struct HandlerOf<void (Impl::*)(Request&, const B&, const wire::MacAddr&)> {
    using Body = B;
};

// The body as its struct: dispatch() checked that it holds one.
template <class B>
B decode(const Request& rq) {
    static_assert(std::is_trivially_copyable_v<B>);
    B b;
    std::memcpy(&b, rq.body.data(), sizeof b);
    return b;
}

template <auto H>
void call(Impl& impl, Request& rq) {
    using Body = typename HandlerOf<decltype(H)>::Body;
    if constexpr (std::is_void_v<Body>)
        (impl.*H)(rq);
    else
        (impl.*H)(rq, decode<Body>(rq));
}

template <auto R>
void call_resolved(Impl& impl, Request& rq, const wire::MacAddr& mac) {
    (impl.*R)(rq, decode<typename HandlerOf<decltype(R)>::Body>(rq), mac);
}

// A row whose body size is its handler's request struct, so the two cannot disagree.
template <auto H, auto R = nullptr>
constexpr OpRow row(Op op, Rules rules = {}) {
    using Body = typename HandlerOf<decltype(H)>::Body;
    OpRow r{op, 0, rules, &call<H>, nullptr};
    if constexpr (!std::is_void_v<Body>) r.body_size = sizeof(Body);
    if constexpr (!std::is_null_pointer_v<decltype(R)>) {
        static_assert(std::is_same_v<Body, typename HandlerOf<decltype(R)>::Body>);
        r.resolved = &call_resolved<R>;
    }
    return r;
}

// The CM's ops continue Op's numbers (abi/cm.hpp).
template <auto H, auto R = nullptr>
constexpr OpRow row(CmOp op, Rules rules = {}) {
    return row<H, R>(static_cast<Op>(op), rules);
}

constexpr OpRow kOps[] = {
    row<&Impl::on_hello>(Op::Hello, {.hello = true}),
    row<&Impl::on_alloc_pd>(Op::AllocPd),
    row<&Impl::on_dealloc_pd>(Op::DeallocPd),
    row<&Impl::on_share_segment>(Op::ShareSegment, {.fds = 1}),
    row<&Impl::on_release_segment>(Op::ReleaseSegment),
    row<&Impl::on_reg_mr>(Op::RegMr, {.tail = true}),
    row<&Impl::on_dereg_mr>(Op::DeregMr),
    row<&Impl::on_create_comp_channel>(Op::CreateCompChannel),
    row<&Impl::on_destroy_comp_channel>(Op::DestroyCompChannel),
    row<&Impl::on_create_cq>(Op::CreateCq),
    row<&Impl::on_destroy_cq>(Op::DestroyCq),
    row<&Impl::on_create_srq>(Op::CreateSrq),
    row<&Impl::on_modify_srq>(Op::ModifySrq),
    row<&Impl::on_query_srq>(Op::QuerySrq),
    row<&Impl::on_destroy_srq>(Op::DestroySrq),
    row<&Impl::on_create_qp>(Op::CreateQp),
    row<&Impl::on_modify_qp, &Impl::on_modify_qp_resolved>(Op::ModifyQp),
    row<&Impl::on_query_qp>(Op::QueryQp),
    row<&Impl::on_destroy_qp>(Op::DestroyQp),
    row<&Impl::on_create_ah, &Impl::on_create_ah_resolved>(Op::CreateAh),
    row<&Impl::on_destroy_ah>(Op::DestroyAh),
    row<&Impl::on_query_port>(Op::QueryPort),
    row<&Impl::on_stats>(Op::Stats),
    row<&Impl::on_set_log_level>(Op::SetLogLevel),
    row<&Impl::on_cm_create_channel>(CmOp::CreateChannel),
    row<&Impl::on_cm_destroy_channel>(CmOp::DestroyChannel),
    row<&Impl::on_cm_create_id>(CmOp::CreateId),
    row<&Impl::on_cm_destroy_id>(CmOp::DestroyId),
    row<&Impl::on_cm_migrate_id>(CmOp::MigrateId),
    row<&Impl::on_cm_bind_addr>(CmOp::BindAddr),
    row<&Impl::on_cm_resolve_addr>(CmOp::ResolveAddr),
    row<&Impl::on_cm_resolve_route>(CmOp::ResolveRoute),
    row<&Impl::on_cm_query>(CmOp::Query),
    row<&Impl::on_cm_listen>(CmOp::Listen),
    row<&Impl::on_cm_connect>(CmOp::Connect),
    row<&Impl::on_cm_accept>(CmOp::Accept),
    row<&Impl::on_cm_reject>(CmOp::Reject),
    row<&Impl::on_cm_disconnect>(CmOp::Disconnect),
    row<&Impl::on_cm_init_qp_attr>(CmOp::InitQpAttr),
    row<&Impl::on_cm_notify>(CmOp::Notify),
    row<&Impl::on_cm_set_option>(CmOp::SetOption),
    row<&Impl::on_cm_get_event>(CmOp::GetEvent),
    row<&Impl::on_cm_join_multicast>(CmOp::JoinMulticast),
    row<&Impl::on_cm_leave_multicast>(CmOp::LeaveMulticast),
    row<&Impl::on_cm_establish>(CmOp::Establish),
    row<&Impl::on_alloc_mw>(Op::AllocMw),
    row<&Impl::on_dealloc_mw>(Op::DeallocMw),
    row<&Impl::on_resize_cq>(Op::ResizeCq),
    row<&Impl::on_rereg_mr>(Op::ReregMr, {.tail = true}),
    row<&Impl::on_set_congestion_param>(Op::SetCongestionParam),
};

// The lookup is an index, so a row out of place, or one no message could meet, does not compile.
constexpr bool rows_hold() {
    size_t hellos = 0;
    for (size_t i = 0; i < std::size(kOps); ++i) {
        const OpRow& r = kOps[i];
        if (static_cast<size_t>(r.op) != i + 1 || r.body_size > kMaxMessage - sizeof(MessageHeader) ||
            r.rules.fds > kMaxFdsPerMessage)
            return false;
        hellos += r.rules.hello;
    }
    return hellos == 1 && kOps[0].rules.hello;
}
static_assert(rows_hold());

// Null for an op without a row: below 1, past the last, or a placeholder.
const OpRow* find_op(uint16_t op) {
    if (op == 0 || op > std::size(kOps)) return nullptr;
    const OpRow* r = &kOps[op - 1];
    return r->handle ? r : nullptr;
}

struct Refusal {
    int rc = 0;
    const char* why = nullptr;  // null: the message meets its row
};

Refusal refusal(const OpRow* row, const Session& s, size_t body_size, size_t fds) {
    if (!row) return {EINVAL, "unknown op"};
    if (row->rules.tail ? body_size < row->body_size : body_size != row->body_size) return {EINVAL, "body length"};
    if (!s.hello_done && !row->rules.hello) return {EPROTO, "first message is not Hello"};
    if (s.hello_done && row->rules.hello) return {EPROTO, "second Hello"};
    if (fds != row->rules.fds) return {EINVAL, "wrong number of descriptors"};
    return {};
}

}  // namespace

void HostService::Impl::dispatch(Session& s, const MessageHeader& h, std::span<const uint8_t> body,
                                 std::vector<int>& fds) {
    const OpRow* row = find_op(h.op);
    const Refusal no = refusal(row, s, body.size(), fds.size());
    if (no.why) {
        close_fds(fds);
        reject(s, h, no.rc, no.why);
        return;
    }
    Request rq{*this, s, h, body, fds};
    row->handle(*this, rq);
}

void HostService::Impl::defer(Request& rq, const wire::Gid& dgid, Resolution r, const wire::MacAddr& mac) {
    // finish_deferred() needs the row's `resolved` handler: a handler of a row without one that
    // defers is a bug in the table, not anything a client did.
    const OpRow* row = find_op(rq.h.op);
    if (!row || !row->resolved) throw std::logic_error("defer() from an op whose row has no resolved handler");
    rq.s.deferred = Deferred{rq.h, std::vector<uint8_t>(rq.body.begin(), rq.body.end()), dgid, now_ns};
    ++deferred_sessions;
    if (r == Resolution::Pending) {
        ++counters.deferred_replies;
        return;
    }
    finish_deferred(rq.s, r, mac);
}

void HostService::Impl::finish_deferred(Session& s, Resolution r, const wire::MacAddr& mac) {
    Deferred d = std::move(*s.deferred);
    s.deferred.reset();
    --deferred_sessions;
    if (r == Resolution::Unreachable) {
        spdlog::info("session {}: {} unreachable (off-link, or no ARP/ND answer)", s.id, d.dgid.to_ip_string());
        reply(s, d.header, EHOSTUNREACH);
        return;
    }
    // The request passed its row's checks, and defer() took it only for a row that resolves.
    std::vector<int> no_fds;
    Request rq{*this, s, d.header, d.body, no_fds};
    find_op(d.header.op)->resolved(*this, rq, mac);
}

}  // namespace rnic::host::server
