// 802.3x PAUSE and 802.1Qbb PFC frames, byte by byte as a switch sends them (the layouts of
// IEEE 802.3 Annex 31B and 802.1Qbb clause 36), and the pause time of a quantum.
#include <catch2/catch.hpp>

#include <vector>

#include "rnic/wire/mac_control.hpp"

using namespace rnic::wire;

namespace {

std::vector<uint8_t> header(uint16_t ethertype, uint16_t opcode) {
    return {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
            uint8_t(ethertype >> 8), uint8_t(ethertype), uint8_t(opcode >> 8), uint8_t(opcode)};
}

}  // namespace

TEST_CASE("a PAUSE frame stops every priority for its one pause time", "[mac_control]") {
    auto f = header(0x8808, 0x0001);
    f.insert(f.end(), {0x12, 0x34});
    auto padded = f;
    padded.resize(60);  // as on the wire, without FCS
    for (const auto& bytes : {f, padded}) {
        const auto m = parse_mac_control(bytes);
        REQUIRE(m);
        CHECK_FALSE(m->pfc);
        CHECK(m->class_enable == 0xff);
        for (uint16_t q : m->quanta) CHECK(q == 0x1234);
        CHECK(m->destination == kMacControlAddress);
    }
}

TEST_CASE("a PFC frame carries a class-enable vector and eight pause times", "[mac_control]") {
    auto f = header(0x8808, 0x0101);
    f.insert(f.end(), {0xAB, 0x28});  // reserved high byte ignored; priorities 3 and 5
    for (uint16_t i = 0; i < 8; ++i) f.insert(f.end(), {uint8_t(0), uint8_t(i * 16)});
    const auto m = parse_mac_control(f);
    REQUIRE(m);
    CHECK(m->pfc);
    CHECK(m->class_enable == 0x28);
    CHECK(m->quanta[3] == 48);
    CHECK(m->quanta[5] == 80);
    CHECK(m->quanta[0] == 0);
}

TEST_CASE("short, foreign and unknown MAC control frames are refused with a reason", "[mac_control]") {
    auto pause = header(0x8808, 0x0001);
    CHECK(parse_mac_control(pause).error() == MacControlError::Truncated);  // no pause time
    pause.push_back(0);
    CHECK(parse_mac_control(pause).error() == MacControlError::Truncated);
    CHECK(parse_mac_control(std::span(pause.data(), 15)).error() == MacControlError::Truncated);
    CHECK(parse_mac_control(std::span(pause.data(), 10)).error() == MacControlError::Truncated);

    auto pfc = header(0x8808, 0x0101);
    pfc.resize(pfc.size() + 2 + 15);  // one byte short of the eighth time
    CHECK(parse_mac_control(pfc).error() == MacControlError::Truncated);
    pfc.push_back(0);
    CHECK(parse_mac_control(pfc));

    auto mpcp = header(0x8808, 0x0002);  // EPON's GATE: a MAC control opcode we do not serve
    mpcp.resize(60);
    CHECK(parse_mac_control(mpcp).error() == MacControlError::UnsupportedOpcode);
    auto ip = header(0x0800, 0x0001);
    ip.resize(60);
    CHECK(parse_mac_control(ip).error() == MacControlError::NotMacControl);
}

TEST_CASE("a pause quantum is 512 bit times at the link's rate", "[mac_control]") {
    CHECK(pause_quanta_ns(1, 10'000) == 52);  // 51.2 ns, rounded up
    CHECK(pause_quanta_ns(10, 10'000) == 512);
    CHECK(pause_quanta_ns(0xffff, 10'000) == 3'355'392);
    CHECK(pause_quanta_ns(0xffff, 100) == 335'539'200);
    CHECK(pause_quanta_ns(1, 1'000) == 512);
    CHECK(pause_quanta_ns(0, 1'000) == 0);
    CHECK(pause_quanta_ns(5, 0) == 0);
}
