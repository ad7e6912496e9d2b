// Engine data path: frames in (parse, address and QP checks, dispatch to responder or
// completer), frames out (round robin over the ready list, responses before new requests),
// and timers. Every step is proportional to the frames, QPs with work and timers due.
#include <algorithm>

#include "engine_core.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/parser.hpp"

namespace rnic::transport {
namespace {

constexpr uint8_t kEcnCe = 3;

// Counts the bytes of the frames a rate-limited QP sends, for its pacer and byte counter.
class CountingSink final : public FrameSink {
public:
    explicit CountingSink(FrameSink& inner) noexcept : inner_(inner) {}
    std::span<uint8_t> allocate(size_t length) override { return inner_.allocate(length); }
    void commit(size_t length) override {
        bytes += length;
        inner_.commit(length);
    }
    uint64_t bytes = 0;

private:
    FrameSink& inner_;
};

bool transport_matches(wire::Transport t, QpType type) {
    switch (type) {
        case QpType::Rc:
            return t == wire::Transport::RC;
        case QpType::Uc:
            return t == wire::Transport::UC;
        case QpType::Ud:
            return t == wire::Transport::UD;
        default:
            return false;
    }
}

}  // namespace

std::string_view to_string(RxVerdict v) noexcept {
    switch (v) {
        case RxVerdict::Accepted:
            return "accepted";
        case RxVerdict::NotRocev2:
            return "not RoCEv2";
        case RxVerdict::BadIcrc:
            return "bad ICRC";
        case RxVerdict::Malformed:
            return "malformed";
        case RxVerdict::NotForUs:
            return "not for us (MAC or GID)";
        case RxVerdict::UnknownQp:
            return "unknown QP";
        case RxVerdict::BadPkey:
            return "bad P_Key";
        case RxVerdict::WrongTransport:
            return "opcode of another transport";
        case RxVerdict::BadSource:
            return "source GID is not the QP's peer";
        case RxVerdict::BadState:
            return "QP cannot receive in its state";
        case RxVerdict::RemoteAccessError:
            return "remote access error (NAKed)";
        case RxVerdict::InvalidRequest:
            return "invalid request (NAKed)";
    }
    return "?";
}

RxResult Engine::receive(std::span<const uint8_t> frame, uint64_t now_ns) noexcept {
    EngineCore& c = *core_;
    c.now = std::max(c.now, now_ns);
    ++c.counters.rx_frames;
    RxResult r;
    try {
        auto parsed = wire::parse_frame(frame);
        if (!parsed) {
            const wire::ParseErrc code = parsed.error().code;
            r.parse_error = code;
            if (wire::is_not_rocev2(code)) {
                ++c.counters.rx_not_rocev2;
                r.verdict = RxVerdict::NotRocev2;
            } else if (code == wire::ParseErrc::BadIcrc) {
                ++c.counters.rx_icrc_errors;
                r.verdict = RxVerdict::BadIcrc;
            } else {
                ++c.counters.rx_malformed;
                r.verdict = RxVerdict::Malformed;
            }
            return r;
        }
        const wire::RoceFrame& f = *parsed;
        r.qpn = f.bth.dest_qp;
        r.psn = f.bth.psn;
        r.opcode = f.bth.opcode;
        const auto& gids = c.config.gids;
        if (f.eth.dst != c.config.mac || std::find(gids.begin(), gids.end(), f.dst_gid) == gids.end()) {
            ++c.counters.rx_not_for_us;
            r.verdict = RxVerdict::NotForUs;
            return r;
        }
        const bool ce_marked = f.ecn() == kEcnCe;
        if (ce_marked) ++c.counters.np_ecn_marked_roce_packets;
        if (f.info->kind == wire::OpKind::Cnp) {
            c.on_cnp(f);
            return r;
        }
        QueuePair* qp = c.find_qp(f.bth.dest_qp);
        if (!qp) {
            ++c.counters.rx_unknown_qp;
            r.verdict = RxVerdict::UnknownQp;
            return r;
        }
        c.touch_qpc(qp->qpn);
        if ((f.bth.pkey & 0x7FFF) != 0x7FFF) {  // only the default partition exists
            ++c.counters.rx_bad_pkey;
            r.verdict = RxVerdict::BadPkey;
            return r;
        }
        if (!transport_matches(f.info->transport, qp->init.qp_type)) {
            ++c.counters.rx_malformed;
            r.verdict = RxVerdict::WrongTransport;
            return r;
        }
        // Connected QPs accept only their peer (rxe checks the source address the same way).
        if (!qp->is_ud() && f.src_gid != qp->attr.ah_attr.dgid) {
            ++c.counters.rx_bad_source;
            r.verdict = RxVerdict::BadSource;
            return r;
        }
        if (qp->state == QpState::Reset || qp->state == QpState::Init || qp->state == QpState::Err) {
            ++c.counters.rx_bad_state;
            r.verdict = RxVerdict::BadState;
            return r;
        }
        if (ce_marked) c.on_ce_marked(*qp, f);
        const uint64_t access_errors = qp->counters.remote_access_errors;
        const uint64_t invalid_requests = qp->counters.remote_invalid_request_errors;
        if (f.info->is_request()) {
            c.responder.on_request(*qp, f, frame);
            // The responder counted a class B/C error of this request (it NAKed it, or dropped it on UC).
            if (qp->counters.remote_access_errors != access_errors)
                r.verdict = RxVerdict::RemoteAccessError;
            else if (qp->counters.remote_invalid_request_errors != invalid_requests)
                r.verdict = RxVerdict::InvalidRequest;
        } else {
            c.completer.on_response(*qp, f);
        }
        c.charge(c.config.tuning.per_packet_cost_ns + c.memory->take_charged_ns());
        if (c.responder.has_work(*qp) || c.requester.has_work(*qp)) c.mark_ready(*qp);
    } catch (...) {
        ++c.counters.internal_errors;
    }
    return r;
}

size_t Engine::transmit(FrameSink& sink, uint64_t now_ns, size_t max_frames) noexcept {
    EngineCore& c = *core_;
    c.now = std::max(c.now, now_ns);
    c.tx_full = false;
    size_t total = 0;
    size_t turns = c.ready.size();
    try {
        // QPs a PFC/PAUSE held whose priority has resumed rejoin the line.
        c.release_paused();
        turns = c.ready.size();
        // CNPs first: they are the fabric's feedback, and a late one is a useless one.
        if (!c.pending_cnps.empty() && c.now >= c.busy_until && !c.cnps_paused())
            total += c.emit_cnps(sink, max_frames);
        while (total < max_frames && turns-- > 0 && !c.ready.empty() && c.now >= c.busy_until) {
            const uint32_t qpn = c.ready.front();
            c.ready.pop_front();
            QueuePair* qp = c.find_qp(qpn);
            if (!qp || !qp->in_ready) continue;  // destroyed, or an old entry of a reused slot
            qp->in_ready = false;
            if (c.hold_for_pause(*qp)) continue;  // its priority is paused: parked until it resumes
            const size_t budget = std::min<size_t>(c.config.tuning.tx_burst, max_frames - total);
            size_t n = c.responder.emit(*qp, sink, budget);
            // A QP that DCQCN slowed down sends one request per turn, at its pacer's times.
            const bool paced = qp->cc && qp->cc->rp.limited();
            size_t paced_sent = 0;
            if (n < budget && !c.tx_full) {
                if (!paced) {
                    n += c.requester.emit(*qp, sink, budget - n);
                } else if (!c.hold_for_pacing(*qp)) {
                    CountingSink counted(sink);
                    paced_sent = c.requester.emit(*qp, counted, 1);
                    if (paced_sent > 0) c.after_paced_send(*qp, counted.bytes);
                    n += paced_sent;
                }
            }
            total += n;
            if (n > 0) {
                c.charge(n * c.config.tuning.per_packet_cost_ns + c.memory->take_charged_ns());
                c.touch_qpc(qp->qpn);
            }
            const bool more = c.responder.has_work(*qp) || c.requester.has_work(*qp);
            if (c.tx_full) {
                // The port is full mid-turn: this QP goes first when there is room again.
                if (more) {
                    qp->in_ready = true;
                    c.ready.push_front(qpn);
                }
                break;
            }
            if (paced && !c.responder.has_work(*qp)) {
                // Requests left: back in line at once if the pacer allows, else its timer brings
                // it. One that sent nothing without being held is blocked (window, fence): an ACK
                // brings it back, as for any QP.
                if (paced_sent > 0 && c.requester.has_work(*qp) && !c.hold_for_pacing(*qp)) c.mark_ready(*qp);
                continue;
            }
            // Still has work and was not blocked: back in line for another turn.
            if (n == budget && more) c.mark_ready(*qp);
        }
    } catch (...) {
        ++c.counters.internal_errors;
    }
    c.counters.tx_frames += total;
    c.counters.qpc_cache_hits = c.qpc_cache->hits();
    c.counters.qpc_cache_misses = c.qpc_cache->misses();
    c.counters.qpc_cache_evictions = c.qpc_cache->evictions();
    return total;
}

std::optional<uint64_t> Engine::next_deadline() const noexcept {
    const EngineCore& c = *core_;
    std::optional<uint64_t> t = c.timers.earliest();
    if (!c.ready.empty() || (!c.pending_cnps.empty() && !c.cnps_paused())) {
        const uint64_t ready_at = std::max(c.now, c.busy_until);
        t = t ? std::min(*t, ready_at) : ready_at;
    }
    if (const auto resume = c.pause_deadline()) t = t ? std::min(*t, *resume) : *resume;
    return t;
}

void Engine::advance(uint64_t now_ns) noexcept {
    EngineCore& c = *core_;
    c.now = std::max(c.now, now_ns);
    try {
        while (Timer* t = c.timers.pop_due(c.now)) {
            QueuePair* qp = c.find_qp(t->owner);
            if (!qp) continue;  // cannot happen: a QP cancels its timers when destroyed
            const auto kind = static_cast<TimerKind>(t->kind);
            if (kind == TimerKind::Rnr)
                c.completer.on_rnr_timer(*qp);
            else if (kind == TimerKind::Retransmit)
                c.completer.on_timeout(*qp);
            else if (kind == TimerKind::OdpBound)
                c.on_odp_timer(*qp);
            else
                c.on_congestion_timer(*qp, kind);
        }
    } catch (...) {
        ++c.counters.internal_errors;
    }
}

}  // namespace rnic::transport
