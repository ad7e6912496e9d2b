#include <catch2/catch.hpp>

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
}
