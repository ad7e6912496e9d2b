// rnic-pcap: parse every RoCEv2 frame of pcap/pcapng files, verify its ICRC (which Wireshark
// shows but never checks), check that frames to QP 1 carry a valid MAD and decode the CM messages
// among them, print one line per packet and opcode and MAD histograms; --plot draws the PSNs of
// each QP over time and the throughput as an SVG (psn_plot.hpp).
// Exit 0 when every RoCEv2 frame is sound, 1 when any fails, 2 on usage or file errors.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "frame_report.hpp"
#include "mad_report.hpp"
#include "pcap_file.hpp"
#include "psn_events.hpp"
#include "psn_plot.hpp"
#include "rnic/wire/parser.hpp"

namespace {

using rnic::tools::CapturedFrame;
using rnic::tools::PcapReader;
namespace wire = rnic::wire;

constexpr int kDltEthernet = 1;

struct Options {
    bool json = false;
    bool quiet = false;  // summary only
    std::vector<std::string> files;
    std::string plot;          // --plot FILE.svg
    uint64_t plot_interval_ns = 0;  // --plot-interval US; 0: automatic
};

struct Failure {
    uint64_t frame;
    wire::ParseError error;
};

struct FileResult {
    uint64_t frames = 0;
    uint64_t rocev2 = 0;
    uint64_t other = 0;
    uint64_t icrc_ok = 0;
    std::vector<Failure> failures;
    std::map<std::string, uint64_t> histogram;
    std::map<std::string, uint64_t> mads;  // "CM REQ", ... for frames to QP 1
};

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: rnic-pcap [--json] [--quiet] [--plot OUT.svg [--plot-interval US]] FILE...\n"
                 "  Parses every RoCEv2 frame (UDP 4791) of each pcap/pcapng FILE, verifies its ICRC and\n"
                 "  that frames to QP 1 carry a valid MAD (decoding InfiniBand CM messages), prints one\n"
                 "  line per packet, an opcode histogram and a MAD histogram.\n"
                 "  --json   one JSON document on stdout instead of text\n"
                 "  --quiet  text mode: only the per-file summary and failures\n"
                 "  --plot OUT.svg  also draw the capture (one FILE): per QP flow, PSNs over time (requests,\n"
                 "           retransmissions, ACKs, NAKs by code, RNR NAKs and waits, READ responses, CNPs)\n"
                 "           and each direction's throughput; frames that fail are left out\n"
                 "  --plot-interval US  throughput interval in microseconds (default: 1/100 of the capture)\n"
                 "exit status: 0 all RoCEv2 frames sound, 1 some failed (named on stderr), 2 usage/file error\n");
}

FileResult check_file(const std::string& path, const Options& opt, nlohmann::json* json_packets,
                      rnic::tools::PsnTracker* tracker) {
    PcapReader reader(path);
    if (reader.link_type() != kDltEthernet)
        throw std::runtime_error(path + ": link type " + std::to_string(reader.link_type()) + " is not Ethernet");
    FileResult res;
    CapturedFrame cf;
    uint64_t first_ns = 0;
    while (reader.next(cf)) {
        ++res.frames;
        if (res.frames == 1) first_ns = cf.timestamp_ns;
        const uint64_t rel_ns = cf.timestamp_ns - first_ns;
        auto parsed = wire::parse_frame(cf.bytes);
        if (!parsed && wire::is_not_rocev2(parsed.error().code)) {
            ++res.other;
            continue;
        }
        ++res.rocev2;
        if (!parsed) {
            const wire::ParseError& e = parsed.error();
            res.failures.push_back({cf.index, e});
            ++res.histogram["(malformed)"];
            if (json_packets) {
                json_packets->push_back({{"frame", cf.index},
                                         {"time_ns", cf.timestamp_ns},
                                         {"error", wire::parse_errc_name(e.code)},
                                         {"error_text", wire::parse_errc_text(e.code)},
                                         {"offset", e.offset}});
            } else if (!opt.quiet) {
                std::printf("%6llu %s ERROR %s: %s (offset %zu)\n", static_cast<unsigned long long>(cf.index),
                            rnic::tools::format_seconds(rel_ns).c_str(),
                            std::string(wire::parse_errc_name(e.code)).c_str(),
                            std::string(wire::parse_errc_text(e.code)).c_str(), e.offset);
            }
            continue;
        }
        ++res.icrc_ok;
        if (tracker) tracker->add(cf.index, cf.timestamp_ns, *parsed, static_cast<uint32_t>(cf.bytes.size()));
        ++res.histogram[std::string(parsed->info->name)];
        // QP 1 is the GSI: only MADs go there, in UD SEND ONLY frames.
        std::optional<rnic::tools::GsiReport> gsi;
        std::optional<wire::ParseError> mad_error;
        if (parsed->bth.dest_qp == wire::kGsiQpn) {
            auto checked = rnic::tools::check_gsi(*parsed);
            if (checked) {
                gsi = std::move(*checked);
                ++res.mads[rnic::tools::gsi_histogram_key(*gsi)];
            } else {
                mad_error = checked.error();
                res.failures.push_back({cf.index, *mad_error});
                ++res.mads["(bad MAD)"];
            }
        }
        if (json_packets) {
            auto j = rnic::tools::frame_to_json(*parsed);
            j["frame"] = cf.index;
            j["time_ns"] = cf.timestamp_ns;
            j["icrc_ok"] = true;
            if (gsi) j["mad"] = rnic::tools::gsi_to_json(*gsi);
            if (mad_error) {
                j["error"] = wire::parse_errc_name(mad_error->code);
                j["error_text"] = wire::parse_errc_text(mad_error->code);
                j["offset"] = mad_error->offset;
            }
            json_packets->push_back(std::move(j));
        } else if (!opt.quiet) {
            std::string line = rnic::tools::describe_frame(*parsed) + " icrc=ok";
            if (gsi) line += " " + rnic::tools::describe_gsi(*gsi);
            if (mad_error)
                line += " ERROR " + std::string(wire::parse_errc_name(mad_error->code)) + ": " +
                        std::string(wire::parse_errc_text(mad_error->code)) + " (offset " +
                        std::to_string(mad_error->offset) + ")";
            std::printf("%6llu %s %s\n", static_cast<unsigned long long>(cf.index),
                        rnic::tools::format_seconds(rel_ns).c_str(), line.c_str());
        }
    }
    return res;
}

void print_summary(const std::string& path, const FileResult& r) {
    std::printf("%s: %llu frames, %llu RoCEv2, %llu other, ICRC ok %llu/%llu, %zu failed\n", path.c_str(),
                static_cast<unsigned long long>(r.frames), static_cast<unsigned long long>(r.rocev2),
                static_cast<unsigned long long>(r.other), static_cast<unsigned long long>(r.icrc_ok),
                static_cast<unsigned long long>(r.rocev2), r.failures.size());
    for (const auto& [name, count] : r.histogram)
        std::printf("  %-40s %llu\n", name.c_str(), static_cast<unsigned long long>(count));
    for (const auto& [name, count] : r.mads)
        std::printf("  MAD %-36s %llu\n", name.c_str(), static_cast<unsigned long long>(count));
}

void report_failures(const std::string& path, const FileResult& r) {
    if (r.failures.empty()) return;
    std::string list;
    for (const Failure& f : r.failures) {
        if (!list.empty()) list += ", ";
        list += std::to_string(f.frame) + " (" + std::string(wire::parse_errc_name(f.error.code)) + ")";
    }
    std::fprintf(stderr, "rnic-pcap: %s: %zu RoCEv2 frame(s) failed: %s\n", path.c_str(), r.failures.size(),
                 list.c_str());
}

// Writes the SVG and says what it holds on stderr (stdout stays the report, text or JSON).
bool write_plot(const Options& opt, const std::string& path, const rnic::tools::PsnTracker& tracker) {
    rnic::tools::PlotOptions po;
    po.interval_ns = opt.plot_interval_ns;
    const auto slash = path.find_last_of('/');
    po.title = (slash == std::string::npos ? path : path.substr(slash + 1)) + ": PSN over time per QP flow";
    rnic::tools::PlotSummary summary;
    const std::string svg = rnic::tools::render_psn_plot(tracker, po, summary);
    std::ofstream out(opt.plot, std::ios::binary | std::ios::trunc);
    out << svg;
    out.close();
    if (!out) {
        std::fprintf(stderr, "rnic-pcap: cannot write %s: %s\n", opt.plot.c_str(), std::strerror(errno));
        return false;
    }
    std::string counts;
    for (const auto& [cls, n] : summary.markers) counts += " " + cls + "=" + std::to_string(n);
    std::fprintf(stderr, "rnic-pcap: plot %s: %zu flow panel(s)%s, throughput interval %llu ns,%s\n", opt.plot.c_str(),
                 summary.panels,
                 summary.panels_omitted ? (" (" + std::to_string(summary.panels_omitted) + " omitted)").c_str() : "",
                 static_cast<unsigned long long>(summary.interval_ns), counts.empty() ? " no RoCEv2 frames" : counts.c_str());
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--json") opt.json = true;
        else if (a == "--quiet" || a == "-q") opt.quiet = true;
        else if (a == "--help" || a == "-h") { usage(stdout); return 0; }
        else if (a == "--plot" || a == "--plot-interval") {
            if (i + 1 >= argc) { std::fprintf(stderr, "rnic-pcap: %s needs a value\n", a.c_str()); return 2; }
            const std::string v = argv[++i];
            if (a == "--plot") {
                opt.plot = v;
            } else {
                char* end = nullptr;
                const double us = std::strtod(v.c_str(), &end);
                if (end == v.c_str() || *end != '\0' || !(us >= 0.001 && us <= 3.6e9)) {
                    std::fprintf(stderr, "rnic-pcap: --plot-interval wants microseconds (0.001 to 3.6e9), not %s\n", v.c_str());
                    return 2;
                }
                opt.plot_interval_ns = static_cast<uint64_t>(us * 1000.0);
            }
        }
        else if (!a.empty() && a[0] == '-') { std::fprintf(stderr, "rnic-pcap: unknown option %s\n", a.c_str()); usage(stderr); return 2; }
        else opt.files.push_back(a);
    }
    if (opt.files.empty()) {
        usage(stderr);
        return 2;
    }
    if (!opt.plot.empty() && opt.files.size() != 1) {
        std::fprintf(stderr, "rnic-pcap: --plot draws one capture; %zu given\n", opt.files.size());
        return 2;
    }
    if (opt.plot.empty() && opt.plot_interval_ns) {
        std::fprintf(stderr, "rnic-pcap: --plot-interval without --plot\n");
        return 2;
    }

    bool any_failed = false;
    nlohmann::json doc{{"files", nlohmann::json::array()}};
    for (const std::string& path : opt.files) {
        nlohmann::json packets = nlohmann::json::array();
        FileResult r;
        rnic::tools::PsnTracker tracker;
        try {
            r = check_file(path, opt, opt.json ? &packets : nullptr, opt.plot.empty() ? nullptr : &tracker);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rnic-pcap: %s\n", e.what());
            return 2;
        }
        if (!opt.plot.empty() && !write_plot(opt, path, tracker)) return 2;
        any_failed = any_failed || !r.failures.empty();
        report_failures(path, r);
        if (opt.json) {
            nlohmann::json failed = nlohmann::json::array();
            for (const Failure& f : r.failures)
                failed.push_back({{"frame", f.frame}, {"error", wire::parse_errc_name(f.error.code)}, {"offset", f.error.offset}});
            doc["files"].push_back({{"file", path},
                                    {"frames", r.frames},
                                    {"rocev2", r.rocev2},
                                    {"other", r.other},
                                    {"icrc_ok", r.icrc_ok},
                                    {"failed", failed},
                                    {"histogram", r.histogram},
                                    {"mads", r.mads},
                                    {"packets", packets}});
        } else {
            print_summary(path, r);
        }
    }
    if (opt.json) std::cout << doc.dump(1) << "\n";
    return any_failed ? 1 : 0;
}
