#include "psn_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "svg_writer.hpp"

namespace rnic::tools {
namespace {

constexpr double kWidth = 1000;
constexpr double kLeft = 78;     // room for the y tick labels
constexpr double kRight = 250;   // room for the legend
constexpr double kPanelHeight = 300;
constexpr double kPlotTop = 34;  // title above the plot area
constexpr double kPlotHeight = 220;
constexpr double kPlotWidth = kWidth - kLeft - kRight;

struct Style {
    MarkerShape shape;
    const char* colour;
    const char* cls;
    const char* label;
    double size;
};

const char* nak_name(uint8_t code) {
    switch (code) {
    case 0: return "PSN sequence error";
    case 1: return "invalid request";
    case 2: return "remote access error";
    case 3: return "remote operational error";
    case 4: return "invalid RD request";
    default: return "reserved code";
    }
}

// Stable per NAK code, so one colour means one syndrome in every panel.
const char* nak_colour(uint8_t code) {
    static const char* colours[] = {"#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
    return code < 5 ? colours[code] : "#000000";
}

Style style_of(const PsnEvent& e, std::string& cls_storage, std::string& label_storage) {
    switch (e.kind) {
    case PsnEventKind::Request: return {MarkerShape::Dot, "#1f77b4", "ev-req", "request", 1.8};
    case PsnEventKind::Retransmission:
        return {MarkerShape::Cross, "#d62728", "ev-retx", "retransmission (PSN sent again)", 4};
    case PsnEventKind::Ack: return {MarkerShape::Plus, "#2ca02c", "ev-ack", "ACK", 3};
    case PsnEventKind::Nak:
        cls_storage = "ev-nak ev-nak-" + std::to_string(e.code);
        label_storage = std::string("NAK: ") + nak_name(e.code);
        return {MarkerShape::TriangleDown, nak_colour(e.code), cls_storage.c_str(), label_storage.c_str(), 5};
    case PsnEventKind::RnrNak: return {MarkerShape::Square, "#e6007e", "ev-rnr", "RNR NAK", 4};
    case PsnEventKind::ReadResponse: return {MarkerShape::Diamond, "#17becf", "ev-read-resp", "READ response", 2.5};
    case PsnEventKind::ReadResponseAgain:
        return {MarkerShape::Diamond, "#d62728", "ev-read-retx", "READ response sent again", 4};
    case PsnEventKind::Cnp: return {MarkerShape::TriangleUp, "#000000", "ev-cnp", "CNP", 4};
    }
    return {MarkerShape::Dot, "#000000", "ev-other", "other", 2};
}

bool is_response(PsnEventKind k) { return k != PsnEventKind::Request && k != PsnEventKind::Retransmission; }

// 1, 2 or 5 times a power of ten, at least `raw`.
double nice_step(double raw) {
    if (raw <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}

struct TimeUnit {
    double ns;
    const char* name;
};

TimeUnit time_unit(uint64_t span_ns) {
    if (span_ns < 2'000'000) return {1e3, "us"};
    if (span_ns < 2'000'000'000) return {1e6, "ms"};
    return {1e9, "s"};
}

std::string fmt(double v) {
    if (std::fabs(v) < 1e-9) v = 0;  // no "-0" tick
    char buf[32];
    if (std::fabs(v - std::round(v)) < 1e-9) std::snprintf(buf, sizeof buf, "%.0f", v);
    else std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// Axes, grid and tick labels of one plot area whose top-left corner is (x0, y0).
void axes(SvgWriter& svg, double x0, double y0, double tmax, const TimeUnit& unit, double ymin, double ymax,
          const std::string& ylabel) {
    svg.rect(x0, y0, kPlotWidth, kPlotHeight, "none", "frame", 1, "#444444");
    const double tstep = nice_step(tmax / 8);
    for (double t = 0; t <= tmax + 1e-12; t += tstep) {
        const double x = x0 + t / tmax * kPlotWidth;
        svg.line(x, y0, x, y0 + kPlotHeight, "#e4e4e4", 1);
        svg.text(x, y0 + kPlotHeight + 14, fmt(t), 10, "middle");
    }
    svg.text(x0 + kPlotWidth / 2, y0 + kPlotHeight + 30, std::string("time (") + unit.name + ")", 11, "middle");
    const double ystep = nice_step((ymax - ymin) / 6);
    for (double v = std::ceil(ymin / ystep) * ystep; v <= ymax + 1e-9; v += ystep) {
        const double y = y0 + kPlotHeight - (v - ymin) / (ymax - ymin) * kPlotHeight;
        svg.line(x0, y, x0 + kPlotWidth, y, "#e4e4e4", 1);
        svg.text(x0 - 6, y + 4, fmt(v), 10, "end");
    }
    svg.text(x0 - 56, y0 + kPlotHeight / 2, ylabel, 11, "middle", -90);
}

struct LegendEntry {
    Style style;
    std::string cls;
    std::string label;
    size_t count = 0;
};

void legend(SvgWriter& svg, double x, double y, const std::vector<LegendEntry>& entries) {
    svg.begin_group("legend");
    for (const LegendEntry& e : entries) {
        if (e.style.shape == MarkerShape::Square && e.cls == "rnr-wait") svg.rect(x - 5, y - 5, 10, 10, "#f5d800", "legend-key", 0.35);
        else if (e.cls == "ack-line") svg.line(x - 6, y, x + 6, y, "#2ca02c", 1, "legend-key", "3,2");
        else svg.marker(e.style.shape, x, y, std::max(e.style.size, 3.0), e.style.colour, "legend-key");
        svg.text(x + 12, y + 4, e.label + (e.count ? " (" + std::to_string(e.count) + ")" : ""), 10.5);
        y += 17;
    }
    svg.end_group();
}

}  // namespace

std::string render_psn_plot(const PsnTracker& tracker, const PlotOptions& opt, PlotSummary& summary) {
    std::vector<PsnPanel> panels = tracker.panels();
    summary = {};
    summary.panels_omitted = panels.size() > opt.max_panels ? panels.size() - opt.max_panels : 0;
    if (panels.size() > opt.max_panels) panels.resize(opt.max_panels);
    summary.panels = panels.size();

    const uint64_t t0 = tracker.first_ns();
    const uint64_t span_ns = std::max<uint64_t>(tracker.last_ns() - t0, 1000);
    const TimeUnit unit = time_unit(span_ns);
    const double tmax = static_cast<double>(span_ns) / unit.ns;
    const auto tx = [&](uint64_t t, double x0) {
        return x0 + (static_cast<double>(t - t0) / unit.ns) / tmax * kPlotWidth;
    };

    const double header = opt.title.empty() ? 10 : 36;
    const double height = header + kPanelHeight * static_cast<double>(panels.size() + 1) +
                          (summary.panels_omitted ? 20 : 0) + 10;
    SvgWriter svg(kWidth, height);
    if (!opt.title.empty()) svg.text(kWidth / 2, 24, opt.title, 15, "middle", 0, "bold");
    double top = header;

    for (const PsnPanel& p : panels) {
        const PsnFlow* req = p.requests ? &tracker.flows().at(*p.requests) : nullptr;
        const PsnFlow* resp = p.responses ? &tracker.flows().at(*p.responses) : nullptr;
        std::vector<const PsnEvent*> events;
        if (req)
            for (const PsnEvent& e : req->events)
                if (!is_response(e.kind)) events.push_back(&e);
        if (resp)
            for (const PsnEvent& e : resp->events)
                if (is_response(e.kind)) events.push_back(&e);
        std::sort(events.begin(), events.end(), [](const PsnEvent* a, const PsnEvent* b) {
            return a->time_ns < b->time_ns;
        });
        int32_t lo = 0, hi = 1;
        for (const PsnEvent* e : events) {
            lo = std::min(lo, psn_offset(e->psn, p.base_psn));
            hi = std::max(hi, psn_offset(e->psn, p.base_psn));
        }
        const double ymin = lo - 0.5, ymax = hi + 0.5 + (hi - lo) * 0.04;
        const double x0 = kLeft, y0 = top + kPlotTop;
        const auto ty = [&](uint32_t psn) {
            return y0 + kPlotHeight - (psn_offset(psn, p.base_psn) - ymin) / (ymax - ymin) * kPlotHeight;
        };

        std::string title = req ? req->key.label() : "";
        if (resp) title += (req ? "   answered by " : "responses ") + resp->key.label();
        char base[48];
        std::snprintf(base, sizeof base, "PSN - %u", p.base_psn);
        svg.begin_group("panel");
        svg.text(kLeft, top + 20, title, 12, "start", 0, "bold");
        axes(svg, x0, y0, tmax, unit, ymin, ymax, base);

        // RNR waits: from each RNR NAK to the requester's next request of that flow (its resend).
        std::vector<LegendEntry> entries;
        size_t waits = 0;
        if (req && resp) {
            for (const PsnEvent* e : events) {
                if (e->kind != PsnEventKind::RnrNak) continue;
                uint64_t end = tracker.last_ns();
                for (const PsnEvent& r : req->events)
                    if (!is_response(r.kind) && r.time_ns > e->time_ns) { end = r.time_ns; break; }
                const double xa = tx(e->time_ns, x0), xb = tx(end, x0);
                svg.rect(xa, y0, std::max(xb - xa, 1.0), kPlotHeight, "#f5d800", "rnr-wait", 0.35);
                ++waits;
            }
        }
        // The ACK line: tcptrace draws the highest acknowledged sequence over time.
        std::vector<std::pair<double, double>> ack_line;
        for (const PsnEvent* e : events) {
            if (e->kind != PsnEventKind::Ack) continue;
            const double x = tx(e->time_ns, x0), y = ty(e->psn);
            if (!ack_line.empty()) ack_line.emplace_back(x, ack_line.back().second);
            ack_line.emplace_back(x, y);
        }
        if (ack_line.size() > 1) svg.polyline(ack_line, "#2ca02c", 0.8, "ack-line");

        std::map<std::string, LegendEntry> seen;
        svg.begin_group("markers");
        for (const PsnEvent* e : events) {
            std::string cls, label;
            const Style s = style_of(*e, cls, label);
            const std::string c = s.cls;
            char tip[160];
            std::snprintf(tip, sizeof tip, "frame %llu, %.6f s, PSN %u, %.*s",
                          static_cast<unsigned long long>(e->frame), static_cast<double>(e->time_ns - t0) / 1e9,
                          e->psn, static_cast<int>(e->opcode.size()), e->opcode.data());
            svg.marker(s.shape, tx(e->time_ns, x0), ty(e->psn), s.size, s.colour, c, tip);
            ++summary.markers[c.substr(c.rfind(' ') + 1)];  // "ev-nak-0", not "ev-nak ev-nak-0"
            LegendEntry& le = seen[c];
            le.style = s;
            le.cls = c;
            le.label = s.label;
            le.style.cls = nullptr;  // points into temporaries
            le.style.label = nullptr;
            ++le.count;
        }
        svg.end_group();
        // Legend: kinds in a fixed order, then the ACK line and RNR waits.
        static const char* order[] = {"ev-req", "ev-retx", "ev-ack", "ev-nak ev-nak-0", "ev-nak ev-nak-1",
                                      "ev-nak ev-nak-2", "ev-nak ev-nak-3", "ev-nak ev-nak-4", "ev-rnr",
                                      "ev-read-resp", "ev-read-retx", "ev-cnp"};
        for (const char* c : order)
            if (auto it = seen.find(c); it != seen.end()) entries.push_back(it->second);
        for (auto& [c, le] : seen)
            if (std::find(std::begin(order), std::end(order), c) == std::end(order)) entries.push_back(le);
        if (ack_line.size() > 1) entries.push_back({{MarkerShape::Plus, "#2ca02c", "", "", 3}, "ack-line", "highest ACK", 0});
        if (waits) {
            entries.push_back({{MarkerShape::Square, "#f5d800", "", "", 5}, "rnr-wait", "RNR wait", waits});
            summary.markers["rnr-wait"] += waits;
        }
        legend(svg, kLeft + kPlotWidth + 24, y0 + 8, entries);
        svg.end_group();
        top += kPanelHeight;
    }
    if (summary.panels_omitted) {
        svg.text(kLeft, top + 12, std::to_string(summary.panels_omitted) + " more flow(s) not drawn (--plot draws " +
                                      std::to_string(opt.max_panels) + ")", 11);
        top += 20;
    }

    // Throughput: bytes per interval per direction, as a step line in Mbit/s.
    uint64_t interval = opt.interval_ns;
    if (interval == 0) interval = static_cast<uint64_t>(std::max(nice_step(static_cast<double>(span_ns) / 100.0), 1000.0));
    summary.interval_ns = interval;
    const size_t buckets = static_cast<size_t>(span_ns / interval) + 1;
    static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
    std::vector<std::vector<double>> rates;
    double peak = 1e-9;
    for (const auto& [dir, samples] : tracker.directions()) {
        std::vector<double> bytes(buckets, 0);
        for (const ThroughputSample& s : samples) bytes[std::min<size_t>((s.time_ns - t0) / interval, buckets - 1)] += s.bytes;
        for (double& b : bytes) b = b * 8 / (static_cast<double>(interval) / 1e9) / 1e6;  // Mbit/s
        for (double r : bytes) peak = std::max(peak, r);
        rates.push_back(std::move(bytes));
    }
    const double x0 = kLeft, y0 = top + kPlotTop;
    svg.begin_group("throughput");
    char ttl[96];
    std::snprintf(ttl, sizeof ttl, "Throughput per direction (frame bytes per %.6g %s interval)",
                  static_cast<double>(interval) / unit.ns, unit.name);
    svg.text(kLeft, top + 20, ttl, 12, "start", 0, "bold");
    const double ymax = peak * 1.08;
    axes(svg, x0, y0, tmax, unit, 0, ymax, "Mbit/s");
    std::vector<LegendEntry> entries;
    size_t i = 0;
    for (const auto& [dir, samples] : tracker.directions()) {
        const char* colour = colours[i % 6];
        std::vector<std::pair<double, double>> pts;
        uint64_t total = 0;
        for (const ThroughputSample& s : samples) total += s.bytes;
        for (size_t b = 0; b < buckets; ++b) {
            const double xa = x0 + std::min(1.0, static_cast<double>(b * interval) / static_cast<double>(span_ns)) * kPlotWidth;
            const double xb = x0 + std::min(1.0, static_cast<double>((b + 1) * interval) / static_cast<double>(span_ns)) * kPlotWidth;
            const double y = y0 + kPlotHeight - rates[i][b] / ymax * kPlotHeight;
            pts.emplace_back(xa, y);
            pts.emplace_back(xb, y);
        }
        svg.polyline(pts, colour, 1.3, "tput tput-" + std::to_string(i));
        entries.push_back({{MarkerShape::Square, colour, "", "", 4}, "tput",
                           dir.first + " -> " + dir.second + ": " + std::to_string(total) + " B", 0});
        ++i;
    }
    legend(svg, kLeft + kPlotWidth + 24, y0 + 8, entries);
    svg.end_group();
    return svg.finish();
}

}  // namespace rnic::tools
