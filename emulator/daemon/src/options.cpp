#include "options.hpp"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "rnic/port/eal_arguments.hpp"

namespace rnic::daemon {

const char* usage() {
    return "usage: rnicd PORT [PORT]... [--busy-poll] [--latency-trace] [--spin-us N] [--stream-spin-us N] [--stream-nap-us N]\n"
           "             [--stream-linger-us N] [--idle-sleep-us N] [--no-rx-wakeup] [--ring-port] [--sched fifo|nice|none] [--home-cpu N]\n"
           "             [--log-level trace|debug|info|warn|error|off] [--run-dir DIR]\n"
           "             [--socket-mode MODE] [--socket-group GROUP] [--user-limit [USER:]RES=N,...]...\n"
           "             [-- EAL arguments]\n"
           "       rnicd --config FILE [OPTION]... [-- EAL arguments]\n"
           "  --config FILE     options from FILE: `key = value` lines named as the long options\n"
           "                    (`iface = eth0`, a bare `busy-poll`, `eal = ...` for the EAL\n"
           "                    arguments); an option on the command line replaces the file's lines\n"
           "                    with its key. Errors name the file and line (docs/packaging.md)\n"
           "  PORT: --iface IF --ip A.B.C.D/NN [--ip6 ADDR/LEN]... [--mac MAC] [--name NAME]\n"
           "        [--pcap FILE [--pcap-max-mb N]]\n"
           "  Each --iface (or --port) starts a port; the options after it, up to the next, are that\n"
           "  port's. Every port is a device of its own (rnic0, rnic1, ...) served by the one poll loop.\n"
           "  --iface IF        a port: DPDK af_packet on IF unless EAL arguments name the devices\n"
           "                    (-- --vdev net_af_xdp0,iface=IF, -- -a 0000:03:00.0, ...)\n"
           "  --ring-port       every --iface port is rnicd's own TPACKET_V2 ring on IF instead of\n"
           "                    DPDK's af_packet PMD: frames parsed and built in the kernel's rings,\n"
           "                    no fanout, the ring socket as the RX wake-up (docs/daemon.md)\n"
           "  --port            a port whose device comes from the EAL arguments (in their order)\n"
           "  --ip A/NN         the RNIC's IPv4 address; GID 0 is ::ffff:A\n"
           "  --ip6 ADDR/LEN    an IPv6 address (repeatable, up to 14); GID 1 is always the link-local\n"
           "                    fe80:: address from the MAC, these follow as GIDs 2, 3, ...\n"
           "  --mac MAC         the RNIC's MAC (default: the port's)\n"
           "  --pcap FILE       capture every RoCEv2 frame sent and received (ns timestamps)\n"
           "  --pcap-max-mb N   rotate to FILE.1, FILE.2, ... when a file reaches N MiB\n"
           "  --busy-poll       never sleep (one full core; best when the daemon has a core of its own)\n"
           "  --spin-us N       keep polling N us after the last work before sleeping (default 10)\n"
           "  --stream-spin-us N  the spin window while work streams in (32 frames, WQEs or CQEs\n"
           "                    in 100 us; default 10)\n"
           "  --stream-nap-us N then a nap this long that frames do not end (default 20; 0: an\n"
           "                    ordinary nap): a receiver woken by every burst of a stream makes the\n"
           "                    sender pay for each wake-up inside its sendto()\n"
           "  --stream-linger-us N  naps stay stream naps up to this long after the stream while\n"
           "                    work keeps a stream's pace (default 2000): a stream near the\n"
           "                    threshold would otherwise wake and kick the loops at every dip\n"
           "  --idle-sleep-us N longest nap (default 10000 when frames wake the loop, else 2000);\n"
           "                    a frame, a doorbell or a control message ends a nap at once\n"
           "  --no-rx-wakeup    do not sleep on the port's RX wake-up: frames wait for the nap to end\n"
           "  --latency-trace   per-hop latency histograms (`rnicctl latency`); clients stamp their\n"
           "                    doorbells and kicks, a clock read each\n"
           "  --sched POLICY    fifo (SCHED_FIFO priority 1: a woken daemon preempts spinning\n"
           "                    applications; the default), nice (nice -20) or none (the\n"
           "                    default with --busy-poll)\n"
           "  --home-cpu N      the loop runs on CPU N, and on every CPU it may use only while work\n"
           "                    streams in (back 2 ms after): two daemons on one host given the same\n"
           "                    home wake each other without a wake-up across cores (docs/daemon.md)\n"
           "  --qpc-cache N/W, --mpt-cache N/W, --mtt-cache N/W\n"
           "                    the RNIC caches' entries and ways (defaults 256/4, 256/4, 2048/8;\n"
           "                    0 turns one off): hits, misses, evictions in `rnicctl cache`\n"
           "  --cm-keepalive IDLE/PROBE/N  peers with connections that send no MAD for IDLE ms are\n"
           "                    probed every PROBE ms; N unanswered probes end their connections\n"
           "                    (DISCONNECTED, -ETIMEDOUT). Default 5000/2000/4; 0: never, as Linux\n"
           "  --cc NAME=VALUE   a congestion-control knob, named as mlx5 names it (rp_ai_rate,\n"
           "                    np_min_time_between_cnps, ecn_ect ...: docs/congestion.md); repeatable\n"
           "  --port-rate MBPS  the port's rate for DCQCN (recovery's ceiling) and for PAUSE/PFC\n"
           "                    (a pause quantum is 512 bit times at it); default 10000\n"
           "  --dscp-prio DSCP=PRIO[,DSCP=PRIO...]  the 802.1p priority of a DSCP, for DCQCN's\n"
           "                    per-priority switches and PFC (default: DSCP >> 3); repeatable\n"
           "  --cache-miss-ns N processing time a cache miss costs (default 0: counted, not charged)\n"
           "  --odp-timeout-ms N  an access to an on-demand (ODP) region pending this long (a page\n"
           "                    fault the client never resolves) puts its QP in error (default 2000)\n"
           "  --rx-desc N, --tx-desc N  descriptors per port (64..16384, default 1024 each); the\n"
           "                    mbuf pool holds them all, two bursts and the cache\n"
           "  --name NAME       device name (default rnic<port index>)\n"
           "  --run-dir DIR     control socket directory (default $RNIC_RUN_DIR or /run/rnic)\n"
           "  --socket-mode MODE  the control sockets' mode, octal (default 0666: every user, as\n"
           "                    Linux's /dev/infiniband/uverbs*); 0660 with --socket-group for a group\n"
           "  --socket-group GROUP  the control sockets' group (name or gid)\n"
           "  --user-limit [USER:]RES=N[,RES=N]...  what one user may hold on each device, as the\n"
           "                    rdma cgroup's rdma.max (beyond it: EAGAIN). RES: sessions (open\n"
           "                    devices), pds, mrs, cqs, qps, srqs, ahs, cm_ids; N a number or max (the\n"
           "                    default: only the device's own limits). Without USER (name or uid)\n"
           "                    for every user; a user's own entry takes the rest from that one.\n"
           "                    Repeatable. Registered memory is limited by each process's\n"
           "                    RLIMIT_MEMLOCK (ulimit -l) unless it has CAP_IPC_LOCK, as in Linux.\n";
}

const char* to_string(Sched s) {
    switch (s) {
        case Sched::Fifo: return "fifo";
        case Sched::Nice: return "nice";
        case Sched::None: break;
    }
    return "none";
}

namespace {
bool parse_u64(const std::string& s, uint64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

// "N/W" or "N" (W = 1) or "0"; N a multiple of W, both within what a set-associative model takes.
bool parse_cache(const std::string& s, CacheOption& out) {
    const auto slash = s.find('/');
    uint64_t entries = 0, ways = 1;
    if (!parse_u64(s.substr(0, slash), entries)) return false;
    if (slash != std::string::npos && !parse_u64(s.substr(slash + 1), ways)) return false;
    if (entries > (1u << 20) || ways == 0 || ways > 64 || (entries != 0 && entries % ways != 0)) return false;
    out = {static_cast<uint32_t>(entries), static_cast<uint32_t>(entries == 0 ? 1 : ways)};
    return true;
}
// "IDLE/PROBE/N", or "0" (off).
bool parse_keepalive(const std::string& s, KeepaliveOption& out) {
    if (s == "0") {
        out = {0, 0, 0};
        return true;
    }
    uint64_t v[3] = {};
    size_t at = 0;
    for (int i = 0; i < 3; ++i) {
        const size_t end = i < 2 ? s.find('/', at) : s.size();
        if (end == std::string::npos || !parse_u64(s.substr(at, end - at), v[i])) return false;
        at = end + 1;
    }
    const auto ms_ok = [](uint64_t ms) { return ms >= 10 && ms <= 3'600'000; };
    if (!ms_ok(v[0]) || !ms_ok(v[1]) || v[2] < 1 || v[2] > 100) return false;
    out = {static_cast<uint32_t>(v[0]), static_cast<uint32_t>(v[1]), static_cast<uint32_t>(v[2])};
    return true;
}

// A user or group by name, or a number.
std::optional<uint32_t> id_of(const std::string& s, bool is_group) {
    uint64_t n = 0;
    if (parse_u64(s, n)) return n < UINT32_MAX ? std::optional<uint32_t>(static_cast<uint32_t>(n)) : std::nullopt;
    if (is_group) {
        const struct group* g = getgrnam(s.c_str());
        return g ? std::optional<uint32_t>(g->gr_gid) : std::nullopt;
    }
    const passwd* p = getpwnam(s.c_str());
    return p ? std::optional<uint32_t>(p->pw_uid) : std::nullopt;
}

// One --user-limit: "[USER:]RES=N,RES=max,..." into per-resource values (unset: not named).
using LimitSpec = std::array<std::optional<uint32_t>, host::server::kResourceCount>;
bool parse_user_limit(const std::string& v, std::optional<uint32_t>& uid, LimitSpec& spec, std::string& error) {
    std::string rest = v;
    if (const auto colon = v.find(':'); colon != std::string::npos) {
        uid = id_of(v.substr(0, colon), false);
        if (!uid) {
            error = "no user '" + v.substr(0, colon) + "'";
            return false;
        }
        rest = v.substr(colon + 1);
    }
    size_t start = 0;
    do {
        const size_t comma = std::min(rest.find(',', start), rest.size());
        const std::string item = rest.substr(start, comma - start);
        const size_t eq = item.find('=');
        const auto r = host::server::resource_by_name(item.substr(0, eq));
        uint64_t n = 0;
        const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
        if (!r || (value != "max" && (!parse_u64(value, n) || n >= host::server::kUnlimited))) {
            error = "'" + item + "' is not RES=N or RES=max";
            return false;
        }
        spec[static_cast<size_t>(*r)] = value == "max" ? host::server::kUnlimited : static_cast<uint32_t>(n);
        start = comma + 1;
    } while (start <= rest.size());
    return true;
}
}  // namespace

std::optional<std::string> parse_dscp_priorities(std::string_view text, std::array<uint8_t, 64>& map) {
    std::array<uint8_t, 64> result = map;
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        const std::string entry(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        const size_t eq = entry.find('=');
        uint64_t dscp = 0, prio = 0;
        if (eq == std::string::npos || !parse_u64(entry.substr(0, eq), dscp) || !parse_u64(entry.substr(eq + 1), prio) ||
            dscp > 63 || prio > 7)
            return "wants DSCP=PRIO entries (DSCP 0..63, PRIO 0..7) separated by commas, got '" + entry + "'";
        result[dscp] = static_cast<uint8_t>(prio);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    map = result;
    return std::nullopt;
}

wire::Expected<Options, std::string> parse_options(const std::vector<std::string>& args) {
    using U = wire::Unexpected<std::string>;
    Options o;
    o.ports.emplace_back();
    // The port the per-port options go to: the last one --iface or --port started.
    auto current = [&o]() -> PortOptions& { return o.ports.back(); };
    bool port_started = false;  // the first port exists before any --iface; the first --iface names it
    std::map<uint32_t, LimitSpec> user_specs;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            o.eal_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
            break;
        }
        if (a == "-h" || a == "--help") {
            o.help = true;
            return o;
        }
        if (a == "--busy-poll") {
            o.busy_poll = true;
            continue;
        }
        if (a == "--no-rx-wakeup") {
            o.rx_wakeup = false;
            continue;
        }
        if (a == "--ring-port") {
            o.ring_port = true;
            continue;
        }
        if (a == "--latency-trace") {
            o.latency_trace = true;
            continue;
        }
        if (a == "--port") {
            if (port_started) o.ports.emplace_back();
            port_started = true;
            continue;
        }
        const bool takes_value =
            a == "--iface" || a == "--ip" || a == "--ip6" || a == "--mac" || a == "--pcap" || a == "--pcap-max-mb" ||
            a == "--log-level" || a == "--idle-sleep-us" || a == "--spin-us" || a == "--stream-spin-us" ||
            a == "--stream-nap-us" || a == "--stream-linger-us" || a == "--sched" || a == "--qpc-cache" || a == "--mpt-cache" ||
            a == "--mtt-cache" || a == "--cache-miss-ns" || a == "--rx-desc" || a == "--tx-desc" || a == "--name" ||
            a == "--run-dir" || a == "--socket-mode" || a == "--socket-group" || a == "--user-limit" ||
            a == "--cm-keepalive" || a == "--cc" || a == "--port-rate" || a == "--dscp-prio" ||
            a == "--odp-timeout-ms" || a == "--home-cpu";
        if (!takes_value) return U{"unknown option '" + a + "'"};
        if (i + 1 >= args.size()) return U{a + " needs a value"};
        const std::string& v = args[++i];
        if (a == "--iface") {
            if (v.empty()) return U{"--iface wants an interface name"};
            if (port_started && !current().iface.empty()) o.ports.emplace_back();
            port_started = true;
            current().iface = v;
        } else if (a == "--ip") {
            const auto p = port::parse_ipv4_prefix(v);
            if (!p || v.find('/') == std::string::npos) return U{"--ip wants A.B.C.D/NN, got '" + v + "'"};
            if (current().have_ip) return U{"two --ip for one port (each --iface starts a port)"};
            current().ip = *p;
            current().have_ip = true;
        } else if (a == "--ip6") {
            const auto p = port::parse_ipv6_prefix(v);
            if (!p || v.find('/') == std::string::npos)
                return U{"--ip6 wants a unicast IPv6 address with /LEN (fd77::1/64), got '" + v + "'"};
            if (current().ip6.size() == kMaxIp6) return U{"at most " + std::to_string(kMaxIp6) + " --ip6 addresses"};
            current().ip6.push_back(*p);
        } else if (a == "--mac") {
            current().mac = port::parse_mac(v);
            if (!current().mac) return U{"--mac wants aa:bb:cc:dd:ee:ff, got '" + v + "'"};
        } else if (a == "--name") {
            const bool sane = !v.empty() && v.size() < 32 && v.find('/') == std::string::npos && v[0] != '.';
            if (!sane) return U{"--name wants a device name (no '/', under 32 characters), got '" + v + "'"};
            current().name = v;
        } else if (a == "--run-dir") {
            if (v.empty()) return U{"--run-dir wants a directory"};
            o.run_dir = v;
        } else if (a == "--socket-mode") {
            uint64_t mode = 0;
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), mode, 8);
            if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || mode > 0777)
                return U{"--socket-mode wants an octal mode up to 0777, got '" + v + "'"};
            o.socket_mode = static_cast<uint32_t>(mode);
        } else if (a == "--socket-group") {
            o.socket_gid = id_of(v, true);
            if (!o.socket_gid) return U{"--socket-group: no group '" + v + "'"};
        } else if (a == "--user-limit") {
            std::optional<uint32_t> uid;
            LimitSpec spec;
            std::string error;
            if (!parse_user_limit(v, uid, spec, error)) return U{"--user-limit: " + error};
            if (uid) {
                LimitSpec& mine = user_specs[*uid];
                for (size_t r = 0; r < spec.size(); ++r)
                    if (spec[r]) mine[r] = spec[r];
            } else {
                for (size_t r = 0; r < spec.size(); ++r)
                    if (spec[r]) o.user_limits_default.max[r] = *spec[r];
            }
        } else if (a == "--pcap") {
            current().pcap = v;
        } else if (a == "--pcap-max-mb") {
            if (!parse_u64(v, current().pcap_max_mb)) return U{"--pcap-max-mb wants a number, got '" + v + "'"};
        } else if (a == "--spin-us") {
            if (!parse_u64(v, o.spin_us) || o.spin_us > 1'000'000) return U{"--spin-us wants 0..1000000, got '" + v + "'"};
        } else if (a == "--qpc-cache" || a == "--mpt-cache" || a == "--mtt-cache") {
            CacheOption& c = a == "--qpc-cache" ? o.qpc_cache : a == "--mpt-cache" ? o.mpt_cache : o.mtt_cache;
            if (!parse_cache(v, c))
                return U{a + " wants ENTRIES/WAYS (entries a multiple of ways, ways 1..64) or 0, got '" + v + "'"};
        } else if (a == "--rx-desc" || a == "--tx-desc") {
            uint64_t n = 0;
            if (!parse_u64(v, n) || n < 64 || n > 16384) return U{a + " wants 64..16384, got '" + v + "'"};
            (a == "--rx-desc" ? o.rx_descriptors : o.tx_descriptors) = static_cast<uint16_t>(n);
        } else if (a == "--cm-keepalive") {
            if (!parse_keepalive(v, o.cm_keepalive))
                return U{"--cm-keepalive wants IDLE_MS/PROBE_MS/PROBES (10..3600000 ms, 1..100 probes) or 0, got '" +
                         v + "'"};
        } else if (a == "--cc") {
            if (auto error = cc::set_param_assignment(o.congestion, v)) return U{"--cc: " + *error};
        } else if (a == "--dscp-prio") {
            if (auto error = parse_dscp_priorities(v, o.dscp_priority)) return U{"--dscp-prio: " + *error};
        } else if (a == "--port-rate") {
            uint64_t n = 0;
            if (!parse_u64(v, n) || n < 1 || n > 1'000'000) return U{"--port-rate wants 1..1000000 Mb/s, got '" + v + "'"};
            o.port_rate_mbps = static_cast<uint32_t>(n);
        } else if (a == "--odp-timeout-ms") {
            if (!parse_u64(v, o.odp_timeout_ms) || o.odp_timeout_ms < 1 || o.odp_timeout_ms > 3'600'000)
                return U{"--odp-timeout-ms wants 1..3600000, got '" + v + "'"};
        } else if (a == "--cache-miss-ns") {
            if (!parse_u64(v, o.cache_miss_ns) || o.cache_miss_ns > 1'000'000)
                return U{"--cache-miss-ns wants 0..1000000, got '" + v + "'"};
        } else if (a == "--stream-nap-us") {
            if (!parse_u64(v, o.stream_nap_us) || o.stream_nap_us > 1'000'000)
                return U{"--stream-nap-us wants 0..1000000, got '" + v + "'"};
        } else if (a == "--stream-linger-us") {
            if (!parse_u64(v, o.stream_linger_us) || o.stream_linger_us > 1'000'000)
                return U{"--stream-linger-us wants 0..1000000, got '" + v + "'"};
        } else if (a == "--home-cpu") {
            uint64_t cpu = 0;
            if (!parse_u64(v, cpu) || cpu >= 1024) return U{"--home-cpu wants a CPU number 0..1023, got '" + v + "'"};
            o.home_cpu = static_cast<int>(cpu);
        } else if (a == "--stream-spin-us") {
            if (!parse_u64(v, o.stream_spin_us) || o.stream_spin_us > 1'000'000)
                return U{"--stream-spin-us wants 0..1000000, got '" + v + "'"};
        } else if (a == "--sched") {
            o.sched_given = true;
            if (v == "fifo") {
                o.sched = Sched::Fifo;
            } else if (v == "nice") {
                o.sched = Sched::Nice;
            } else if (v == "none") {
                o.sched = Sched::None;
            } else {
                return U{"--sched wants fifo|nice|none, got '" + v + "'"};
            }
        } else if (a == "--idle-sleep-us") {
            if (!parse_u64(v, o.idle_sleep_max_us) || o.idle_sleep_max_us == 0 || o.idle_sleep_max_us > 1'000'000)
                return U{"--idle-sleep-us wants 1..1000000, got '" + v + "'"};
        } else {
            static const char* levels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
            bool ok = false;
            for (const char* l : levels) ok = ok || v == l;
            if (!ok) return U{"--log-level wants trace|debug|info|warn|error|critical|off, got '" + v + "'"};
            o.log_level = v;
        }
    }
    const bool eal_devices = port::eal_names_devices(o.eal_args);
    for (size_t i = 0; i < o.ports.size(); ++i) {
        PortOptions& p = o.ports[i];
        const std::string which = o.ports.size() > 1 ? " (port " + std::to_string(i) + ")" : "";
        if (p.iface.empty() && !eal_devices)
            return U{"--iface is required (or a device in the EAL arguments)" + which};
        if (!p.have_ip) return U{"--ip is required" + which};
        if (p.pcap.empty() && p.pcap_max_mb != 0) return U{"--pcap-max-mb needs --pcap" + which};
        if (p.name.empty()) p.name = "rnic" + std::to_string(i);
        for (size_t j = 0; j < i; ++j) {
            if (o.ports[j].name == p.name) return U{"two ports named '" + p.name + "' (--name)"};
            if (!p.iface.empty() && o.ports[j].iface == p.iface) return U{"two ports on '" + p.iface + "'"};
            if (!p.pcap.empty() && o.ports[j].pcap == p.pcap) return U{"two ports capture to '" + p.pcap + "'"};
        }
    }
    if (!o.sched_given) o.sched = o.busy_poll ? Sched::None : Sched::Fifo;
    for (const auto& [uid, spec] : user_specs) {
        host::server::UserLimits l = o.user_limits_default;
        for (size_t r = 0; r < spec.size(); ++r)
            if (spec[r]) l.max[r] = *spec[r];
        o.user_limits[uid] = l;
    }
    return o;
}

}  // namespace rnic::daemon
