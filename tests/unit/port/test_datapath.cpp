#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "datapath.hpp"
#include "frames.hpp"
#include "idle_policy.hpp"
#include "options.hpp"
#include "pcap_file.hpp"
#include "rate_limit.hpp"
#include "rnic/port/fake_port.hpp"
#include "rnic/wire/gid.hpp"

using namespace rnic;
using namespace rnic::port::test;

namespace {
transport::EngineConfig engine_config() {
    transport::EngineConfig c;
    c.mac = kSelf.mac;
    c.gids = {wire::Gid::from_ipv4(kSelf.ipv4)};
    return c;
}
}  // namespace

TEST_CASE("datapath: start announces us, ARP and ping are answered, strangers are counted", "[datapath]") {
    port::FakePort io(kSelf.mac);
    transport::Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    dp.start(0);
    REQUIRE(io.sent().size() == 1);
    CHECK(port::parse_arp(io.sent()[0])->target_ip == kSelf.ipv4);

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
    CHECK(ok->iface == "veth0");
    CHECK(ok->ip.addr == 0x0A000001);
    CHECK(ok->ip.length == 24);
    CHECK(ok->pcap_max_mb == 8);
    CHECK(ok->busy_poll);
    CHECK(ok->eal_args == std::vector<std::string>{"--vdev", "net_tap0"});
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--bogus"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--log-level", "loud"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--pcap-max-mb", "3"}));
    CHECK_FALSE(daemon::parse_options({"--iface"}));
    auto named =
        daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--name", "rnic1", "--run-dir", "/tmp/r"});
    REQUIRE(named);
    CHECK(named->name == "rnic1");
    CHECK(named->run_dir == "/tmp/r");
    CHECK(ok->name == "rnic0");
    CHECK(ok->run_dir.empty());
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--name", "a/b"}));
    CHECK_FALSE(daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--run-dir", ""}));
}

TEST_CASE("datapath: frames for our own MAC loop back into the engine, never onto the port", "[datapath]") {
    using namespace rnic::transport;
    port::FakePort io(kSelf.mac);
    Engine engine(engine_config());
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    std::vector<uint8_t> memory(8192);
    const uint32_t pd = *engine.alloc_pd();
    const MrInfo mr = *engine.reg_mr(pd, memory.data(), memory.size(), reinterpret_cast<uint64_t>(memory.data()), 1);
    const uint32_t cq = *engine.create_cq(16);
    QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {4, 4, 1, 1, 0};
    const uint32_t a = engine.create_qp(init)->qpn, b = engine.create_qp(init)->qpn;
    wire::MacAddr own{};
    REQUIRE(dp.resolve(kSelf.ipv4, 0, own) == daemon::Neighbour::Resolved);
    CHECK(own == kSelf.mac);
    for (auto [qpn, dest] : {std::pair{a, b}, std::pair{b, a}}) {
        QpAttributes attr;
        attr.qp_state = QpState::Init;
        REQUIRE(engine.modify_qp(qpn, attr, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags) ==
                0);
        attr.qp_state = QpState::Rtr;
        attr.dest_qp_num = dest;
        attr.ah_attr.dgid = wire::Gid::from_ipv4(kSelf.ipv4);
        attr.ah_attr.dmac = own;
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
    const auto base = reinterpret_cast<uint64_t>(memory.data());
    REQUIRE(engine.post_recv(b, RecvWr{1, {{base + 4096, 4096, mr.lkey}}}) == 0);
    std::memcpy(memory.data(), "looped", 6);
    SendWr wr;
    wr.wr_id = 2;
    wr.send_flags = SendFlag::Signaled;
    wr.sg_list = {{base, 6, mr.lkey}};
    REQUIRE(engine.post_send(a, wr) == 0);
    std::vector<WorkCompletion> wcs;
    for (uint64_t t = 1; t < 20 && wcs.size() < 2; ++t) {
        dp.poll(t * 1000);
        WorkCompletion out[4];
        const int n = engine.poll_cq(cq, out);
        wcs.insert(wcs.end(), out, out + n);
    }
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].status == WcStatus::Success);
    CHECK(wcs[1].status == WcStatus::Success);
    CHECK(std::memcmp(memory.data() + 4096, "looped", 6) == 0);
    CHECK(dp.counters().loopback_frames >= 2);  // the SEND and its ACK
    CHECK(io.sent().empty());
    // Off-link addresses are not resolved (no routing).
    wire::MacAddr far{};
    CHECK(dp.resolve(0x0B000001, 0, far) == daemon::Neighbour::Unreachable);
}
