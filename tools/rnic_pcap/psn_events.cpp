#include "psn_events.hpp"

#include <algorithm>
#include <cstdio>

#include "rnic/wire/aeth.hpp"

namespace rnic::tools {
namespace {

namespace wire = rnic::wire;

bool is_response_event(PsnEventKind k) {
    return k != PsnEventKind::Request && k != PsnEventKind::Retransmission;
}

PsnEventKind classify_ack(uint8_t syndrome, uint8_t& code) {
    const auto s = wire::AethSyndrome::decode(syndrome);
    code = s.value;
    switch (s.type) {
    case wire::AckType::RnrNak: return PsnEventKind::RnrNak;
    case wire::AckType::Nak: return PsnEventKind::Nak;
    default: return PsnEventKind::Ack;  // the reserved type is drawn as an ACK, its code kept
    }
}

}  // namespace

std::string FlowKey::label() const {
    char qp[16];
    std::snprintf(qp, sizeof qp, "0x%06x", dest_qp);
    return src + " -> " + dst + " QP " + qp;
}

int32_t psn_offset(uint32_t psn, uint32_t base) {
    const uint32_t d = (psn - base) & 0xFFFFFFu;
    return d >= 0x800000u ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
}

void PsnTracker::add(uint64_t frame_index, uint64_t time_ns, const wire::RoceFrame& f, uint32_t frame_bytes) {
    // Captures merged from several sources may step back in time: the axes start at the earliest.
    if (!any_ || time_ns < first_ns_) first_ns_ = time_ns;
    any_ = true;
    last_ns_ = std::max(last_ns_, time_ns);
    const std::string src = f.src_gid.to_ip_string();
    const std::string dst = f.dst_gid.to_ip_string();
    directions_[{src, dst}].push_back({time_ns, frame_bytes});

    const FlowKey key{src, dst, f.bth.dest_qp};
    PsnFlow& flow = flows_[key];
    if (flow.key.src.empty()) flow.key = key;
    PsnEvent ev{frame_index, time_ns, f.bth.psn, PsnEventKind::Request, 0, f.info->name};
    const wire::OpKind kind = f.info->kind;
    if (f.info->is_request()) {
        ev.kind = flow.request_psns.insert(f.bth.psn).second ? PsnEventKind::Request : PsnEventKind::Retransmission;
    } else if (kind == wire::OpKind::RdmaReadResponse) {
        ev.kind = flow.read_response_psns.insert(f.bth.psn).second ? PsnEventKind::ReadResponse
                                                                    : PsnEventKind::ReadResponseAgain;
    } else if (kind == wire::OpKind::Acknowledge || kind == wire::OpKind::AtomicAcknowledge) {
        ev.kind = f.ext.aeth ? classify_ack(f.ext.aeth->syndrome, ev.code) : PsnEventKind::Ack;
    } else if (kind == wire::OpKind::Cnp) {
        ev.kind = PsnEventKind::Cnp;
    } else {
        return;  // nothing else exists in the table; keep the plot to what it knows
    }
    flow.events.push_back(ev);
}

std::vector<PsnPanel> PsnTracker::panels() const {
    struct Range {
        uint32_t base = 0;
        int32_t lo = 0;
        int32_t hi = 0;
    };
    std::map<FlowKey, Range> ranges;  // request flows
    for (const auto& [key, flow] : flows_) {
        bool first = true;
        Range r;
        for (const PsnEvent& e : flow.events) {
            if (is_response_event(e.kind)) continue;
            if (first) r.base = e.psn, first = false;
            const int32_t o = psn_offset(e.psn, r.base);
            r.lo = std::min(r.lo, o);
            r.hi = std::max(r.hi, o);
        }
        if (!first) ranges[key] = r;
    }
    // Each flow carrying responses goes with the reverse-direction request flow whose PSN range
    // holds most of its response PSNs (an ACK names the last PSN it acknowledges, a NAK the
    // expected one: both within the requests' range or one past it).
    std::map<FlowKey, std::pair<FlowKey, size_t>> chosen;  // request flow -> (response flow, score)
    std::set<FlowKey> paired;
    for (const auto& [key, flow] : flows_) {
        FlowKey best;
        size_t best_score = 0;
        for (const auto& [rkey, r] : ranges) {
            if (rkey.src != key.dst || rkey.dst != key.src) continue;
            size_t score = 0;
            for (const PsnEvent& e : flow.events) {
                if (!is_response_event(e.kind)) continue;
                const int32_t o = psn_offset(e.psn, r.base);
                if (o >= r.lo - 1 && o <= r.hi + 1) ++score;
            }
            if (score > best_score) best = rkey, best_score = score;
        }
        if (best_score == 0) continue;
        auto it = chosen.find(best);
        if (it == chosen.end() || it->second.second < best_score) chosen[best] = {key, best_score};
    }
    for (const auto& [req, resp] : chosen) paired.insert(resp.first);

    std::vector<PsnPanel> out;
    for (const auto& [key, flow] : flows_) {
        if (auto r = ranges.find(key); r != ranges.end()) {
            PsnPanel p;
            p.requests = key;
            p.base_psn = r->second.base;
            if (auto c = chosen.find(key); c != chosen.end()) p.responses = c->second.first;
            out.push_back(p);
        }
    }
    for (const auto& [key, flow] : flows_) {
        if (paired.count(key)) continue;
        for (const PsnEvent& e : flow.events) {
            if (is_response_event(e.kind)) {
                PsnPanel p;
                p.responses = key;
                p.base_psn = e.psn;
                out.push_back(p);
                break;
            }
        }
    }
    return out;
}

}  // namespace rnic::tools
