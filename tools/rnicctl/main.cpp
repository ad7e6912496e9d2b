// rnicctl: asks a running rnicd for its state (the Stats op: the device's part of the document,
// or the QP list page by page) and prints it the way iproute2's `rdma` prints a kernel RNIC, or as
// JSON for scripts.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/host/client/connection.hpp"

namespace {

using nlohmann::json;
using rnic::host::client::Connection;

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

void usage(std::FILE* out) {
    std::fputs(
        "usage: rnicctl [--run-dir DIR] [-d DEVICE] [--json] COMMAND\n"
        "commands:\n"
        "  dev              devices: state, MTU, MAC, IPv4 (all devices of the run dir without -d)\n"
        "  gid              the GID table\n"
        "  qp               one line per QP (like `rdma resource show qp`)\n"
        "  stat [qp QPN]    counters, of the device or of one QP (like `rdma statistic`)\n"
        "  cache            RNIC cache hits, misses and evictions\n"
        "  cc               congestion control: DCQCN and ECN settings (docs/congestion.md)\n"
        "  cc set NAME=VALUE...  change them at run time, all or nothing (the daemon's owner or\n"
        "                   root); names as `rnicctl cc` shows them, and rp_enable/N, np_enable/N\n"
        "                   (0 or 1) for one priority as mlx5's roce_rp/enable/N\n"
        "  latency          per-hop latency histograms, count and p50/p90/p99/max in us (rnicd\n"
        "                   --latency-trace; docs/benchmarks.md, \"Where the time goes\")\n"
        "  session          objects the device holds, then each client session and its objects\n"
        "  cm               one line per rdma_cm id: port space, QP type, rdma_cm and IB CM\n"
        "                   states, addresses, communication ids, QPNs\n"
        "  user             what each user holds on the device against its caps (held/max, as\n"
        "                   the rdma cgroup's rdma.current/rdma.max)\n"
        "  log-level [LVL]  show or set rnicd's log level (trace debug info warn err critical off;\n"
        "                   setting it is for root)\n"
        "Users other than root see only their own sessions, QPs and usage.\n"
        "DEVICE defaults to rnic0, DIR to $RNIC_RUN_DIR or /run/rnic.\n",
        out);
}

// Strings print bare, everything else as JSON text.
std::string text(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "-";
    return v.dump();
}

std::string field(const json& obj, const char* name) {
    return obj.contains(name) ? text(obj.at(name)) : "-";
}

void print_pairs(const json& obj, const std::string& indent) {
    if (!obj.is_object()) return;
    for (const auto& [k, v] : obj.items()) std::cout << indent << k << ' ' << text(v) << '\n';
}

struct Options {
    std::string run_dir;
    std::string device;
    bool json_out = false;
    std::vector<std::string> command;
};

struct Daemon {
    std::unique_ptr<Connection> connection;
    json stats;
};

// Asks for the parts `what` names (the QP list from `first_qpn`) and parses the answer.
int ask_stats(const std::string& device, Daemon& d, uint32_t what, uint32_t first_qpn, json& out) {
    auto s = d.connection->stats(what, first_qpn);
    if (!s) {
        std::fprintf(stderr, "rnicctl: %s: Stats failed: %s\n", device.c_str(), std::strerror(s.error()));
        return kExitFailure;
    }
    out = json::parse(*s, nullptr, false);
    if (out.is_discarded() || !out.is_object()) {
        std::fprintf(stderr, "rnicctl: %s: the daemon's statistics are not JSON\n", device.c_str());
        return kExitFailure;
    }
    if (out.contains("error")) {
        std::fprintf(stderr, "rnicctl: %s: the daemon answered: %s\n", device.c_str(), text(out.at("error")).c_str());
        return kExitFailure;
    }
    return 0;
}

// A paged list (the QPs, the CM ids) from `first` on, page after page (one page only unless `all`).
int paged_list(const std::string& device, Daemon& d, uint32_t what, const char* key, const char* next_key,
               uint32_t first, bool all, json& out) {
    out = json::array();
    for (;;) {
        json page;
        if (const int r = ask_stats(device, d, what, first, page); r != 0) return r;
        for (auto& q : page.value(key, json::array())) out.push_back(std::move(q));
        const json next = page.value(next_key, json());
        // A page must move on, or a confused daemon would keep us here.
        if (!all || !next.is_number_unsigned() || next.get<uint64_t>() <= first) return 0;
        first = next.get<uint32_t>();
    }
}

int qp_list(const std::string& device, Daemon& d, uint32_t first_qpn, bool all, json& out) {
    return paged_list(device, d, rnic::host::abi::kStatsQps, "qps", "next_qpn", first_qpn, all, out);
}

int open_daemon(const Options& o, const std::string& device, Daemon& d, bool need_stats = true) {
    const std::string dir = o.run_dir.empty() ? rnic::host::client::default_run_dir() : o.run_dir;
    auto c = Connection::open(device, dir);
    if (!c) {
        std::fprintf(stderr, "rnicctl: cannot reach rnicd for %s at %s/%s.sock: %s%s\n", device.c_str(), dir.c_str(),
                     device.c_str(), std::strerror(c.error()),
                     c.error() == ENOENT || c.error() == ECONNREFUSED ? " (is rnicd running?)" : "");
        return kExitFailure;
    }
    d.connection = std::move(*c);
    return need_stats ? ask_stats(device, d, rnic::host::abi::kStatsDevice, 0, d.stats) : 0;
}

// One line per hop that has samples, microseconds with one decimal (the buckets are 12.5 % wide).
void print_latency(const json& latency) {
    std::cout << "trace " << (latency.value("trace", false) ? "on" : "off (rnicd --latency-trace)")
              << " bogus-stamps " << field(latency, "bogus_stamps") << '\n';
    auto us = [](const json& h, const char* k) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(h.value(k, uint64_t{0})) / 1000.0);
        return std::string(buf);
    };
    std::printf("%-22s %10s %9s %9s %9s %9s %9s\n", "hop", "count", "p50", "p90", "p99", "p99.9", "max");
    const json hops = latency.value("hops", json::object());
    for (const auto& [name, h] : hops.items()) {
        if (h.value("count", uint64_t{0}) == 0) continue;
        std::printf("%-22s %10s %9s %9s %9s %9s %9s\n", name.c_str(), field(h, "count").c_str(),
                    us(h, "p50_ns").c_str(), us(h, "p90_ns").c_str(), us(h, "p99_ns").c_str(), us(h, "p999_ns").c_str(),
                    us(h, "max_ns").c_str());
    }
    std::fflush(stdout);
}

// A QP's DCQCN state on its `rnicctl qp` line, only while a CNP holds its rate down.
std::string cc_columns(const json& cc) {
    if (!cc.value("limited", false)) return {};
    return " rate-mbps " + field(cc, "rate_mbps") + " target-mbps " + field(cc, "target_mbps") + " alpha " +
           field(cc, "alpha");
}

void print_dev(const json& dev) {
    std::cout << field(dev, "name") << ": port 1 state " << field(dev, "port_state") << " active_mtu "
              << field(dev, "active_mtu") << " max_mtu " << field(dev, "max_mtu") << " mac " << field(dev, "mac")
              << " ipv4 " << field(dev, "ipv4") << " pid " << field(dev, "pid") << '\n';
}

// `cc set NAME=VALUE...`: checked here against the daemon's current knobs with the same table
// (so a mistake is explained, and nothing is sent), then sent as one SetCongestionParam.
int cc_set(const Options& o, const std::string& device) {
    const std::vector<std::string> words(o.command.begin() + 2, o.command.end());
    if (words.empty()) return usage(stderr), kExitUsage;
    if (words.size() > rnic::host::abi::kMaxCongestionParams) {
        std::fprintf(stderr, "rnicctl: cc set: at most %u parameters at once\n", rnic::host::abi::kMaxCongestionParams);
        return kExitUsage;
    }
    std::vector<rnic::cc::ParamAssignment> assignments(words.size());
    std::vector<std::pair<std::string, uint64_t>> params;
    for (size_t i = 0; i < words.size(); ++i) {
        if (auto error = rnic::cc::parse_assignment(words[i], assignments[i])) {
            std::fprintf(stderr, "rnicctl: cc set: %s\n", error->c_str());
            return kExitUsage;
        }
        params.emplace_back(std::string(assignments[i].name), assignments[i].value);
    }
    Daemon d;
    if (const int r = open_daemon(o, device, d); r != 0) return r;
    // The daemon's knobs as they are, so the cross-field checks see what the daemon will.
    rnic::cc::DcqcnParams current;
    const json congestion = d.stats.value("congestion", json::object());
    for (const auto& info : rnic::cc::dcqcn_param_table())
        if (congestion.contains(info.name) && congestion.at(info.name).is_number_unsigned())
            (void)rnic::cc::set_param(current, info.name, congestion.at(info.name).get<uint64_t>());
    if (auto error = rnic::cc::set_params(current, assignments)) {
        std::fprintf(stderr, "rnicctl: cc set: %s (nothing changed)\n", error->c_str());
        return kExitUsage;
    }
    if (const int rc = d.connection->set_congestion_params(params); rc != 0) {
        std::fprintf(stderr, "rnicctl: cc set: %s%s\n", std::strerror(rc),
                     rc == EPERM   ? " (only the daemon's owner or root may change congestion control)"
                     : rc == EINVAL ? " (rnicd refused the values; its log says why; nothing changed)"
                                    : "");
        return rc == EINVAL ? kExitUsage : kExitFailure;
    }
    return 0;
}

int run(const Options& o) {
    const std::string& cmd = o.command[0];
    const size_t args = o.command.size() - 1;

    if (cmd == "dev") {
        if (args != 0) return usage(stderr), kExitUsage;
        std::vector<std::string> devices;
        if (!o.device.empty()) {
            devices.push_back(o.device);
        } else {
            const std::string dir = o.run_dir.empty() ? rnic::host::client::default_run_dir() : o.run_dir;
            auto list = rnic::host::client::list_devices(dir);
            if (list) devices = *list;
            if (devices.empty()) {
                std::fprintf(stderr, "rnicctl: no rnicd device in %s (is rnicd running?)\n", dir.c_str());
                return kExitFailure;
            }
        }
        json all = json::array();
        int rc = 0;
        for (const auto& name : devices) {
            Daemon d;
            if (const int r = open_daemon(o, name, d); r != 0) {
                rc = r;
                continue;
            }
            const json dev = d.stats.value("device", json::object());
            if (o.json_out)
                all.push_back(dev);
            else
                print_dev(dev);
        }
        if (o.json_out) std::cout << all.dump(2) << '\n';
        return rc;
    }

    const std::string device = o.device.empty() ? "rnic0" : o.device;
    if (cmd == "log-level" && args == 1) {
        Daemon d;
        if (const int r = open_daemon(o, device, d, false); r != 0) return r;
        if (const int rc = d.connection->set_log_level(o.command[1]); rc != 0) {
            if (rc == EINVAL) {
                std::fprintf(stderr,
                             "rnicctl: log-level: unknown level '%s' (trace debug info warn err critical off)\n",
                             o.command[1].c_str());
                return kExitUsage;
            }
            std::fprintf(stderr, "rnicctl: log-level %s: %s\n", o.command[1].c_str(), std::strerror(rc));
            return kExitFailure;
        }
        return 0;
    }
    if (cmd == "cc" && args >= 1 && o.command[1] == "set") return cc_set(o, device);
    const bool known = (cmd == "gid" || cmd == "qp" || cmd == "cache" || cmd == "cc" || cmd == "latency" || cmd == "session" || cmd == "user" ||
                        cmd == "log-level" || cmd == "cm")
                           ? args == 0
                           : cmd == "stat" && (args == 0 || (args == 2 && o.command[1] == "qp"));
    if (!known) return usage(stderr), kExitUsage;
    long qpn = -1;
    if (cmd == "stat" && args == 2) {
        char* end = nullptr;
        qpn = std::strtol(o.command[2].c_str(), &end, 0);
        if (end == o.command[2].c_str() || *end != '\0' || qpn < 0 || qpn > 0xFFFFFF) return usage(stderr), kExitUsage;
    }

    Daemon d;
    if (const int r = open_daemon(o, device, d); r != 0) return r;
    const json& s = d.stats;
    const json dev = s.value("device", json::object());
    const std::string link = field(dev, "name") + "/1";

    if (cmd == "gid") {
        const json gids = dev.value("gids", json::array());
        if (o.json_out) return std::cout << gids.dump(2) << '\n', 0;
        for (const auto& g : gids)
            std::cout << "link " << link << " gid " << field(g, "index") << ' ' << field(g, "gid") << ' '
                      << field(g, "type") << '\n';
    } else if (cmd == "qp") {
        json qps;
        if (const int r = qp_list(device, d, 0, true, qps); r != 0) return r;
        if (o.json_out) return std::cout << qps.dump(2) << '\n', 0;
        for (const auto& q : qps)
            std::cout << "link " << link << " lqpn " << field(q, "qpn") << " type " << field(q, "type") << " state "
                      << field(q, "state") << " sq-psn " << field(q, "sq_psn") << " sq-una-psn "
                      << field(q, "sq_una_psn") << " rq-psn " << field(q, "rq_psn") << " rqpn " << field(q, "dest_qpn")
                      << " path-mtu " << field(q, "path_mtu") << " pid " << field(q, "pid")
                      << cc_columns(q.value("cc", json::object())) << '\n';
    } else if (cmd == "cm") {
        json ids;
        if (const int r = paged_list(device, d, rnic::host::abi::kStatsCmIds, "cm_ids", "next_cm_id", 0, true, ids);
            r != 0)
            return r;
        if (o.json_out) return std::cout << ids.dump(2) << '\n', 0;
        for (const auto& i : ids)
            std::cout << "link " << link << " cm-id " << field(i, "id") << ' ' << field(i, "port_space") << ' '
                      << field(i, "qp_type") << " state " << field(i, "state") << " ib-state " << field(i, "ib_state")
                      << " src " << field(i, "src") << " dst " << field(i, "dst") << " lqpn " << field(i, "qpn")
                      << " rqpn " << field(i, "remote_qpn") << " pid " << field(i, "pid") << '\n';
    } else if (cmd == "stat") {
        if (qpn < 0) {
            const json counters = s.value("counters", json::object());
            if (o.json_out) return std::cout << counters.dump(2) << '\n', 0;
            std::cout << "link " << link << '\n';
            print_pairs(counters, "    ");
        } else {
            json qps;
            if (const int r = qp_list(device, d, static_cast<uint32_t>(qpn), false, qps); r != 0) return r;
            for (const auto& q : qps) {
                if (!q.contains("qpn") || !q.at("qpn").is_number() || q.at("qpn").get<long>() != qpn) continue;
                const json counters = q.value("counters", json::object());
                if (o.json_out) return std::cout << counters.dump(2) << '\n', 0;
                std::cout << "link " << link << " lqpn " << qpn << '\n';
                print_pairs(counters, "    ");
                return 0;
            }
            std::fprintf(stderr, "rnicctl: no QP %ld on %s\n", qpn, device.c_str());
            return kExitFailure;
        }
    } else if (cmd == "cc") {
        const json congestion = s.value("congestion", json::object());
        if (o.json_out) return std::cout << congestion.dump(2) << '\n', 0;
        std::cout << "link " << link << '\n';
        print_pairs(congestion, "    ");
    } else if (cmd == "latency") {
        const json latency = s.value("latency", json::object());
        if (o.json_out) return std::cout << latency.dump(2) << '\n', 0;
        print_latency(latency);
    } else if (cmd == "cache") {
        const json caches = s.value("caches", json::object());
        if (o.json_out) return std::cout << caches.dump(2) << '\n', 0;
        print_pairs(caches, "");
    } else if (cmd == "session") {
        const json sessions = s.value("sessions", json::array());
        const json objects = s.value("objects", json::object());
        if (o.json_out) return std::cout << json{{"objects", objects}, {"sessions", sessions}}.dump(2) << '\n', 0;
        // The device's own counts first: after a client is gone they must fall back, whatever
        // the remaining sessions hold.
        std::cout << "dev " << field(dev, "name");
        for (const char* k : {"sessions", "pds", "mrs", "cqs", "qps", "srqs", "ahs", "channels", "segments"})
            std::cout << ' ' << k << ' ' << field(objects, k);
        std::cout << '\n';
        for (const auto& x : sessions) {
            std::cout << "session " << field(x, "id") << " pid " << field(x, "pid") << " uid " << field(x, "uid");
            for (const char* k : {"pds", "mrs", "cqs", "qps", "srqs", "ahs", "channels", "segments"})
                std::cout << ' ' << k << ' ' << field(x, k);
            std::cout << '\n';
        }
    } else if (cmd == "user") {
        const json users = s.value("users", json::array());
        if (o.json_out) return std::cout << users.dump(2) << '\n', 0;
        for (const auto& u : users) {
            std::cout << "dev " << field(dev, "name") << " uid " << field(u, "uid");
            const json held = u.value("held", json::object()), max = u.value("max", json::object());
            for (const char* k : {"sessions", "pds", "mrs", "cqs", "qps", "srqs", "ahs", "cm_ids"})
                std::cout << ' ' << k << ' ' << field(held, k) << '/' << field(max, k);
            std::cout << '\n';
        }
    } else {  // log-level, shown
        if (o.json_out) return std::cout << json{{"log_level", s.value("log_level", json())}}.dump(2) << '\n', 0;
        std::cout << field(s, "log_level") << '\n';
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "--json" || a == "-j") {
            o.json_out = true;
        } else if ((a == "--run-dir" || a == "-d" || a == "--device") && i + 1 < argc) {
            (a == "--run-dir" ? o.run_dir : o.device) = argv[++i];
        } else if (a.starts_with("--run-dir=")) {
            o.run_dir = a.substr(10);
        } else if (!a.empty() && a[0] == '-' && o.command.empty()) {
            std::fprintf(stderr, "rnicctl: unknown option %s\n", a.c_str());
            usage(stderr);
            return kExitUsage;
        } else {
            o.command.push_back(a);
        }
    }
    if (o.command.empty()) {
        usage(stderr);
        return kExitUsage;
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rnicctl: %s\n", e.what());
        return kExitFailure;
    }
}
