#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "datapath.hpp"
#include "frames.hpp"
#include "idle_policy.hpp"
#include "options.hpp"
#include "pcap_file.hpp"
#include "rate_limit.hpp"
#include "rnic/port/eal_arguments.hpp"
#include "rnic/port/fake_port.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic;
using namespace rnic::port::test;
using port::Ipv6Addr;
using port::kAllNodes;
using port::multicast_mac;
using port::parse_ipv6_prefix;

namespace {
Ipv6Addr parse_ipv6_prefix_or_die(const char* text) {
    const auto p = port::parse_ipv6_prefix(text);
    REQUIRE(p);
    return p->addr;
}

transport::EngineConfig engine_config() {
    transport::EngineConfig c;
    c.mac = kSelf.mac;
    c.gids = port::gid_table(kSelf);
    return c;
}

// RESET -> INIT -> RTR -> RTS towards `dest` at `dgid`/`dmac`.
void connect_rc(transport::Engine& engine, uint32_t qpn, uint32_t dest, const wire::Gid& dgid, uint8_t sgid,
                const wire::MacAddr& dmac) {
    using namespace rnic::transport;
    QpAttributes attr;
    attr.qp_state = QpState::Init;
    REQUIRE(engine.modify_qp(qpn, attr, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) == 0);
    attr.qp_state = QpState::Rtr;
    attr.dest_qp_num = dest;
    attr.ah_attr.dgid = dgid;
    attr.ah_attr.sgid_index = sgid;
    attr.ah_attr.dmac = dmac;
    attr.max_dest_rd_atomic = 1;
    REQUIRE(engine.modify_qp(qpn, attr,
                             QpAttr::State | QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn |
                                 QpAttr::MaxDestRdAtomic | QpAttr::MinRnrTimer) == 0);
    attr.qp_state = QpState::Rts;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    REQUIRE(engine.modify_qp(qpn, attr,
                             QpAttr::State | QpAttr::SqPsn | QpAttr::Timeout | QpAttr::RetryCnt | QpAttr::RnrRetry |
                                 QpAttr::MaxQpRdAtomic) == 0);
}
}  // namespace

TEST_CASE("datapath: start announces us, ARP and ping are answered, strangers are counted", "[datapath]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    dp.start(0);
    REQUIRE(io.sent().size() == 3);  // gratuitous ARP, an unsolicited NA per IPv6 address
    CHECK(port::parse_arp(io.sent()[0])->target_ip == kSelf.ipv4);
    CHECK(io.sent()[1][14 + 40] == 136);
    CHECK(io.sent()[2][14 + 40] == 136);
    io.sent().erase(io.sent().begin() + 1, io.sent().end());

    io.inject(arp_frame(1, kPeerMac, kPeerIp, kSelf.ipv4));
    io.inject(echo_request(56));
    io.inject(ipv4_frame(17, 24, kPeerMac));
    io.inject(ipv4_frame(6, 40));
    io.inject({1, 2, 3});
    CHECK(dp.poll(1000) == 5);
    REQUIRE(io.sent().size() == 3);
    CHECK(port::parse_arp(io.sent()[1])->op == 2);
    CHECK(io.sent()[2][34] == 0);  // echo reply
    const auto& c = dp.counters();
    using port::FrameClass;
    CHECK(c.rx_by_class[size_t(FrameClass::Arp)] == 1);
    CHECK(c.rx_by_class[size_t(FrameClass::IcmpForUs)] == 1);
    CHECK(c.rx_by_class[size_t(FrameClass::NotForUs)] == 1);
    CHECK(c.rx_by_class[size_t(FrameClass::OtherForUs)] == 1);
    CHECK(c.rx_by_class[size_t(FrameClass::Malformed)] == 1);
    CHECK(dp.summary().find("icmp_echo_replies=1") != std::string::npos);
    CHECK(dp.poll(2000) == 0);  // idle turn: nothing in, nothing out
    // Five frames came in one burst, the two answers left in one: what a sendto() is shared by.
    const auto counter = [&](const std::string& name) {
        for (const auto& [n, v] : dp.counter_list())
            if (n == name) return v;
        FAIL("no counter " << name);
        return uint64_t{0};
    };
    CHECK(counter("port_rx_frames") == 5);
    CHECK(counter("port_rx_bursts") == 1);
    CHECK(counter("port_tx_bursts") == 2);  // start()'s announcements, then the answers
}

TEST_CASE("datapath: RoCEv2 for us reaches the engine and the capture", "[datapath]") {
    const auto dir = std::filesystem::temp_directory_path() / ("rnic_dp_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = dir / "dp.pcap";
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    {
        port::Capture cap(path, 0);
        daemon::Datapath dp(io, engine, kSelf, &cap, 1'000'000'000);
        for (int i = 0; i < 40; ++i) io.inject(ipv4_frame(17, 8 + 12 + 4 + 8));  // more than one burst
        CHECK(dp.poll(5) == daemon::Datapath::kBurst);
        CHECK(dp.poll(6) == 40 - daemon::Datapath::kBurst);
        CHECK(dp.counters().roce_rx == 40);
        CHECK(dp.counters().captured == 40);
        CHECK(engine.device_counters().rx_frames == 40);
        cap.flush();
    }
    const auto frames = tools::read_all_frames(path);
    REQUIRE(frames.size() == 40);
    CHECK(frames[0].timestamp_ns == 1'000'000'005);
    std::filesystem::remove_all(dir);
}

namespace {
uint64_t g_fake_clock_ns = 0;
uint64_t fake_clock() noexcept { return g_fake_clock_ns; }
}  // namespace

TEST_CASE("datapath: captured TX frames carry the time they were built, RX frames their burst's", "[datapath]") {
    using namespace rnic::transport;
    const auto dir = std::filesystem::temp_directory_path() / ("rnic_txts_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = dir / "tx.pcap";
    port::FakePort io(kSelf.mac);
    Engine engine(engine_config());
    std::vector<uint8_t> memory(64);
    {
        port::Capture cap(path, 0);
        daemon::Datapath dp(io, engine, kSelf, &cap, 0, fake_clock);
        const uint32_t pd = *engine.alloc_pd();
        const MrInfo mr =
            *engine.reg_mr(pd, memory.data(), memory.size(), reinterpret_cast<uint64_t>(memory.data()), 1);
        const uint32_t cq = *engine.create_cq(16);
        QpInitAttr init;
        init.pd = pd;
        init.send_cq = init.recv_cq = cq;
        init.cap = {4, 4, 1, 1, 0};
        const uint32_t qpn = engine.create_qp(init)->qpn;
        connect_rc(engine, qpn, 0x11, wire::Gid::from_ipv4(kPeerIp), 0, kPeerMac);
        SendWr wr;
        wr.wr_id = 1;
        wr.send_flags = SendFlag::Signaled;
        wr.sg_list = {{reinterpret_cast<uint64_t>(memory.data()), 16, mr.lkey}};
        REQUIRE(engine.post_send(qpn, wr) == 0);
        io.inject(ipv4_frame(17, 8 + 12 + 4 + 8));
        g_fake_clock_ns = 7'654'321;  // later than the turn's start: building took time
        dp.poll(5'000'000);
        cap.flush();
    }
    const auto frames = tools::read_all_frames(path);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].timestamp_ns == 5'000'000);  // received: the burst's time
    CHECK(frames[1].timestamp_ns == 7'654'321);  // sent: the clock when the engine built it
    CHECK(wire::parse_frame(frames[1].bytes)->bth.opcode == wire::op::kRcSendOnly);
    std::filesystem::remove_all(dir);
}

TEST_CASE("datapath: RoCEv2 frames the engine drops are logged, rate-limited, and counted all the same", "[datapath]") {
    // The daemon's default logger, captured: what an operator would read.
    std::ostringstream log;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
    auto previous = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    // A flood: 200 frames that are RoCEv2 by address and port and fail the engine's checks.
    for (int i = 0; i < 200; ++i) io.inject(ipv4_frame(17, 8 + 12 + 4 + 8));
    for (int turn = 0; turn < 10; ++turn) dp.poll(1'000 + turn);
    const std::string first = log.str();
    const auto lines = std::count(first.begin(), first.end(), '\n');
    CHECK(lines == 10);  // the burst, then nothing more within the same second
    CHECK(first.find("RoCEv2 frame") != std::string::npos);
    CHECK(engine.device_counters().rx_frames == 200);  // every frame counted, logged or not
    // A second later the next line reports what was held back.
    io.inject(ipv4_frame(17, 8 + 12 + 4 + 8));
    dp.poll(2'000'000'000);
    CHECK(log.str().find("(190 similar lines suppressed)") != std::string::npos);
    spdlog::set_default_logger(previous);
}

TEST_CASE("idle policy: spin while busy, then sleep longer and longer, never past a deadline", "[datapath]") {
    daemon::IdlePolicy idle({.busy_poll = false, .spin_ns = 1000, .min_sleep_ns = 10, .max_sleep_ns = 40});
    CHECK(idle.after_poll(1, 100, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 500, std::nullopt) == 0);  // within the spin window
    CHECK(idle.after_poll(0, 1200, std::nullopt) == 10);
    CHECK(idle.after_poll(0, 1300, std::nullopt) == 20);
    CHECK(idle.after_poll(0, 1400, std::nullopt) == 40);
    CHECK(idle.after_poll(0, 1500, std::nullopt) == 40);
    CHECK(idle.after_poll(0, 1600, 1605) == 5);
    CHECK(idle.after_poll(0, 1700, 1600) == 0);  // a timer is due: poll now
    CHECK(idle.after_poll(1, 1800, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 2900, std::nullopt) == 10);  // back to short naps after work
    daemon::IdlePolicy busy({.busy_poll = true});
    CHECK(busy.after_poll(0, 1'000'000'000'000, std::nullopt) == 0);
}

TEST_CASE("idle policy: woken by frames a nap goes straight to the cap and a last look restarts the spin", "[datapath]") {
    daemon::IdlePolicy idle(
        {.busy_poll = false, .spin_ns = 1000, .min_sleep_ns = 10, .max_sleep_ns = 40, .wake_on_rx = true});
    CHECK(idle.after_poll(1, 100, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 1200, std::nullopt) == 40);
    CHECK(idle.after_poll(0, 1300, 1310) == 10);  // still never past a timer
    idle.note_work(2000);
    CHECK(idle.after_poll(0, 2500, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 3000, std::nullopt) == 40);
    daemon::IdlePolicy no_spin({.busy_poll = false, .spin_ns = 0, .max_sleep_ns = 40, .wake_on_rx = true});
    CHECK(no_spin.after_poll(1, 100, std::nullopt) == 0);
    CHECK(no_spin.after_poll(0, 100, std::nullopt) == 40);  // the first idle turn sleeps
}

TEST_CASE("idle policy: while work streams in, the spin window and the nap follow the stream settings", "[datapath]") {
    daemon::IdlePolicy idle({.busy_poll = false,
                             .spin_ns = 1000,
                             .max_sleep_ns = 40'000,
                             .wake_on_rx = true,
                             .stream_spin_ns = 5000,
                             .stream_nap_ns = 300,
                             .stream_window_ns = 100'000,
                             .stream_work = 32});
    // A ping-pong: a little work now and then is no stream; ordinary spin, ordinary (woken) nap.
    CHECK(idle.after_poll(2, 1'000, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 2'500, std::nullopt) == 40'000);
    CHECK_FALSE(idle.stream_nap());
    // 40 items within a window: a stream. The spin window grows, then the nap is short and timed.
    for (uint64_t t = 10'000; t < 14'000; t += 100) CHECK(idle.after_poll(1, t, std::nullopt) == 0);
    CHECK(idle.streaming(14'000));
    CHECK(idle.after_poll(0, 16'000, std::nullopt) == 0);  // 2 us after the last work: still spinning
    CHECK(idle.after_poll(0, 19'100, std::nullopt) == 300);
    CHECK(idle.stream_nap());
    CHECK(idle.after_poll(0, 19'200, 19'250) == 50);  // never past a timer
    // The stream counts over the previous window too, then fades: two windows later it is gone.
    CHECK(idle.streaming(150'000));
    CHECK_FALSE(idle.streaming(200'000));
    CHECK(idle.after_poll(0, 250'000, std::nullopt) == 40'000);
    CHECK_FALSE(idle.stream_nap());
    // stream_work 0 turns the stream test off.
    daemon::IdlePolicy never({.busy_poll = false, .spin_ns = 1000, .max_sleep_ns = 40, .stream_work = 0});
    for (uint64_t t = 0; t < 1000; t += 10) never.after_poll(5, t, std::nullopt);
    CHECK_FALSE(never.streaming(1000));
}

namespace {
// `items` of work found on every turn from `from` to `to` (exclusive), `step` ns apart: no nap.
void feed(daemon::IdlePolicy& idle, uint64_t from, uint64_t to, uint64_t step, size_t items) {
    for (uint64_t t = from; t < to; t += step) CHECK(idle.after_poll(items, t, std::nullopt) == 0);
}
}  // namespace

TEST_CASE("idle policy: naps stay stream naps for the linger after a stream, then frames end them again", "[datapath]") {
    const daemon::IdlePolicy::Config config{.busy_poll = false,
                                            .spin_ns = 1000,
                                            .max_sleep_ns = 40'000,
                                            .wake_on_rx = true,
                                            .stream_spin_ns = 5000,
                                            .stream_nap_ns = 300,
                                            .stream_window_ns = 100'000,
                                            .stream_work = 32,
                                            .stream_linger_ns = 1'000'000,
                                            .stream_linger_work = 128};
    daemon::IdlePolicy idle(config);
    // 200 items in 200 us: a stream, and at a stream's pace over the linger's window.
    feed(idle, 10'000, 210'000, 1000, 1);
    CHECK(idle.after_poll(0, 215'000, std::nullopt) == 300);
    CHECK(idle.stream_nap());
    // Two windows later the stream has faded, but the linger (from the nap at 215,000) holds, even
    // across a little work: a dip in a stream must not arm the wake-up.
    CHECK_FALSE(idle.streaming(400'000));
    CHECK(idle.lingering(400'000));
    CHECK(idle.after_poll(0, 400'000, std::nullopt) == 300);
    CHECK(idle.stream_nap());
    CHECK(idle.after_poll(3, 600'000, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 602'000, std::nullopt) == 300);
    CHECK(idle.after_poll(0, 1'214'000, std::nullopt) == 300);
    // Past it: an ordinary nap, woken by frames, at the cap.
    CHECK(idle.after_poll(0, 1'215'100, std::nullopt) == 40'000);
    CHECK_FALSE(idle.stream_nap());

    // A burst of 40 items is a stream for its two windows, but not a stream's pace over the
    // linger's window: no linger after it. A client posting such bursts now and then cannot hold
    // the other clients' doorbells to the stream nap.
    daemon::IdlePolicy bursts(config);
    feed(bursts, 10'000, 14'000, 100, 1);
    CHECK(bursts.after_poll(0, 19'100, std::nullopt) == 300);
    CHECK(bursts.stream_nap());
    CHECK_FALSE(bursts.streaming(250'000));
    CHECK_FALSE(bursts.lingering(250'000));
    CHECK(bursts.after_poll(0, 250'000, std::nullopt) == 40'000);
    CHECK_FALSE(bursts.stream_nap());

    // Linger 0: the stream ends with its windows, as before the linger.
    auto no_linger = config;
    no_linger.stream_linger_ns = 0;
    daemon::IdlePolicy plain(no_linger);
    feed(plain, 10'000, 210'000, 500, 2);
    CHECK(plain.after_poll(0, 215'000, std::nullopt) == 300);
    CHECK_FALSE(plain.lingering(400'000));
    CHECK(plain.after_poll(0, 400'000, std::nullopt) == 40'000);
}

TEST_CASE("idle policy: a kick from the loop's own core stops the spin for a while, one from another core at once", "[datapath]") {
    daemon::IdlePolicy idle({.busy_poll = false,
                             .spin_ns = 10'000,
                             .max_sleep_ns = 40'000,
                             .wake_on_rx = true,
                             .stream_spin_ns = 10'000,
                             .stream_window_ns = 100'000,
                             .stream_work = 32,
                             .colocated_ns = 2'000'000});
    CHECK(idle.after_poll(1, 1'000, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 2'000, std::nullopt) == 0);  // spinning for the next doorbell
    // The application that kicked runs on our core: it cannot post while we spin.
    idle.note_kick(3'000, true);
    CHECK(idle.colocated(3'000));
    CHECK(idle.after_poll(1, 3'500, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 3'600, std::nullopt) == 40'000);  // no spin: sleep at once
    // Even in a stream.
    for (uint64_t t = 10'000; t < 14'000; t += 100) idle.after_poll(1, t, std::nullopt);
    CHECK(idle.streaming(14'000));
    CHECK(idle.after_poll(0, 14'100, std::nullopt) > 0);
    // It wears off, and a kick from another core ends it at once.
    CHECK_FALSE(idle.colocated(3'000 + 2'000'000));
    idle.note_kick(20'000, true);
    idle.note_kick(21'000, false);
    CHECK_FALSE(idle.colocated(21'000));
    CHECK(idle.after_poll(1, 22'000, std::nullopt) == 0);
    CHECK(idle.after_poll(0, 23'000, std::nullopt) == 0);  // spinning again
}

TEST_CASE("rate limit: a burst passes, then a steady trickle, and the rest is counted", "[datapath]") {
    daemon::RateLimit rl(10, 3);
    const uint64_t t0 = 5'000'000'000;
    int allowed = 0;
    for (int i = 0; i < 100; ++i) allowed += rl.allow(t0);
    CHECK(allowed == 3);
    CHECK(rl.allow(t0 + 100'000'000));
    CHECK(rl.suppressed() == 97);
    CHECK_FALSE(rl.allow(t0 + 150'000'000));
}

TEST_CASE("options: rnicd's command line", "[datapath]") {
    auto ok = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--pcap", "x.pcap", "--pcap-max-mb",
                                     "8", "--busy-poll", "--mac", "02:00:00:00:00:01", "--", "--vdev", "net_tap0"});
    REQUIRE(ok);
    REQUIRE(ok->ports.size() == 1);
    CHECK(ok->ports[0].iface == "veth0");
    CHECK(ok->ports[0].ip.addr == 0x0A000001);
    CHECK(ok->ports[0].ip.length == 24);
    CHECK(ok->ports[0].pcap_max_mb == 8);
    CHECK(ok->busy_poll);
    CHECK(ok->eal_args == std::vector<std::string>{"--vdev", "net_tap0"});
    CHECK(ok->sched == daemon::Sched::None);  // a FIFO spinner would own its core
    CHECK(ok->spin_us == daemon::kDefaultSpinUs);
    CHECK(ok->rx_wakeup);
    auto tuned = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--spin-us", "0", "--sched", "nice",
                                        "--no-rx-wakeup", "--idle-sleep-us", "500", "--stream-linger-us", "0"});
    REQUIRE(tuned);
    CHECK(tuned->spin_us == 0);
    CHECK(tuned->stream_linger_us == 0);
    CHECK(ok->stream_linger_us == daemon::kDefaultStreamLingerUs);
    CHECK(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--stream-linger-us", "1000001"}).error() ==
          "--stream-linger-us wants 0..1000000, got '1000001'");
    CHECK(tuned->sched == daemon::Sched::Nice);
    CHECK_FALSE(tuned->rx_wakeup);
    CHECK(tuned->idle_sleep_max_us == 500);
    auto plain = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24"});
    REQUIRE(plain);
    CHECK_FALSE(plain->home_cpu);
    auto homed = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--home-cpu", "1"});
    REQUIRE(homed);
    CHECK(homed->home_cpu == 1);
    for (const char* bad : {"-1", "1024", "x", ""})
        CHECK(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--home-cpu", bad}).error() ==
              std::string("--home-cpu wants a CPU number 0..1023, got '") + bad + "'");
    CHECK(plain->sched == daemon::Sched::Fifo);
    CHECK(plain->idle_sleep_max_us == 0);  // chosen by mode at start
    CHECK(plain->cm_keepalive.idle_ms == 5000);
    CHECK(plain->cm_keepalive.probes == 4);
    auto keepalive = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--cm-keepalive", "500/200/3"});
    REQUIRE(keepalive);
    CHECK(keepalive->cm_keepalive.idle_ms == 500);
    CHECK(keepalive->cm_keepalive.probe_ms == 200);
    CHECK(keepalive->cm_keepalive.probes == 3);
    auto no_keepalive = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--cm-keepalive", "0"});
    REQUIRE(no_keepalive);
    CHECK(no_keepalive->cm_keepalive.idle_ms == 0);
    for (const char* bad : {"500/200", "5/200/3", "500/200/0", "500/200/3/1", "a/b/c", ""})
        CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--cm-keepalive", bad}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--sched", "rr"}));
    auto congestion = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--cc", "rp_ai_rate=40", "--cc",
                                             "ecn_ect=0", "--port-rate", "25000"});
    REQUIRE(congestion);
    CHECK(congestion->congestion.rp_ai_rate == 40);
    CHECK(congestion->congestion.ecn_ect == 0);
    CHECK(congestion->port_rate_mbps == 25000);
    CHECK(plain->congestion.rp_ai_rate == 5);
    for (const char* bad : {"rp_ai_rate", "rp_bogus=1", "rp_gd=3", "np_cnp_dscp=64"}) {
        const auto refused = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--cc", bad});
        REQUIRE_FALSE(refused);
        CHECK(refused.error().find("--cc") != std::string::npos);
    }
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--port-rate", "0"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--spin-us", "-1"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--bogus"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--log-level", "loud"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--pcap-max-mb", "3"}));
    CHECK_FALSE(daemon::parse_options({"--iface"}));
    auto named =
        daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--name", "rnic1", "--run-dir", "/tmp/r"});
    REQUIRE(named);
    CHECK(named->ports[0].name == "rnic1");
    CHECK(named->run_dir == "/tmp/r");
    CHECK(ok->ports[0].name == "rnic0");
    CHECK(ok->run_dir.empty());
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--name", "a/b"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--run-dir", ""}));
    // --ip6, repeatable, with a prefix length; at most kMaxIp6 of them.
    auto v6 = daemon::parse_options(
        {"--iface", "veth0", "--ip", "10.0.0.1/24", "--ip6", "fd77::1/64", "--ip6", "2001:db8::5/48"});
    REQUIRE(v6);
    REQUIRE(v6->ports[0].ip6.size() == 2);
    CHECK(port::ipv6_to_string(v6->ports[0].ip6[0].addr) == "fd77::1");
    CHECK(v6->ports[0].ip6[1].length == 48);
    for (const char* bad : {"fd77::1", "ff02::1/64", "fd77::1/129", "10.0.0.1/24"})
        CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--ip6", bad}));
    std::vector<std::string> many{"--iface", "veth0", "--ip", "10.0.0.1/24"};
    for (size_t i = 0; i <= daemon::kMaxIp6; ++i) {
        many.push_back("--ip6");
        many.push_back("fd77::" + std::to_string(i + 1) + "/64");
    }
    CHECK_FALSE(daemon::parse_options(many));
    many.resize(many.size() - 2);
    CHECK(daemon::parse_options(many));
}

TEST_CASE("options: the sockets' mode and group, per-user limits", "[datapath]") {
    using host::server::Resource;
    const std::vector<std::string> port{"--iface", "veth0", "--ip", "10.0.0.1/24"};
    auto with = [&](std::vector<std::string> extra) {
        extra.insert(extra.begin(), port.begin(), port.end());
        return daemon::parse_options(extra);
    };
    auto plain = with({});
    REQUIRE(plain);
    CHECK(plain->socket_mode == 0666);  // every user, as the kernel's uverbs devices
    CHECK_FALSE(plain->socket_gid);
    for (uint32_t v : plain->user_limits_default.max) CHECK(v == host::server::kUnlimited);
    CHECK(plain->user_limits.empty());

    auto set = with({"--socket-mode", "0660", "--socket-group", "0", "--user-limit", "1000:qps=4,mrs=max",
                     "--user-limit", "qps=16,sessions=2", "--user-limit", "nobody:ahs=0"});
    REQUIRE(set);
    CHECK(set->socket_mode == 0660);
    CHECK(set->socket_gid == 0u);
    CHECK(set->user_limits_default[Resource::Qps] == 16);
    CHECK(set->user_limits_default[Resource::Sessions] == 2);
    CHECK(set->user_limits_default[Resource::Mrs] == host::server::kUnlimited);
    REQUIRE(set->user_limits.count(1000));
    // A user's entry takes what it does not name from the one for everybody, in any order.
    CHECK(set->user_limits[1000][Resource::Qps] == 4);
    CHECK(set->user_limits[1000][Resource::Sessions] == 2);
    REQUIRE(set->user_limits.count(65534));  // Debian's nobody
    CHECK(set->user_limits[65534][Resource::Ahs] == 0);
    CHECK(set->user_limits[65534][Resource::Qps] == 16);
    auto named_group = with({"--socket-group", "root"});
    REQUIRE(named_group);
    CHECK(named_group->socket_gid == 0u);

    for (const std::vector<std::string>& bad : {std::vector<std::string>{"--socket-mode", "999"},
                                                {"--socket-mode", "01777"},
                                                {"--socket-mode", ""},
                                                {"--socket-group", "no-such-group-here"},
                                                {"--user-limit", "qps"},
                                                {"--user-limit", "qps=-1"},
                                                {"--user-limit", "wqs=4"},
                                                {"--user-limit", "no-such-user-here:qps=4"},
                                                {"--user-limit", "qps=4,"},
                                                {"--user-limit", "qps=4294967295"}}) {
        INFO(bad[0] << " " << bad[1]);
        CHECK_FALSE(with(bad));
    }
}

TEST_CASE("options: several ports, each --iface starting one, each a device of its own", "[datapath]") {
    auto two = daemon::parse_options({"--ip", "10.0.0.1/24", "--iface", "veth0", "--pcap", "a.pcap", "--iface", "veth1",
                                      "--ip", "10.0.1.1/24", "--ip6", "fd01::1/64", "--name", "east", "--busy-poll"});
    REQUIRE(two);
    REQUIRE(two->ports.size() == 2);
    CHECK(two->ports[0].iface == "veth0");  // options before the first --iface are the first port's
    CHECK(two->ports[0].ip.addr == 0x0A000001);
    CHECK(two->ports[0].pcap == "a.pcap");
    CHECK(two->ports[0].ip6.empty());
    CHECK(two->ports[0].name == "rnic0");
    CHECK(two->ports[1].iface == "veth1");
    CHECK(two->ports[1].ip.addr == 0x0A000101);
    CHECK(two->ports[1].ip6.size() == 1);
    CHECK(two->ports[1].name == "east");
    CHECK(two->ports[1].pcap.empty());
    CHECK(two->busy_poll);  // global options apply to the loop, wherever they stand
    // Default names follow the port index.
    auto three = daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--iface", "b", "--ip", "10.0.1.1/24",
                                        "--iface", "c", "--ip", "10.0.2.1/24"});
    REQUIRE(three);
    CHECK(three->ports[2].name == "rnic2");
    // Devices named by the EAL arguments: --port starts each port.
    auto pci = daemon::parse_options(
        {"--port", "--ip", "10.0.0.1/24", "--port", "--ip", "10.0.1.1/24", "--", "-a", "0000:03:00.0", "-a", "0000:03:00.1"});
    REQUIRE(pci);
    CHECK(pci->ports.size() == 2);
    CHECK(pci->ports[1].iface.empty());
    // Each port needs its own address; names, interfaces and capture files must differ.
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--iface", "b"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--ip", "10.0.0.2/24"}));
    CHECK_FALSE(daemon::parse_options(
        {"--iface", "a", "--ip", "10.0.0.1/24", "--name", "x", "--iface", "b", "--ip", "10.0.1.1/24", "--name", "x"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--iface", "a", "--ip", "10.0.1.1/24"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--pcap", "x", "--iface", "b", "--ip",
                                       "10.0.1.1/24", "--pcap", "x"}));
    CHECK_FALSE(daemon::parse_options({"--port", "--ip", "10.0.0.1/24"}));  // no device named anywhere
    CHECK_FALSE(daemon::parse_options({"--iface", "", "--ip", "10.0.0.1/24"}));
}

TEST_CASE("options: the RNIC cache models' sizes and miss cost", "[datapath]") {
    auto plain = daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24"});
    REQUIRE(plain);
    CHECK(plain->qpc_cache.entries == daemon::kDefaultQpcCache.entries);
    CHECK(plain->mtt_cache.ways == daemon::kDefaultMttCache.ways);
    CHECK(plain->cache_miss_ns == 0);
    auto tuned = daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--qpc-cache", "64/4", "--mpt-cache",
                                        "0", "--mtt-cache", "512", "--cache-miss-ns", "500"});
    REQUIRE(tuned);
    CHECK(tuned->qpc_cache.entries == 64);
    CHECK(tuned->qpc_cache.ways == 4);
    CHECK(tuned->mpt_cache.entries == 0);
    CHECK(tuned->mtt_cache.entries == 512);
    CHECK(tuned->mtt_cache.ways == 1);
    CHECK(tuned->cache_miss_ns == 500);
    for (const char* bad : {"63/4", "64/0", "64/128", "x", "64/", "/4", "-1"})
        CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--qpc-cache", bad}));
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--cache-miss-ns", "x"}));
    auto rings = daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--rx-desc", "4096", "--tx-desc", "512"});
    REQUIRE(rings);
    CHECK(rings->rx_descriptors == 4096);
    CHECK(rings->tx_descriptors == 512);
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--rx-desc", "32"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "a", "--ip", "10.0.0.1/24", "--tx-desc", "70000"}));
}

TEST_CASE("EAL arguments: measured defaults, a vdev per port, the caller's arguments win", "[datapath]") {
    auto on = [](const char* iface) {
        port::DpdkPortConfig p;
        p.iface = iface;
        return p;
    };
    port::DpdkConfig one;
    one.ports.push_back(on("veth0"));
    const auto a = port::eal_arguments(one, {9000});
    const std::vector<std::string> want{"rnicd", "-l", "0", "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
                                        "-m", "128", "--log-level=notice", "--vdev",
                                        "net_af_packet0,iface=veth0,framecnt=4096,blocksz=8192,framesz=8192"};
    CHECK(a == want);
    port::DpdkConfig two;
    two.ports.push_back(on("veth0"));
    two.ports.push_back(on("veth1"));
    const auto b = port::eal_arguments(two, {1500, 1500});
    CHECK(std::count(b.begin(), b.end(), "--vdev") == 2);
    CHECK(std::find(b.begin(), b.end(), "net_af_packet1,iface=veth1,framecnt=4096") != b.end());
    CHECK(std::find(b.begin(), b.end(), "256") != b.end());  // -m grows with the ports
    // Devices named by the caller: no vdev of ours, and their flags replace the defaults.
    port::DpdkConfig pci;
    pci.ports.push_back({});
    pci.eal_args = {"-l", "2", "-a", "0000:03:00.0", "-m", "512"};
    const auto c = port::eal_arguments(pci, {1500});
    CHECK(std::count(c.begin(), c.end(), "--vdev") == 0);
    CHECK(std::count(c.begin(), c.end(), "-l") == 1);
    CHECK(std::find(c.begin(), c.end(), "--no-pci") == c.end());
    CHECK(std::find(c.begin(), c.end(), "128") == c.end());
    CHECK(port::eal_names_devices({"--vdev=net_tap0"}));
    CHECK_FALSE(port::eal_names_devices({"--no-huge"}));
    // Ring frames: the PMD default up to MTU 1500, then powers of two holding the largest RoCE frame.
    CHECK(port::af_packet_frame_size(1500) == 0);
    CHECK(port::af_packet_frame_size(9000) == 8192);
    CHECK(port::af_packet_frame_size(4200) == 8192);
    CHECK(port::af_packet_frame_size(3000) == 4096);
    // The pool holds every descriptor, a burst each way and the cache, as 2^n - 1.
    port::DpdkPortConfig pc;
    CHECK(port::mbuf_pool_size(pc) == 4095);
    pc.rx_descriptors = 4096;
    CHECK(port::mbuf_pool_size(pc) == 8191);
}

TEST_CASE("datapath: frames for our own MAC loop back into the engine, never onto the port", "[datapath]") {
    using namespace rnic::transport;
    // GID 0 (IPv4-mapped) and GID 2 (fd77::1): the QPs talk RoCEv2 over IPv4, then over IPv6.
    const uint8_t sgid = GENERATE(uint8_t{0}, uint8_t{2});
    INFO("sgid_index " << int{sgid});
    const auto dir = std::filesystem::temp_directory_path() / ("rnic_loop_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = dir / "loop.pcap";
    port::FakePort io(kSelf.mac);
    Engine engine(engine_config());
    std::vector<WorkCompletion> wcs;
    std::vector<uint8_t> memory(8192);
    {
        port::Capture cap(path, 0);
        daemon::Datapath dp(io, engine, kSelf, &cap);
        const uint32_t pd = *engine.alloc_pd();
        const MrInfo mr =
            *engine.reg_mr(pd, memory.data(), memory.size(), reinterpret_cast<uint64_t>(memory.data()), 1);
        const uint32_t cq = *engine.create_cq(16);
        QpInitAttr init;
        init.pd = pd;
        init.send_cq = init.recv_cq = cq;
        init.cap = {4, 4, 1, 1, 0};
        const uint32_t a = engine.create_qp(init)->qpn, b = engine.create_qp(init)->qpn;
        const wire::Gid own_gid = engine.gids().at(sgid);
        wire::MacAddr own{};
        REQUIRE(dp.resolve(own_gid, 0, own) == daemon::Neighbour::Resolved);
        CHECK(own == kSelf.mac);
        for (auto [qpn, dest] : {std::pair{a, b}, std::pair{b, a}}) connect_rc(engine, qpn, dest, own_gid, sgid, own);
        const auto base = reinterpret_cast<uint64_t>(memory.data());
        REQUIRE(engine.post_recv(b, RecvWr{1, {{base + 4096, 4096, mr.lkey}}}) == 0);
        std::memcpy(memory.data(), "looped", 6);
        SendWr wr;
        wr.wr_id = 2;
        wr.send_flags = SendFlag::Signaled;
        wr.sg_list = {{base, 6, mr.lkey}};
        REQUIRE(engine.post_send(a, wr) == 0);
        for (uint64_t t = 1; t < 20 && wcs.size() < 2; ++t) {
            dp.poll(t * 1000);
            WorkCompletion out[4];
            const int n = engine.poll_cq(cq, out);
            wcs.insert(wcs.end(), out, out + n);
        }
        CHECK(dp.counters().loopback_frames >= 2);  // the SEND and its ACK
        CHECK(io.sent().empty());
        // Off-link addresses are not resolved (no routing).
        wire::MacAddr far{};
        CHECK(dp.resolve(wire::Gid::from_ipv4(0x0B000001), 0, far) == daemon::Neighbour::Unreachable);
        cap.flush();
    }
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].status == WcStatus::Success);
    CHECK(wcs[1].status == WcStatus::Success);
    CHECK(std::memcmp(memory.data() + 4096, "looped", 6) == 0);
    // On the (virtual) wire: the IP version the source GID asked for.
    const auto frames = tools::read_all_frames(path);
    REQUIRE(frames.size() >= 2);
    for (const auto& f : frames) {
        const auto parsed = wire::parse_frame(f.bytes);
        REQUIRE(parsed);
        CHECK(parsed->ip_version == (sgid == 0 ? 4 : 6));
        CHECK(parsed->src_gid == engine.gids()[sgid]);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("datapath: neighbour solicitations and ping -6 are answered in the poll turn", "[datapath][ipv6]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    io.inject(solicitation(kSelfIp6));
    io.inject(solicitation(kSelf.ipv6[0].addr, kPeerLinkLocal));
    io.inject(echo6_request(56));
    io.inject(echo6_request(56, kSelf.ipv6[0].addr, kPeerLinkLocal));
    auto bad = echo6_request(8);
    bad.back() ^= 0x10;
    io.inject(bad);
    auto truncated = echo6_request(8);
    truncated.resize(truncated.size() - 3);
    io.inject(truncated);
    const Ipv6Addr all_routers{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    io.inject(icmp6_frame(133, std::vector<uint8_t>(4, 0), kPeerLinkLocal, all_routers, multicast_mac(all_routers)));
    io.inject(icmp6_frame(133, std::vector<uint8_t>(4, 0), kPeerLinkLocal, kAllNodes, multicast_mac(kAllNodes)));
    io.inject(solicitation(kSelfIp6, kPeerIp6, 64));  // routed: hop limit not 255
    CHECK(dp.poll(1000) == 9);
    REQUIRE(io.sent().size() == 4);
    const uint8_t types[] = {136, 136, 129, 129};
    for (size_t i = 0; i < 4; ++i) {
        const auto m = port::parse_icmp6(io.sent()[i]);
        REQUIRE(m);
        CHECK(m->type == types[i]);
        CHECK(m->eth_dst == kPeerMac);
    }
    CHECK(port::parse_icmp6(io.sent()[1])->dst == kPeerLinkLocal);
    const auto& c = dp.counters();
    using port::FrameClass;
    CHECK(c.rx_by_class[size_t(FrameClass::Icmp6ForUs)] == 8);
    CHECK(c.rx_by_class[size_t(FrameClass::NotForUs)] == 1);  // all-routers: not our group
    const auto summary = dp.summary();
    for (const char* counter :
         {"nd_solicitations_received=2", "nd_advertisements_sent=2", "icmp6_echo_replies=2", "icmp6_bad_checksum=1",
          "icmp6_malformed=1", "icmp6_other_types=1", "nd_bad_hop_limit=1", "nd_resolved=2"})
        CHECK(summary.find(counter) != std::string::npos);
    // Both askers were learnt (stale): the control path resolves them without waiting.
    wire::MacAddr mac{};
    CHECK(dp.resolve(wire::Gid::from_ipv6(kPeerIp6), 2000, mac) == daemon::Neighbour::Resolved);
    CHECK(mac == kPeerMac);
}

TEST_CASE("datapath: RoCEv2 over IPv6 for our addresses reaches the engine, others do not", "[datapath][ipv6]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    auto roce6 = [](const Ipv6Addr& dst) {
        wire::FrameSpec spec;
        spec.dst_mac = kSelf.mac;
        spec.src_mac = kPeerMac;
        spec.src_gid = wire::Gid::from_ipv6(kPeerIp6);
        spec.dst_gid = wire::Gid::from_ipv6(dst);
        spec.flow_label = 0x12345;
        spec.bth.opcode = 0x04;  // RC SEND only
        spec.bth.dest_qp = 0x11;
        const std::vector<uint8_t> payload(64, 7);
        spec.payload = payload;
        std::vector<uint8_t> f(256);
        f.resize(*wire::build_frame(spec, f));
        return f;
    };
    io.inject(roce6(kSelfIp6));
    io.inject(roce6(kSelf.ipv6[0].addr));
    io.inject(roce6(kPeerIp6));  // someone else's
    auto corrupt = roce6(kSelfIp6);
    corrupt[corrupt.size() - 1] ^= 1;  // ICRC
    io.inject(corrupt);
    CHECK(dp.poll(1000) == 4);
    CHECK(dp.counters().roce_rx == 3);
    CHECK(dp.counters().rx_by_class[size_t(port::FrameClass::NotForUs)] == 1);
    const auto& e = engine.device_counters();
    CHECK(e.rx_frames == 3);
    CHECK(e.rx_unknown_qp == 2);  // parsed, ICRC verified, for our GIDs; no QP 0x11 yet
    CHECK(e.rx_icrc_errors == 1);
}

TEST_CASE("datapath: IPv6 address vectors resolve through neighbour discovery", "[datapath][ipv6]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    wire::MacAddr mac{};
    for (const auto& p : kSelf.ipv6) {
        CHECK(dp.resolve(wire::Gid::from_ipv6(p.addr), 0, mac) == daemon::Neighbour::Resolved);
        CHECK(mac == kSelf.mac);
    }
    // Pending: the solicitation leaves at once (not at the end of the turn).
    CHECK(dp.resolve(wire::Gid::from_ipv6(kPeerIp6), 0, mac) == daemon::Neighbour::Pending);
    REQUIRE(io.sent().size() == 1);
    CHECK(port::parse_icmp6(io.sent()[0])->type == 135);
    CHECK(dp.next_deadline() == 1'000'000'000);
    io.inject(advertisement(kPeerIp6, 0x60));
    dp.poll(1000);
    CHECK(dp.resolve(wire::Gid::from_ipv6(kPeerIp6), 2000, mac) == daemon::Neighbour::Resolved);
    CHECK(mac == kPeerMac);
    // Off-link, multicast and unspecified destinations are never asked for.
    for (const char* text : {"2001:db8::1", "ff02::1", "::"}) {
        INFO(text);
        CHECK(dp.resolve(*wire::Gid::parse(text), 3000, mac) == daemon::Neighbour::Unreachable);
    }
    CHECK(io.sent().size() == 1);
    // A neighbour that never answers becomes Unreachable after the retries.
    const Ipv6Addr silent = parse_ipv6_prefix_or_die("fd77::99");
    CHECK(dp.resolve(wire::Gid::from_ipv6(silent), 4000, mac) == daemon::Neighbour::Pending);
    daemon::Neighbour r = daemon::Neighbour::Pending;
    for (uint64_t t = 4000; t < 10'000'000'000 && r == daemon::Neighbour::Pending; t += 100'000'000) {
        dp.poll(t);
        r = dp.resolve(wire::Gid::from_ipv6(silent), t, mac);
    }
    CHECK(r == daemon::Neighbour::Unreachable);
    CHECK(dp.nd().counters().solicitations_sent == 4);  // 1 for the peer, 3 for the silent one
}
