#include <catch2/catch.hpp>

#include "rnic/wire/gid.hpp"
#include "rnic/wire/source_port.hpp"

using namespace rnic::wire;

TEST_CASE("GIDs: IPv4-mapped and IPv6", "[gid]") {
    const Gid g = Gid::from_ipv4(0x0AC70001);
    CHECK(g.is_ipv4_mapped());
    CHECK(g.ipv4() == 0x0AC70001);
    CHECK(g.to_string() == "::ffff:10.199.0.1");
    CHECK(g.to_ip_string() == "10.199.0.1");
    CHECK(Gid::parse("10.199.0.1") == g);
    CHECK(Gid::parse("::ffff:10.199.0.1") == g);
    const auto v6 = Gid::parse("fe80::5054:ff:fec0:ff00");
    REQUIRE(v6);
    CHECK_FALSE(v6->is_ipv4_mapped());
    CHECK(v6->to_string() == "fe80::5054:ff:fec0:ff00");
    CHECK(v6->to_ip_string() == "fe80::5054:ff:fec0:ff00");
    CHECK_FALSE(Gid::parse("10.0.0.300"));
    CHECK_FALSE(Gid::parse("not a gid"));
    CHECK(Gid{}.is_zero());
}

TEST_CASE("UDP source port follows the kernel's flow-label hash of the QPN pair", "[source_port]") {
    // Seen in shared/pcaps-rxe/rxe_rc_pingpong_*.pcap: QPN 0x11 talking to QPN 0x11 sends from 0xC121.
    CHECK(rocev2_source_port(0x11, 0x11) == 0xC121);
    CHECK(rocev2_flow_label(0x11, 0x11) == 0x121);
    // An application-chosen flow label wins over the QPN pair.
    CHECK(rocev2_source_port(0x11, 0x11, 0x4ABCD) == rocev2_source_port_from_flow_label(0x4ABCD));
    CHECK(rocev2_source_port_from_flow_label(0x4ABCD) == (0xC000 | (0x0ABCD ^ 0x12)));
    for (uint32_t qpn = 0; qpn < 100000; qpn += 13) REQUIRE(rocev2_source_port(qpn, qpn + 1) >= 0xC000);
    CHECK(rocev2_source_port(0x11, 0x12) == rocev2_source_port(0x12, 0x11));
    CHECK(rocev2_source_port(0x11, 0x12) != rocev2_source_port(0x11, 0x13));
}
