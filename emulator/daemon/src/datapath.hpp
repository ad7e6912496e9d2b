// One turn of rnicd's poll loop over any PortIo: receive a burst, classify, hand each frame to
// ARP, ICMP, ICMPv6 (neighbour discovery, echo), the connection manager (RoCEv2 frames to QP 1,
// the GSI) or the engine (or count and drop it), run timers, let the engine fill the TX burst and
// the CM's MADs follow, send. No DPDK here, so the whole turn is tested over FakePort.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pause_receiver.hpp"
#include "rate_limit.hpp"
#include "rnic/cm/cm_service.hpp"
#include "rnic/port/arp.hpp"
#include "rnic/port/capture.hpp"
#include "rnic/port/classify.hpp"
#include "rnic/port/icmp_echo.hpp"
#include "rnic/port/neighbour_discovery.hpp"
#include "rnic/port/port_io.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/gid.hpp"

namespace rnic::daemon {

struct DatapathCounters {
    std::array<uint64_t, port::kFrameClassCount> rx_by_class{};
    uint64_t roce_rx = 0;
    uint64_t roce_tx = 0;
    uint64_t captured = 0;
    uint64_t polls = 0;
    uint64_t loopback_frames = 0;  // engine frames for our own MAC, fed back without the port
    uint64_t gsi_rx = 0;           // frames to QP 1 handed to the CM
    uint64_t gsi_tx = 0;           // the CM's MADs sent
    uint64_t gsi_bad = 0;          // frames to QP 1 that are no GSI frame (not a UD SEND, Q_Key, ICRC)
    uint64_t gsi_no_cm = 0;        // frames to QP 1 with no CM attached
    uint64_t gsi_unresolved = 0;   // MADs dropped: their neighbour never answered (the CM resends)
};

// What a neighbour lookup for the control path found.
enum class Neighbour : uint8_t { Resolved, Pending, Unreachable };

class Datapath {
public:
    static constexpr size_t kBurst = 32;

    // `self` holds every address the port answers for (main puts the link-local IPv6 address
    // first); the engine's GID table must be port::gid_table(self). `capture` may be null
    // (capture off). `realtime_offset_ns` turns the loop's monotonic clock into the wall-clock
    // time pcap timestamps want. `clock`, when given, stamps each captured TX frame with the time
    // it was built for the port (received frames carry their burst's time): without it a reply
    // would show the same instant as the request that caused it. Tests run on the loop's time.
    using Clock = uint64_t (*)() noexcept;
    Datapath(port::PortIo& io, transport::Engine& engine, port::HostAddress self, port::Capture* capture,
             int64_t realtime_offset_ns = 0, Clock clock = nullptr);

    void start(uint64_t now_ns);   // gratuitous ARP, unsolicited neighbour advertisements
    size_t poll(uint64_t now_ns);  // frames received + frames the engine sent
    std::optional<uint64_t> next_deadline() const;

    // The device's connection manager: frames to QP 1 go to it, its MADs out through the port
    // (their MACs from resolve()), its timers run every turn. Not owned; null: QP 1 frames are
    // counted and dropped.
    void set_cm(cm::CmService* cm) noexcept { cm_ = cm; }

    // The MAC for an address vector's destination GID: our own MAC for our own addresses (the
    // loopback path), else ARP for IPv4-mapped GIDs and neighbour discovery for IPv6 ones (a
    // request goes out at once when nothing is known). Off-link addresses are Unreachable: no
    // routing yet.
    Neighbour resolve(const wire::Gid& dgid, uint64_t now_ns, wire::MacAddr& mac);

    const DatapathCounters& counters() const noexcept { return counters_; }
    const port::ArpAgent& arp() const noexcept { return arp_; }
    port::ArpAgent& arp() noexcept { return arp_; }
    const port::NdAgent& nd() const noexcept { return nd_; }
    port::NdAgent& nd() noexcept { return nd_; }
    const port::IcmpCounters& icmp() const noexcept { return icmp_; }
    const port::IcmpCounters& icmp6() const noexcept { return icmp6_; }
    const PauseReceiver& pause() const noexcept { return pause_; }
    // Every counter of the port, classes, ARP and ICMP by name (the Stats op).
    std::vector<std::pair<std::string, uint64_t>> counter_list() const;
    // "name=value ..." of every counter that is not zero, for the log.
    std::string summary() const;

private:
    // Puts each frame the engine builds into the capture as well; used only when capture is on,
    // so with capture off the engine writes straight into the port.
    class CaptureTap final : public transport::FrameSink {
    public:
        CaptureTap(Datapath& dp) : dp_(dp) {}
        std::span<uint8_t> allocate(size_t length) override { return dp_.io_.tx().allocate(length); }
        void commit(size_t length) override;

    private:
        Datapath& dp_;
    };

    // The engine's frames go through this: a frame for our own MAC is kept for the next turn's
    // receive instead of the port (which never delivers our own TX to our RX), so a QP can
    // talk to another QP of this daemon.
    class LoopbackSink final : public transport::FrameSink {
    public:
        LoopbackSink(Datapath& dp) : dp_(dp) {}
        std::span<uint8_t> allocate(size_t length) override;
        void commit(size_t length) override;

    private:
        Datapath& dp_;
        std::span<uint8_t> pending_;
    };

    void capture(std::span<const uint8_t> frame, uint64_t at_ns);
    void warn_malformed(port::FrameClass c, size_t length);
    void warn_icmp(const char* family, const char* what);
    // A RoCEv2 frame the engine dropped or NAKed: one rate-limited line (the counters have it all).
    void warn_roce(const transport::RxResult& r, size_t length);
    void receive_icmp(std::span<const uint8_t> frame);
    void receive_icmp6(std::span<const uint8_t> frame, uint64_t now_ns);
    // A RoCEv2 frame for us, from the port or looped back: QP 1's to the CM, the rest to the engine.
    void receive_roce(std::span<const uint8_t> frame, uint64_t now_ns);
    void receive_gsi(std::span<const uint8_t> frame, uint64_t now_ns);
    // The CM's queued MADs into frames; those whose neighbour is being resolved wait (a while).
    void send_cm_mads(uint64_t now_ns);
    bool send_mad(const cm::OutboundMad& m, const wire::MacAddr& dst_mac);
    // Both families: our own address, off-link or failed, cached, or a request out.
    template <class Agent, class Addr>
    Neighbour lookup(Agent& agent, const Addr& addr, bool own, bool on_link, uint64_t now_ns, wire::MacAddr& mac);

    port::PortIo& io_;
    transport::Engine& engine_;
    port::HostAddress self_;
    port::Capture* capture_;
    int64_t realtime_offset_ns_;
    Clock clock_;
    port::ArpAgent arp_;
    port::NdAgent nd_;
    port::IcmpCounters icmp_;
    port::IcmpCounters icmp6_;
    PauseReceiver pause_;
    RateLimit pause_log_;
    CaptureTap tap_{*this};
    LoopbackSink loopback_sink_{*this};
    std::vector<std::vector<uint8_t>> loopback_;  // frames waiting for the next turn
    std::vector<std::vector<uint8_t>> loopback_receiving_;
    std::vector<std::vector<uint8_t>> loopback_spare_;
    DatapathCounters counters_;
    uint64_t now_ = 0;
    RateLimit malformed_log_;
    RateLimit icmp_log_;
    RateLimit roce_log_;
    RateLimit capture_log_;
    std::array<port::RxFrame, kBurst> rx_{};
    cm::CmService* cm_ = nullptr;
    struct WaitingMad {
        cm::OutboundMad mad;
        uint64_t since_ns = 0;
    };
    std::deque<WaitingMad> cm_waiting_;  // MADs whose neighbour is being resolved
    uint32_t gsi_psn_ = 0;               // QP 1's send PSN, counting from 0 as rxe's does
    uint16_t gsi_ip_id_ = 0;
    RateLimit gsi_log_;
};

}  // namespace rnic::daemon
