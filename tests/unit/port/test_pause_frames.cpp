// PAUSE and PFC frames through rnicd's poll loop over the in-memory port: classified as MAC
// control whatever their address, parsed, turned into "priority P paused until T" for the engine
// at the port's rate, counted under mlx5's names; bad ones counted and dropped.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "datapath.hpp"
#include "options.hpp"
#include "frames.hpp"
#include "rnic/port/fake_port.hpp"
#include "rnic/wire/mac_control.hpp"

using namespace rnic;
using namespace rnic::port::test;

namespace {

std::vector<uint8_t> mac_control(const wire::MacAddr& dst, uint16_t opcode, std::vector<uint8_t> payload) {
    std::vector<uint8_t> f(dst.begin(), dst.end());
    f.insert(f.end(), kPeerMac.begin(), kPeerMac.end());
    f.insert(f.end(), {0x88, 0x08, uint8_t(opcode >> 8), uint8_t(opcode)});
    f.insert(f.end(), payload.begin(), payload.end());
    f.resize(std::max<size_t>(f.size(), 60));
    return f;
}

std::vector<uint8_t> pfc(uint8_t enable, uint16_t quanta) {
    std::vector<uint8_t> p{0, enable};
    for (int i = 0; i < 8; ++i) p.insert(p.end(), {uint8_t(quanta >> 8), uint8_t(quanta)});
    return mac_control(wire::kMacControlAddress, 0x0101, p);
}

std::map<std::string, uint64_t> counters(const daemon::Datapath& dp) {
    std::map<std::string, uint64_t> m;
    for (const auto& [k, v] : dp.counter_list()) m[k] = v;
    return m;
}

}  // namespace

TEST_CASE("datapath: PAUSE and PFC pause the engine's priorities for their quanta at the port rate", "[datapath]") {
    port::FakePort io(kSelf.mac);
    transport::EngineConfig config;
    config.mac = kSelf.mac;
    config.gids = port::gid_table(kSelf);
    config.port_rate_mbps = 1000;  // a quantum is 512 ns
    transport::Engine engine(config);
    daemon::Datapath dp(io, engine, kSelf, nullptr);

    // PFC for priorities 0 and 3, 1000 quanta: 512 us from the poll that read it.
    io.inject(pfc(0x09, 1000));
    dp.poll(1'000'000);
    CHECK(engine.priority_paused_until(0) == 1'000'000 + 512'000);
    CHECK(engine.priority_paused_until(3) == 1'000'000 + 512'000);
    CHECK(engine.priority_paused_until(1) == 0);
    CHECK(dp.counters().rx_by_class[size_t(port::FrameClass::MacControl)] == 1);

    // A PAUSE to our own MAC (802.3 allows it): every priority, 10 quanta.
    io.inject(mac_control(kSelf.mac, 0x0001, {0, 10}));
    dp.poll(2'000'000);
    for (uint8_t p = 0; p < 8; ++p) CHECK(engine.priority_paused_until(p) == 2'000'000 + 5'120);
    // Quanta 0 resumes at once.
    io.inject(mac_control(wire::kMacControlAddress, 0x0001, {0, 0}));
    dp.poll(2'001'000);
    CHECK(engine.priority_paused_until(5) == 2'001'000);

    // Bad ones: another station's, truncated, another opcode. Nothing paused.
    io.inject(mac_control(kPeerMac, 0x0001, {0xff, 0xff}));
    auto truncated = pfc(0x01, 0xffff);
    truncated.resize(14 + 4 + 6);
    io.inject(truncated);
    io.inject(mac_control(wire::kMacControlAddress, 0x0002, {1, 2, 3, 4}));
    dp.poll(3'000'000);
    CHECK(engine.priority_paused_until(0) == 2'001'000);

    const auto c = counters(dp);
    CHECK(c.at("rx_mac_control_phy") == 6);
    CHECK(c.at("rx_pause_ctrl_phy") == 3);
    CHECK(c.at("rx_mac_control_malformed") == 2);
    CHECK(c.at("rx_unsupported_op_phy") == 1);
    CHECK(c.at("rx_prio0_pause") == 1);
    CHECK(c.at("rx_prio3_pause") == 1);
    CHECK(c.at("rx_prio1_pause") == 0);
    CHECK(c.at("rx_prio0_pause_duration") == 512);  // us, the pause ran out
    CHECK(c.at("rx_prio0_pause_transition") == 1);
    CHECK(c.at("rx_global_pause") == 2);
    CHECK(c.at("rx_global_pause_duration") == 1);  // 1 us of the 5.12 before the resume
    CHECK(c.at("rx_global_pause_transition") == 1);
    CHECK(c.at("port_rx_mac_control") == 6);
}

TEST_CASE("datapath: a MAC control frame from our own MAC (another program's, seen leaving) pauses nothing", "[datapath]") {
    port::FakePort io(kSelf.mac);
    transport::EngineConfig config;
    config.mac = kSelf.mac;
    config.gids = port::gid_table(kSelf);
    transport::Engine engine(config);
    daemon::Datapath dp(io, engine, kSelf, nullptr);
    auto own = mac_control(wire::kMacControlAddress, 0x0001, {0xff, 0xff});
    std::copy(kSelf.mac.begin(), kSelf.mac.end(), own.begin() + 6);
    io.inject(own);
    dp.poll(1'000);
    CHECK(engine.priority_paused_until(0) == 0);
    const auto c = counters(dp);
    CHECK(c.at("rx_mac_control_own") == 1);
    CHECK(c.at("rx_mac_control_phy") == 0);
    CHECK(c.at("rx_pause_ctrl_phy") == 0);
}

TEST_CASE("rnicd --dscp-prio: DSCP=PRIO lists, checked whole", "[options]") {
    auto opts = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--dscp-prio", "26=3,46=5",
                                       "--dscp-prio", "0=1"});
    REQUIRE(opts);
    CHECK(opts->dscp_priority[26] == 3);
    CHECK(opts->dscp_priority[46] == 5);
    CHECK(opts->dscp_priority[0] == 1);
    CHECK(opts->dscp_priority[48] == 6);  // the class selector elsewhere
    for (const char* bad : {"64=1", "3=8", "3", "3=1,", "x=1", "3=1,4"}) {
        INFO(bad);
        auto r = daemon::parse_options({"--iface", "veth0", "--ip", "10.0.0.1/24", "--dscp-prio", bad});
        REQUIRE_FALSE(r);
        CHECK(r.error().find("--dscp-prio") != std::string::npos);
    }
    std::array<uint8_t, 64> map = transport::class_selector_priorities();
    CHECK(daemon::parse_dscp_priorities("1=7,70=1", map));
    CHECK(map[1] == 0);  // unchanged on error
}
