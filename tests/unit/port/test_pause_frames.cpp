// PAUSE and PFC frames through rnicd's poll loop over the in-memory port: classified as MAC
// control whatever their address, parsed, turned into "priority P paused until T" for the engine
// at the port's rate, counted under mlx5's names; bad ones counted and dropped.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "datapath.hpp"
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
