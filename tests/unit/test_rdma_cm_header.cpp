#include <catch2/catch.hpp>
#include <vector>

#include "rnic/wire/rdma_cm_header.hpp"

using namespace rnic::wire;

TEST_CASE("rdma_cm service IDs: (port space << 16) + port", "[rdma_cm]") {
    CHECK(rdma_cm_service_id(RdmaPortSpace::Tcp, 7174) == 0x0000000001061C06);  // rping's default port
    CHECK(rdma_cm_service_id(RdmaPortSpace::Udp, 7174) == 0x0000000001111C06);  // udaddy's
    CHECK(rdma_cm_service_id(RdmaPortSpace::Ib, 1) == 0x00000000013F0001);
    CHECK(rdma_cm_service_id(RdmaPortSpace::Ipoib, 0xFFFF) == 0x000000000002FFFF);

    for (RdmaPortSpace ps : {RdmaPortSpace::Ipoib, RdmaPortSpace::Tcp, RdmaPortSpace::Udp, RdmaPortSpace::Ib}) {
        for (uint16_t port : {uint16_t{0}, uint16_t{1}, uint16_t{20049}, uint16_t{0xFFFF}}) {
            auto s = parse_rdma_cm_service_id(rdma_cm_service_id(ps, port));
            REQUIRE(s);
            CHECK(s->port_space == ps);
            CHECK(s->port == port);
        }
    }
    CHECK_FALSE(parse_rdma_cm_service_id(0x0000000001071C06));  // no such port space
    CHECK_FALSE(parse_rdma_cm_service_id(0x0200000000000001));  // an IB CM assigned service ID
    CHECK_FALSE(parse_rdma_cm_service_id(0x0000000101061C06));
    CHECK(rdma_port_space_name(RdmaPortSpace::Tcp) == "TCP");
    CHECK(rdma_port_space_name(RdmaPortSpace::Udp) == "UDP");
    CHECK(rdma_port_space_name(RdmaPortSpace::Ib) == "IB");
    CHECK(rdma_port_space_name(RdmaPortSpace::Ipoib) == "IPoIB");
}

TEST_CASE("rdma_cm IP header: IPv4 layout as cma_hdr has it", "[rdma_cm]") {
    const auto h = RdmaCmIpHeader::make(*Gid::parse("10.199.0.2"), *Gid::parse("10.199.0.1"), 0xB52D);
    CHECK(h.ip_version == 4);
    std::array<uint8_t, RdmaCmIpHeader::kSize> b;
    b.fill(0xEE);
    h.write(b.data());
    std::vector<uint8_t> expected = {0x00, 0x40, 0xB5, 0x2D};  // version 0, IPv4, port 46381
    for (uint8_t last : {uint8_t{2}, uint8_t{1}}) {
        expected.insert(expected.end(), 12, 0);  // three zero words, then the address
        expected.insert(expected.end(), {0x0A, 0xC7, 0x00, last});
    }
    REQUIRE(expected.size() == RdmaCmIpHeader::kSize);
    CHECK(std::vector<uint8_t>(b.begin(), b.end()) == expected);
    auto back = parse_rdma_cm_ip_header(b);
    REQUIRE(back);
    CHECK(*back == h);
    CHECK(back->src_addr.to_ip_string() == "10.199.0.2");
}

TEST_CASE("rdma_cm IP header: IPv6 round trip", "[rdma_cm]") {
    const auto h = RdmaCmIpHeader::make(*Gid::parse("fe80::5054:ff:fec0:ff01"), *Gid::parse("2001:db8::1"), 40000);
    CHECK(h.ip_version == 6);
    std::array<uint8_t, RdmaCmIpHeader::kSize> b;
    h.write(b.data());
    CHECK(b[1] == 0x60);
    CHECK(b[4] == 0xFE);
    CHECK(b[5] == 0x80);
    CHECK(b[20] == 0x20);
    CHECK(b[35] == 0x01);
    auto back = parse_rdma_cm_ip_header(b);
    REQUIRE(back);
    CHECK(*back == h);
    // One side IPv4-mapped, the other not: the header says IPv6 and carries both verbatim.
    const auto mixed = RdmaCmIpHeader::make(*Gid::parse("10.0.0.1"), *Gid::parse("2001:db8::1"), 1);
    CHECK(mixed.ip_version == 6);
    mixed.write(b.data());
    CHECK(*parse_rdma_cm_ip_header(b) == mixed);
}

TEST_CASE("rdma_cm IP header: what Linux's cma_save_ip_info refuses", "[rdma_cm][malformed]") {
    std::array<uint8_t, kCmReqPrivateDataSize> pd{};
    RdmaCmIpHeader::make(*Gid::parse("10.0.0.1"), *Gid::parse("10.0.0.2"), 5).write(pd.data());
    REQUIRE(parse_rdma_cm_ip_header(pd));

    auto bad = pd;
    bad[0] = 1;  // version
    CHECK(parse_rdma_cm_ip_header(bad).error().code == ParseErrc::BadRdmaCmVersion);
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x50}, uint8_t{0xF0}}) {
        bad = pd;
        bad[1] = v;
        CHECK(parse_rdma_cm_ip_header(bad).error().code == ParseErrc::BadRdmaCmIpVersion);
        CHECK(parse_rdma_cm_ip_header(bad).error().offset == 1);
    }
    bad = pd;
    bad[1] = 0x4F;  // the low nibble is reserved: ignored
    CHECK(parse_rdma_cm_ip_header(bad));
    const std::vector<uint8_t> short_pd(pd.begin(), pd.begin() + 35);
    CHECK(parse_rdma_cm_ip_header(short_pd).error().code == ParseErrc::TruncatedRdmaCmHeader);
}

TEST_CASE("rdma_cm private data: header, the consumer's bytes, zeros", "[rdma_cm]") {
    const auto h = RdmaCmIpHeader::make(*Gid::parse("10.0.0.1"), *Gid::parse("10.0.0.2"), 5);
    std::array<uint8_t, kCmReqPrivateDataSize> pd;
    pd.fill(0xEE);
    const std::vector<uint8_t> user = {1, 2, 3, 4, 5};
    REQUIRE(put_rdma_cm_private_data(h, user, pd));
    CHECK(*parse_rdma_cm_ip_header(pd) == h);
    const auto u = rdma_cm_user_data(pd);
    CHECK(u.size() == kRdmaCmReqUserDataSize);
    CHECK(std::vector<uint8_t>(u.begin(), u.begin() + 5) == user);
    for (size_t i = 5; i < u.size(); ++i) CHECK(u[i] == 0);

    const std::vector<uint8_t> full(kRdmaCmReqUserDataSize, 0x77);
    CHECK(put_rdma_cm_private_data(h, full, pd));
    CHECK(pd.back() == 0x77);
    std::array<uint8_t, kCmReqPrivateDataSize> untouched;
    untouched.fill(0xEE);
    const std::vector<uint8_t> too_long(kRdmaCmReqUserDataSize + 1, 0x77);
    CHECK_FALSE(put_rdma_cm_private_data(h, too_long, untouched));
    CHECK(untouched[0] == 0xEE);

    std::array<uint8_t, kCmSidrReqPrivateDataSize> sidr{};
    CHECK(put_rdma_cm_private_data(h, std::vector<uint8_t>(kRdmaCmSidrReqUserDataSize, 1), sidr));
    CHECK(rdma_cm_user_data(sidr).size() == 180);
    CHECK(rdma_cm_user_data(std::span<const uint8_t>(sidr).first(10)).empty());
}
