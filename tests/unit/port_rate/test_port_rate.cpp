#include <catch2/catch.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "rate_frames.hpp"
#include "rate_options.hpp"
#include "rate_report.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic;
using namespace rnic::port_rate;

namespace {

Options parse(std::vector<std::string> args) {
    return parse_options(args);
}

}  // namespace

TEST_CASE("options: defaults, every option, and clear refusals") {
    const Options d = parse({"rx", "--iface", "veth0"});
    CHECK(d.role == Role::Rx);
    CHECK(d.pmd == Pmd::AfPacket);
    CHECK(d.payload == 64);
    CHECK(d.burst == 32);
    CHECK(d.nap_us == 50);

    const Options o = parse({"tx", "--iface", "v", "--pmd", "af_xdp", "--size", "4096", "--seconds", "1.5", "--burst",
                             "64", "--dst-mac", "02:00:00:00:00:09", "--src-ip", "10.1.2.3", "--dst-ip", "10.1.2.4",
                             "--wait", "3", "--idle-ms", "200", "--nap-us", "0", "--verify", "--json"});
    CHECK(o.role == Role::Tx);
    CHECK(o.pmd == Pmd::AfXdp);
    CHECK(o.payload == 4096);
    CHECK(o.seconds == 1.5);
    CHECK(o.burst == 64);
    CHECK(o.dst_mac == wire::MacAddr{2, 0, 0, 0, 0, 9});
    CHECK(o.src_ip == 0x0A010203);
    CHECK(o.dst_ip == 0x0A010204);
    CHECK(o.wait == 3);
    CHECK(o.idle_ms == 200);
    CHECK(o.nap_us == 0);
    CHECK(parse({"rx", "--iface", "v", "--pmd", "ring"}).pmd == Pmd::Ring);
    CHECK(std::string(to_string(Pmd::Ring)) == "ring");
    CHECK(o.verify);
    CHECK(o.json);

    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {},
             {"both", "--iface", "v"},
             {"tx"},
             {"tx", "--iface"},
             {"tx", "--iface", "v", "--pmd", "tap"},
             {"tx", "--iface", "v", "--size", "4097"},
             {"tx", "--iface", "v", "--size", "-1"},
             {"tx", "--iface", "v", "--seconds", "0"},
             {"tx", "--iface", "v", "--seconds", "nan"},
             {"tx", "--iface", "v", "--burst", "0"},
             {"tx", "--iface", "v", "--burst", "12x"},
             {"rx", "--iface", "v", "--nap-us", "100001"},
             {"tx", "--iface", "v", "--dst-mac", "zz"},
             {"tx", "--iface", "v", "--dst-ip", "10.1"},
             {"tx", "--iface", "v", "--frobnicate", "1"}}) {
        INFO(bad.size());
        CHECK_THROWS_AS(parse(bad), std::invalid_argument);
    }
}

TEST_CASE("frames: valid RoCEv2 RDMA WRITEs with their ICRC, one PSN each, the payload asked for") {
    for (const size_t payload : {size_t{0}, size_t{64}, size_t{4096}}) {
        const FrameParams p{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, 0x0A3E0001, 0x0A3E0002, payload};
        const auto frames = make_frames(p, 4);
        REQUIRE(frames.size() == 4);
        for (size_t i = 0; i < frames.size(); ++i) {
            const auto parsed = wire::parse_frame(frames[i]);  // verifies the ICRC and the IP checksum
            REQUIRE(parsed);
            CHECK(parsed->bth.opcode == wire::op::kRcWriteOnly);
            CHECK(parsed->bth.psn == i);
            CHECK(parsed->payload.size() == payload);
            CHECK(parsed->eth.dst == p.dst_mac);
            CHECK(parsed->src_gid.ipv4() == p.src_ip);
            CHECK(is_roce_v2(frames[i]));
            CHECK(frames[i].size() == frames[0].size());
        }
    }
}

TEST_CASE("frames: the receiver's quick test refuses what is not RoCEv2") {
    const FrameParams p{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, 1, 2, 64};
    auto f = make_frames(p, 1)[0];
    CHECK(is_roce_v2(f));
    auto arp = f;
    arp[12] = 0x08, arp[13] = 0x06;
    CHECK_FALSE(is_roce_v2(arp));
    auto tcp = f;
    tcp[23] = 6;
    CHECK_FALSE(is_roce_v2(tcp));
    auto other_port = f;
    other_port[14 + 20 + 3] ^= 1;
    CHECK_FALSE(is_roce_v2(other_port));
    CHECK_FALSE(is_roce_v2(std::span<const uint8_t>(f.data(), 40)));
    auto bad_ihl = f;
    bad_ihl[14] = 0x43;
    CHECK_FALSE(is_roce_v2(bad_ihl));
}

TEST_CASE("report: one parseable line per side, and JSON") {
    Report tx;
    tx.role = Role::Tx;
    tx.iface = "pktra";
    tx.payload = 64;
    tx.burst = 32;
    tx.seconds = 2;
    tx.frames = 1'000'000;
    tx.bytes = 126'000'000;
    tx.dropped = 7;
    CHECK(format_line(tx) ==
          "port_rate tx: pmd=af_packet iface=pktra payload=64 frame=126 burst=32 seconds=2.000 frames=1000000 pps=500000 "
          "gbps=0.504 dropped=7");
    CHECK(format_json(tx) ==
          R"({"burst":32,"bytes":126000000,"dropped":7,"frame":126,"frames":1000000,"gbps":0.504,"iface":"pktra",)"
          R"("payload":64,"pmd":"af_packet","pps":500000.0,"role":"tx","seconds":2.0})");
    Report rx = tx;
    rx.role = Role::Rx;
    rx.pmd = Pmd::AfXdp;
    rx.other = 3;
    rx.missed = 2;
    const std::string line = format_line(rx);
    CHECK(std::regex_match(line, std::regex(R"(port_rate rx: pmd=af_xdp iface=\S+ frame=126 burst=\d+ seconds=[0-9.]+ )"
                                            R"(frames=\d+ pps=\d+ gbps=[0-9.]+ other=3 bad=0 missed=2)")));
    Report none;
    CHECK(none.pps() == 0);
    CHECK(none.gbps() == 0);
}
