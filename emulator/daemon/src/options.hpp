// rnicd's command line, parsed once before anything starts.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rnic/congestion/dcqcn_params.hpp"
#include "rnic/host/server/user_limits.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/expected.hpp"

namespace rnic::daemon {

// How the daemon asks the scheduler for the core (docs/daemon.md, "Polling policy").
enum class Sched : uint8_t { None, Nice, Fifo };
const char* to_string(Sched s);

inline constexpr uint64_t kDefaultSpinUs = 10;
inline constexpr uint64_t kDefaultStreamSpinUs = 10;
inline constexpr uint64_t kDefaultStreamNapUs = 20;
inline constexpr uint64_t kDefaultStreamLingerUs = 2000;
// The longest nap. Timed naps (no RX wake-up) bound the latency of a frame that arrives while
// asleep, so they stay short; when frames, doorbells and control messages all end a nap, the cap
// only bounds a missed wake-up and sets the idle cost (~0.2 % of a core per 100 naps/s here).
inline constexpr uint64_t kNapCapTimedUs = 2000;
inline constexpr uint64_t kNapCapWokenUs = 10000;

// One port: one device (rnic0, rnic1, ...) with its own addresses, GIDs, engine, control socket
// and capture, as each port of a dual-port ConnectX is a device of its own.
struct PortOptions {
    std::string iface;  // empty: the next device the EAL arguments name
    port::Ipv4Prefix ip;
    bool have_ip = false;
    std::vector<port::Ipv6Prefix> ip6;  // --ip6, in order; the link-local address is added by main
    std::optional<wire::MacAddr> mac;
    std::string name;  // empty until parse_options fills in rnic<index>
    std::string pcap;
    uint64_t pcap_max_mb = 0;  // 0: one file, never rotated
};

// One RNIC cache model (docs/transport.md): entries and ways; 0 entries turns it off.
struct CacheOption {
    uint32_t entries = 0;
    uint32_t ways = 1;
};

// Hardware-like sizes (a ConnectX keeps some hundreds of QP contexts and a few thousand
// translations on chip): on by default so `rnicctl cache` counts real hits and misses; a miss
// costs nothing unless --cache-miss-ns asks the daemon to behave like a slower NIC.
inline constexpr CacheOption kDefaultQpcCache{256, 4};
inline constexpr CacheOption kDefaultMptCache{256, 4};
inline constexpr CacheOption kDefaultMttCache{2048, 8};

// --cm-keepalive IDLE_MS/PROBE_MS/PROBES (docs/rdma_cm.md, "Peer liveness").
struct KeepaliveOption {
    uint32_t idle_ms = 5000;
    uint32_t probe_ms = 2000;
    uint32_t probes = 4;
};

// "DSCP=PRIO[,DSCP=PRIO...]" into `map` (DSCP 0..63, PRIO 0..7); the error names the bad entry
// and `map` is unchanged then.
std::optional<std::string> parse_dscp_priorities(std::string_view text, std::array<uint8_t, 64>& map);

struct Options {
    std::vector<PortOptions> ports;  // at least one after a successful parse
    KeepaliveOption cm_keepalive;
    // DCQCN and ECN (docs/congestion.md): every port's knobs, --cc NAME=VALUE, and the port rate
    // that is recovery's ceiling and the pacer's reference.
    cc::DcqcnParams congestion;
    uint32_t port_rate_mbps = 10'000;
    // --odp-timeout-ms: how long an on-demand access may stay pending before its QP goes to error.
    uint64_t odp_timeout_ms = 2000;
    // --dscp-prio: each DSCP's 802.1p priority (DCQCN's per-priority switches, PFC).
    std::array<uint8_t, 64> dscp_priority = transport::class_selector_priorities();
    CacheOption qpc_cache = kDefaultQpcCache;
    CacheOption mpt_cache = kDefaultMptCache;
    CacheOption mtt_cache = kDefaultMttCache;
    uint64_t cache_miss_ns = 0;  // processing time one miss costs (the engine delays its next frame)
    // Each port's RX and TX descriptors; the mbuf pool is sized from them (mbuf_pool_size).
    uint16_t rx_descriptors = 1024;
    uint16_t tx_descriptors = 1024;
    bool busy_poll = false;
    bool latency_trace = false;  // per-hop histograms (docs/benchmarks.md, "Where the time goes")
    uint64_t spin_us = kDefaultSpinUs;
    uint64_t stream_spin_us = kDefaultStreamSpinUs;  // the spin window while work streams in
    uint64_t stream_nap_us = kDefaultStreamNapUs;  // a timed nap in a stream, not woken by frames (0: none)
    uint64_t stream_linger_us = kDefaultStreamLingerUs;  // stream naps go on this long after the stream
    uint64_t idle_sleep_max_us = 0;  // 0: kNapCapWokenUs when frames wake the loop, else kNapCapTimedUs
    bool rx_wakeup = true;  // sleep on the port's RX wake-up (else timed naps only)
    bool ring_port = false;  // --iface ports on rnicd's own TPACKET ring, not DPDK's af_packet PMD
    Sched sched = Sched::Fifo;
    std::optional<int> home_cpu;  // the loop's core outside streams (docs/daemon.md, polling policy 8)
    bool sched_given = false;  // else fifo when adaptive, none with --busy-poll (a FIFO spinner
                               // would hold its core until RT throttling stops it)
    std::string log_level = "info";
    std::string run_dir;  // empty: $RNIC_RUN_DIR, else /run/rnic; each device's socket is <run_dir>/<name>.sock
    // The control sockets' mode and group (docs/daemon.md, "Users"): every user by default, as
    // Linux's uverbs devices.
    uint32_t socket_mode = 0666;
    std::optional<uint32_t> socket_gid;
    // --user-limit: caps per uid on each device; a uid's own entry inherits what it does not name
    // from the entry without a user.
    host::server::UserLimits user_limits_default;
    std::map<uint32_t, host::server::UserLimits> user_limits;
    std::vector<std::string> eal_args;
    bool help = false;
};

// The GID table has 16 entries (the Hello reply's): the IPv4 GID, link-local, and these.
inline constexpr size_t kMaxIp6 = 14;

const char* usage();

// Errors are messages for the user, printed before exiting with status 2.
wire::Expected<Options, std::string> parse_options(const std::vector<std::string>& args);

}  // namespace rnic::daemon
