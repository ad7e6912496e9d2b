// Engine data path: frames in (parse, address and QP checks, dispatch to responder or
// completer), frames out (round robin over QPs with work, responses before new requests),
// and timers.
#include <algorithm>

#include "completer.hpp"
#include "queue_pair.hpp"
#include "requester.hpp"
#include "responder.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/parser.hpp"

namespace rnic::transport {
namespace {

bool transport_matches(wire::Transport t, QpType type) {
    switch (type) {
        case QpType::Rc: return t == wire::Transport::RC;
        case QpType::Uc: return t == wire::Transport::UC;
        case QpType::Ud: return t == wire::Transport::UD;
        default: return false;
    }
}

}  // namespace

std::string_view to_string(RxVerdict v) noexcept {
    switch (v) {
        case RxVerdict::Accepted: return "accepted";
        case RxVerdict::NotRocev2: return "not RoCEv2";
        case RxVerdict::BadIcrc: return "bad ICRC";
        case RxVerdict::Malformed: return "malformed";
        case RxVerdict::NotForUs: return "not for us (MAC or GID)";
        case RxVerdict::UnknownQp: return "unknown QP";
        case RxVerdict::BadPkey: return "bad P_Key";
        case RxVerdict::WrongTransport: return "opcode of another transport";
        case RxVerdict::BadSource: return "source GID is not the QP's peer";
        case RxVerdict::BadState: return "QP cannot receive in its state";
        case RxVerdict::RemoteAccessError: return "remote access error (NAKed)";
        case RxVerdict::InvalidRequest: return "invalid request (NAKed)";
    }
    return "?";
}

RxResult Engine::receive(std::span<const uint8_t> frame, uint64_t now_ns) {
    now_ = std::max(now_, now_ns);
    ++counters_.rx_frames;
    RxResult r;
    auto parsed = wire::parse_frame(frame);
    if (!parsed) {
        const wire::ParseErrc code = parsed.error().code;
        r.parse_error = code;
        if (wire::is_not_rocev2(code)) {
            ++counters_.rx_not_rocev2;
            r.verdict = RxVerdict::NotRocev2;
        } else if (code == wire::ParseErrc::BadIcrc) {
            ++counters_.rx_icrc_errors;
            r.verdict = RxVerdict::BadIcrc;
        } else {
            ++counters_.rx_malformed;
            r.verdict = RxVerdict::Malformed;
        }
        return r;
    }
    const wire::RoceFrame& f = *parsed;
    r.qpn = f.bth.dest_qp;
    r.psn = f.bth.psn;
    r.opcode = f.bth.opcode;
    const bool our_gid = std::find(config_.gids.begin(), config_.gids.end(), f.dst_gid) != config_.gids.end();
    if (!our_gid || f.eth.dst != config_.mac) {
        ++counters_.rx_not_for_us;
        r.verdict = RxVerdict::NotForUs;
        return r;
    }
    if (f.info->kind == wire::OpKind::Cnp) return r;  // congestion control is not modelled yet
    QueuePair* qp = find_qp(f.bth.dest_qp);
    if (!qp) {
        ++counters_.rx_unknown_qp;
        r.verdict = RxVerdict::UnknownQp;
        return r;
    }
    // The QP context lookup goes through the QPC cache like everything an RNIC keeps in ICM.
    if (qpc_cache_->enabled() && !qpc_cache_->access(qp->qpn)) charge(qpc_cache_->config().miss_cost_ns);
    if ((f.bth.pkey & 0x7FFF) != 0x7FFF) {  // only the default partition exists
        ++counters_.rx_bad_pkey;
        r.verdict = RxVerdict::BadPkey;
        return r;
    }
    if (!transport_matches(f.info->transport, qp->init.qp_type)) {
        ++counters_.rx_malformed;
        r.verdict = RxVerdict::WrongTransport;
        return r;
    }
    // Connected QPs accept only their peer (rxe checks the source address the same way).
    if (!qp->is_ud() && f.src_gid != qp->attr.ah_attr.dgid) {
        ++counters_.rx_bad_source;
        r.verdict = RxVerdict::BadSource;
        return r;
    }
    if (qp->state == QpState::Reset || qp->state == QpState::Init || qp->state == QpState::Err) {
        ++counters_.rx_bad_state;
        r.verdict = RxVerdict::BadState;
        return r;
    }
    const uint64_t access_errors = qp->counters.remote_access_errors;
    const uint64_t invalid_requests = qp->counters.remote_invalid_request_errors;
    if (f.info->is_request()) {
        responder_->on_request(*qp, f, frame);
        // The responder counted a class B/C error of this request (it NAKed it, or dropped it on UC).
        if (qp->counters.remote_access_errors != access_errors) r.verdict = RxVerdict::RemoteAccessError;
        else if (qp->counters.remote_invalid_request_errors != invalid_requests) r.verdict = RxVerdict::InvalidRequest;
    } else {
        completer_->on_response(*qp, f);
    }
    charge(config_.tuning.per_packet_cost_ns + memory_->take_charged_ns());
    if (responder_->has_work(*qp) || requester_->has_work(*qp)) mark_ready(*qp);
    return r;
}

size_t Engine::transmit(FrameSink& sink, uint64_t now_ns, size_t max_frames) {
    now_ = std::max(now_, now_ns);
    size_t total = 0;
    size_t turns = ready_.size();
    while (total < max_frames && turns-- > 0 && !ready_.empty() && now_ >= busy_until_) {
        const uint32_t qpn = ready_.front();
        ready_.pop_front();
        QueuePair* qp = find_qp(qpn);
        if (!qp) continue;
        const size_t budget = std::min<size_t>(config_.tuning.tx_burst, max_frames - total);
        size_t n = responder_->emit(*qp, sink, budget);
        if (n < budget) n += requester_->emit(*qp, sink, budget - n);
        total += n;
        if (n > 0) {
            charge(n * config_.tuning.per_packet_cost_ns + memory_->take_charged_ns());
            if (qpc_cache_->enabled() && !qpc_cache_->access(qp->qpn)) charge(qpc_cache_->config().miss_cost_ns);
        }
        // Still has work and was not blocked: back in line for another turn.
        if (n == budget && (responder_->has_work(*qp) || requester_->has_work(*qp))) ready_.push_back(qpn);
    }
    counters_.tx_frames += total;
    counters_.qpc_cache_hits = qpc_cache_->hits();
    counters_.qpc_cache_misses = qpc_cache_->misses();
    counters_.qpc_cache_evictions = qpc_cache_->evictions();
    return total;
}

std::optional<uint64_t> Engine::next_deadline() const {
    std::optional<uint64_t> t;
    auto consider = [&](uint64_t v) { t = t ? std::min(*t, v) : v; };
    if (!ready_.empty()) consider(std::max(now_, busy_until_));
    for (const auto& [qpn, qp] : qps_) {
        if (qp->retransmit_deadline) consider(*qp->retransmit_deadline);
        if (qp->rnr_deadline) consider(*qp->rnr_deadline);
    }
    return t;
}

void Engine::advance(uint64_t now_ns) {
    now_ = std::max(now_, now_ns);
    for (auto& [qpn, qp] : qps_) {
        if (qp->rnr_deadline && *qp->rnr_deadline <= now_) {
            qp->rnr_deadline.reset();
            completer_->arm_timer(*qp);
            mark_ready(*qp);
        }
        if (qp->retransmit_deadline && *qp->retransmit_deadline <= now_) {
            ++qp->counters.local_ack_timeout_err;
            completer_->on_timer(*qp, now_);
        }
    }
}

bool Engine::has_pending_work() const { return !ready_.empty(); }

}  // namespace rnic::transport
