// incast_sim: runs one incast scenario in simulated time and writes its time series as CSV
// (time_us, queue_bytes, gbps_<i>, rate_gbps_<i>) and its figures on stderr.
// tools/plot-incast.py runs it for every scenario of docs/congestion.md and plots the CSVs.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "incast.hpp"

namespace {

int usage() {
    std::cerr << "usage: incast_sim (--flows N | --arrive-leave) [--params paper|nvidia] [--no-dcqcn]\n"
                 "                  [--enqueue-marking] [--duration-ms MS] [--seed S] [--cc NAME=VALUE]...\n"
                 "                  [--host-gbps G] [--bottleneck-gbps G] [--kmin B] [--kmax B] [--pmax P]\n"
                 "                  [--csv FILE]\n"
                 "  N senders (1-64) into one receiver through a switch port with RED ECN marking (defaults:\n"
                 "  40 Gb/s everywhere, Kmin 5 KB, Kmax 200 KB, Pmax 0.01, marking on dequeue);\n"
                 "  the CSV (default: stdout) holds queue depth and every flow's rate over simulated time.\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace rnic::incast;
    unsigned flows = 0;
    bool arrive_leave = false, no_dcqcn = false, enqueue = false;
    ParamSet set = ParamSet::kPaper;
    long duration_ms = 0;
    unsigned long long seed = 1;
    std::string csv;
    std::vector<std::string> knobs;
    double host_gbps = 0, bottleneck_gbps = 0, pmax = -1;
    long long kmin = -1, kmax = -1;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--flows") {
            const char* v = value();
            if (!v) return usage();
            flows = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
            if (flows < 1 || flows > 64) return usage();
        } else if (a == "--arrive-leave") {
            arrive_leave = true;
        } else if (a == "--params") {
            const char* v = value();
            if (!v) return usage();
            if (std::string_view(v) == "paper")
                set = ParamSet::kPaper;
            else if (std::string_view(v) == "nvidia")
                set = ParamSet::kNvidia;
            else
                return usage();
        } else if (a == "--no-dcqcn") {
            no_dcqcn = true;
        } else if (a == "--enqueue-marking") {
            enqueue = true;
        } else if (a == "--duration-ms") {
            const char* v = value();
            if (!v || (duration_ms = std::strtol(v, nullptr, 10)) <= 0 || duration_ms > 10'000) return usage();
        } else if (a == "--seed") {
            const char* v = value();
            if (!v) return usage();
            seed = std::strtoull(v, nullptr, 0);
        } else if (a == "--host-gbps" || a == "--bottleneck-gbps" || a == "--pmax") {
            const char* v = value();
            const double x = v ? std::strtod(v, nullptr) : 0;
            if (!(x > 0 && x <= 1000) || (a == "--pmax" && x > 1)) return usage();
            (a == "--host-gbps" ? host_gbps : a == "--bottleneck-gbps" ? bottleneck_gbps : pmax) = x;
        } else if (a == "--kmin" || a == "--kmax") {
            const char* v = value();
            const long long x = v ? std::strtoll(v, nullptr, 10) : -1;
            if (x < 0 || x > 1'000'000'000) return usage();
            (a == "--kmin" ? kmin : kmax) = x;
        } else if (a == "--cc") {
            const char* v = value();
            if (!v) return usage();
            knobs.emplace_back(v);
        } else if (a == "--csv") {
            const char* v = value();
            if (!v) return usage();
            csv = v;
        } else {
            return usage();
        }
    }
    if (arrive_leave == (flows != 0)) return usage();
    Scenario s = arrive_leave ? arrive_leave_scenario(set) : incast_scenario(flows, set);
    if (duration_ms > 0) {
        if (arrive_leave) return usage();
        s.duration_ns = static_cast<TimeNs>(duration_ms) * rnic::sim::kMillisecond;
        for (Flow& f : s.flows) f.stop_ns = s.duration_ns;
    }
    for (const std::string& k : knobs)
        if (const auto error = rnic::cc::set_param_assignment(s.params, k)) {
            std::cerr << "incast_sim: --cc " << k << ": " << *error << "\n";
            return 2;
        }
    if (!knobs.empty()) s.name += " with --cc changes";
    if (host_gbps > 0) s.rate_bps = static_cast<uint64_t>(host_gbps * 1e9);
    s.bottleneck.rate_bps = bottleneck_gbps > 0 ? static_cast<uint64_t>(bottleneck_gbps * 1e9) : s.rate_bps;
    if (kmin >= 0) s.bottleneck.kmin_bytes = static_cast<uint64_t>(kmin);
    if (kmax >= 0) s.bottleneck.kmax_bytes = static_cast<uint64_t>(kmax);
    if (pmax >= 0) s.bottleneck.pmax = pmax;
    if (s.bottleneck.kmax_bytes <= s.bottleneck.kmin_bytes) return usage();
    s.dcqcn = !no_dcqcn;
    if (no_dcqcn) s.name = s.name.substr(0, s.name.find(" (")) + " (no DCQCN)";
    if (enqueue) s.bottleneck.mark_point = rnic::sim::EcnMarkPoint::kEnqueue;
    s.seed = seed;
    try {
        const Result r = run(s);
        write_summary(std::cerr, s, r);
        if (csv.empty()) {
            write_csv(std::cout, s, r);
        } else {
            std::ofstream out(csv);
            write_csv(out, s, r);
            if (!out) {
                std::cerr << "incast_sim: cannot write " << csv << "\n";
                return 1;
            }
        }
        return r.data_ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "incast_sim: " << e.what() << "\n";
        return 1;
    }
}
