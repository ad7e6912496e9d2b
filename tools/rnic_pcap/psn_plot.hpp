// rnic-pcap --plot: a capture as one SVG: per QP flow, the PSN over time (the RDMA counterpart of
// tcptrace's time-sequence graph: requests, retransmissions, ACKs, NAKs by code, RNR NAKs and the
// waits they impose, READ responses, CNPs), then the throughput of each direction over time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "psn_events.hpp"

namespace rnic::tools {

struct PlotOptions {
    uint64_t interval_ns = 0;  // throughput bucket; 0: about 1/100 of the capture, rounded
    size_t max_panels = 32;    // PSN panels drawn; the rest are named as omitted
    std::string title;
};

struct PlotSummary {
    size_t panels = 0;
    size_t panels_omitted = 0;
    uint64_t interval_ns = 0;
    std::map<std::string, size_t> markers;  // SVG class ("ev-retx", ...) -> markers drawn
};

// The SVG document for `tracker`'s frames; fills `summary` with what it drew.
std::string render_psn_plot(const PsnTracker& tracker, const PlotOptions& options, PlotSummary& summary);

}  // namespace rnic::tools
