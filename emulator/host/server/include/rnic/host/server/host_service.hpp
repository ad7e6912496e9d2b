// The daemon side of the host interface (docs/host_interface.md): the control server on a Unix
// SOCK_SEQPACKET socket, one session per connection with its objects, the shared-memory rings,
// and the data-path service rnicd's poll loop runs every turn (doorbells -> engine, engine
// completions and events -> rings). Single-threaded: everything, Asio handlers included, runs on
// the poll loop's thread.
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rnic/cm/cm_service.hpp"
#include "rnic/common/latency_histogram.hpp"
#include "rnic/host/abi/control.hpp"
#include "rnic/host/server/pinned_pages.hpp"
#include "rnic/host/server/user_limits.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"

namespace rnic::host::server {

enum class Resolution : uint8_t { Resolved, Pending, Unreachable };

// Why a nap ended: Skipped (work was already waiting), Kick (a client's doorbell), Wake (the
// wake fd: a frame), Control (a control message was served), Timer (the nap's length).
enum class NapEnd : uint8_t { Skipped, Kick, Wake, Control, Timer };

// Neighbour lookup for an address vector's destination GID (ARP for IPv4-mapped GIDs, neighbour
// discovery for IPv6 ones, in rnicd): Resolved fills `mac`; Pending means ask again on a later
// turn.
using Resolver = std::function<Resolution(const wire::Gid& dgid, uint64_t now_ns, wire::MacAddr& mac)>;
// Counters of the parts the service does not own (datapath, ARP, ICMP), for the Stats op.
using CounterSource = std::function<std::vector<std::pair<std::string, uint64_t>>()>;
// Latency histograms of the parts the service does not own (the poll loop's hops), by name.
using HistogramList = std::vector<std::pair<std::string, const common::LatencyHistogram*>>;
using HistogramSource = std::function<HistogramList()>;

struct ServerConfig {
    std::string name = "rnic0";
    std::string run_dir;  // where <name>.sock lives; created if missing
    wire::MacAddr mac{};
    uint32_t ipv4 = 0;  // host order
    uint8_t prefix_length = 24;
    std::vector<std::string> ipv6;  // "addr/len", link-local first: for Stats (the GIDs are the engine's)
    uint32_t ethernet_mtu = 1500;
    uint32_t link_speed_mbps = 0;  // 0: unknown (reported as 1 Gb/s, as Linux does)
    uint32_t async_ring_entries = 256;
    // The socket file's mode and group (none: the daemon's). Every user may open Linux's uverbs
    // devices (the kernel creates /dev/infiniband/uverbs* 0666), so the default lets every user
    // connect; a run directory the service creates is made 0755 so they can reach the socket.
    uint32_t socket_mode = 0666;
    std::optional<uint32_t> socket_gid;
    // Per-uid caps on this device (docs/host_interface.md, "Isolation"): every uid without an
    // entry of its own gets `user_limits_default`.
    UserLimits user_limits_default;
    std::map<uint32_t, UserLimits> user_limits;
    // Registered pages per client process; share one between the services of one daemon (a
    // process's RLIMIT_MEMLOCK covers its registrations on every device). Null: a ledger of its own.
    std::shared_ptr<PinnedPages> pinned_pages;
    // The CM's probes of silent peers with connections (docs/rdma_cm.md, "Peer liveness"): idle
    // ms before the first, ms between probes, how many unanswered end the connections; idle 0: off.
    uint32_t cm_keepalive_idle_ms = 5000;
    uint32_t cm_keepalive_probe_ms = 2000;
    uint32_t cm_keepalive_probes = 4;
};

// The run directory rnicd uses without --run-dir: $RNIC_RUN_DIR, else /run/rnic.
std::string default_run_dir();

class HostService {
public:
    HostService(boost::asio::io_context& io, transport::Engine& engine, ServerConfig config, Resolver resolver,
                CounterSource counters = {});
    ~HostService();
    HostService(const HostService&) = delete;
    HostService& operator=(const HostService&) = delete;

    // Creates the run directory and listens. Throws std::runtime_error (another live daemon on
    // the socket, no permission, ...): a set-up failure.
    void start();

    // One data-path turn: new WQEs to the engine, engine completions to CQ rings (and their
    // channels), engine async events to their sessions, deferred replies whose neighbour is now
    // known. Returns how much work it found (0: nothing changed).
    size_t poll(uint64_t now_ns);

    // Runs ready control handlers without blocking, at most kControlHandlersPerPoll of them (one
    // message of one session each), so a client flooding the socket cannot hold the loop.
    static constexpr size_t kControlHandlersPerPoll = 64;
    void poll_control();

    // The loop is idle: sleep at most `max_ns` inside Asio, woken by a control message, a
    // session's kick eventfd or the wake fd, following the status page's sleeping protocol so no
    // doorbell is lost. In three steps, so the loop can take a last look at its port in between:
    // begin_nap() advertises the nap and scans the doorbells once more (false: work is waiting,
    // no nap); then either cancel_nap() (the last look found work) or nap().
    bool begin_nap();
    void cancel_nap();
    // `wake_on_rx` false: the port's wake fd does not end this nap (a timed nap inside a stream).
    NapEnd nap(uint64_t max_ns, bool wake_on_rx = true);
    // One nap for several services on the same io_context (rnicd with several ports, a device
    // each): ends when any of them is woken or after `max_ns`. begin_nap() must have returned
    // true for each. Returns the most telling reason over all: a kick, a frame, a control message.
    static NapEnd nap_all(std::span<HostService* const> services, uint64_t max_ns, bool wake_on_rx = true);
    // begin_nap() and nap() without a last look.
    NapEnd sleep(uint64_t max_ns);

    // A file descriptor whose readability also ends a nap (the port's RX wake-up); not owned,
    // must stay open until shutdown() or set_wake_fd(-1).
    void set_wake_fd(int fd);

    // SIGTERM: shutting_down, IBV_EVENT_DEVICE_FATAL to every session, every QP to ERR with its
    // flush completions delivered, sessions closed and reclaimed, socket file removed.
    void shutdown(uint64_t now_ns);

    // The Stats document as uid 0 sees it (abi::StatsRequest: `what`, and where the page of the
    // QP list starts).
    std::string stats_json(uint32_t what = abi::kStatsAll, uint32_t first_qpn = 0) const;
    std::string socket_path() const;
    size_t session_count() const;
    const abi::StatusPage& status() const;

    // Latency tracing (docs/benchmarks.md, "Where the time goes"). On: the status page asks
    // clients to stamp their doorbells and kicks, and the service records how long a doorbell
    // took to be seen. `histograms` adds the poll loop's hops to the Stats document.
    void set_latency_trace(bool on);
    bool latency_trace() const noexcept;
    void set_histogram_source(HistogramSource histograms);
    // What the turns did so far (the poll loop's hop accounting compares them around a turn).
    struct Activity {
        uint64_t wqes_posted = 0;
        uint64_t cqes_delivered = 0;
    };
    Activity activity() const noexcept;
    // After a nap a kick ended: the earliest kick stamp a session left at or after `since_ns`
    // (older ones are kicks that woke nothing: taken and dropped), and the CPU it came from.
    struct KickStamp {
        uint64_t ns = 0;
        uint32_t cpu = UINT32_MAX;
    };
    std::optional<KickStamp> take_kick_stamp(uint64_t since_ns);
    // The CPU the client whose kick ended the last nap kicked from, as it says (UINT32_MAX:
    // unknown, or no kick ended it).
    uint32_t last_kick_cpu() const noexcept;

    // The device's connection manager (rdma_cm's ids and channels are the sessions'); the poll
    // loop's datapath feeds it QP 1's frames and sends its MADs.
    cm::CmService& cm() noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace rnic::host::server
