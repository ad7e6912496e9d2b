#include "options.hpp"

#include <charconv>

namespace rnic::daemon {

const char* usage() {
    return "usage: rnicd --iface IF --ip A.B.C.D/NN [--mac MAC] [--pcap FILE [--pcap-max-mb N]]\n"
           "             [--busy-poll] [--idle-sleep-us N] [--log-level trace|debug|info|warn|error|off]\n"
           "             [--name NAME] [--run-dir DIR] [-- EAL arguments]\n"
           "  --iface IF        the port: DPDK af_packet on IF unless EAL arguments name a device\n"
           "                    (-- --vdev net_af_xdp0,iface=IF, -- -a 0000:03:00.0, ...)\n"
           "  --ip A/NN         the RNIC's IPv4 address; GID 0 is ::ffff:A\n"
           "  --mac MAC         the RNIC's MAC (default: the port's)\n"
           "  --pcap FILE       capture every RoCEv2 frame sent and received (ns timestamps)\n"
           "  --pcap-max-mb N   rotate to FILE.1, FILE.2, ... when a file reaches N MiB\n"
           "  --busy-poll       never sleep (lowest latency, one full core)\n"
           "  --idle-sleep-us N longest sleep when idle (default 2000)\n"
           "  --name NAME       device name (default rnic0)\n"
           "  --run-dir DIR     control socket directory (default $RNIC_RUN_DIR or /run/rnic)\n";
}

namespace {
bool parse_u64(const std::string& s, uint64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}
}  // namespace

wire::Expected<Options, std::string> parse_options(const std::vector<std::string>& args) {
    using U = wire::Unexpected<std::string>;
    Options o;
    bool have_ip = false;
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
        const bool takes_value = a == "--iface" || a == "--ip" || a == "--mac" || a == "--pcap" ||
                                 a == "--pcap-max-mb" || a == "--log-level" || a == "--idle-sleep-us" ||
                                 a == "--name" || a == "--run-dir";
        if (!takes_value) return U{"unknown option '" + a + "'"};
        if (i + 1 >= args.size()) return U{a + " needs a value"};
        const std::string& v = args[++i];
        if (a == "--iface") {
            o.iface = v;
        } else if (a == "--ip") {
            const auto p = port::parse_ipv4_prefix(v);
            if (!p || v.find('/') == std::string::npos) return U{"--ip wants A.B.C.D/NN, got '" + v + "'"};
            o.ip = *p;
            have_ip = true;
        } else if (a == "--mac") {
            o.mac = port::parse_mac(v);
            if (!o.mac) return U{"--mac wants aa:bb:cc:dd:ee:ff, got '" + v + "'"};
        } else if (a == "--name") {
            const bool sane = !v.empty() && v.size() < 32 && v.find('/') == std::string::npos && v[0] != '.';
            if (!sane) return U{"--name wants a device name (no '/', under 32 characters), got '" + v + "'"};
            o.name = v;
        } else if (a == "--run-dir") {
            if (v.empty()) return U{"--run-dir wants a directory"};
            o.run_dir = v;
        } else if (a == "--pcap") {
            o.pcap = v;
        } else if (a == "--pcap-max-mb") {
            if (!parse_u64(v, o.pcap_max_mb)) return U{"--pcap-max-mb wants a number, got '" + v + "'"};
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
    if (o.iface.empty() && o.eal_args.empty()) return U{"--iface is required (or a device in the EAL arguments)"};
    if (!have_ip) return U{"--ip is required"};
    if (o.pcap.empty() && o.pcap_max_mb != 0) return U{"--pcap-max-mb needs --pcap"};
    return o;
}

}  // namespace rnic::daemon
