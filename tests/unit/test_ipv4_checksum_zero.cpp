// The IPv4 header checksum has two representations of zero in one's complement: a header whose
// other words sum to 0xFFFF carries 0x0000 when the sender computes it afresh, but 0xFFFF when a
// router or switch updated it incrementally (nftables' `ip ecn set ce` produced one in the rxe
// interop run's ecn phase). Receivers verify by summing the whole header (RFC 1071: the sum,
// checksum included, must be all ones), so Linux accepts both; rnicd once compared against a
// fresh computation and dropped the 0xFFFF one as malformed. The ICRC masks the checksum field,
// so both frames below carry the same valid ICRC.
#include <catch2/catch.hpp>

#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/byte_order.hpp"
#include "rnic/wire/inet_checksum.hpp"
#include "rnic/wire/parser.hpp"

using namespace rnic::wire;

namespace {

// A WRITE whose IPv4 header (the checksum field aside) sums to 0xFFFF: the IP ID is chosen so.
std::vector<uint8_t> frame_with_zero_checksum() {
    FrameSpec s;
    s.src_gid = Gid::from_ipv4(0x0AC40601);
    s.dst_gid = Gid::from_ipv4(0x0AC406FE);
    s.ecn = 3;
    s.bth.opcode = op::kRcWriteOnly;
    s.bth.dest_qp = 0x11;
    s.ext.reth = Reth{0x1000, 0x1234, 0};
    std::vector<uint8_t> buf(256);
    for (uint32_t id = 0; id <= 0xFFFF; ++id) {
        s.ip_id = static_cast<uint16_t>(id);
        const auto n = build_frame(s, buf);
        REQUIRE(n);
        if (load_be16(buf.data() + 14 + 10) == 0) return {buf.begin(), buf.begin() + static_cast<long>(*n)};
    }
    FAIL("no IP ID gives a zero checksum");
    return {};
}

}  // namespace

TEST_CASE("an IPv4 header checksum of 0xFFFF (one's-complement -0) verifies like 0x0000", "[parser][ipv4]") {
    std::vector<uint8_t> f = frame_with_zero_checksum();
    CHECK(parse_frame(f).has_value());
    CHECK(ipv4_header_checksum_ok(f.data() + 14, 20));
    store_be16(f.data() + 14 + 10, 0xFFFF);  // as an incremental update (RFC 1624) may leave it
    CHECK(ipv4_header_checksum_ok(f.data() + 14, 20));
    const auto p = parse_frame(f);
    if (!p) FAIL(parse_errc_name(p.error().code));
    CHECK(p->ecn() == 3);
    for (const uint16_t wrong : {0xFFFE, 0x0001, 0x8000}) {
        store_be16(f.data() + 14 + 10, wrong);
        INFO("checksum " << wrong);
        CHECK_FALSE(ipv4_header_checksum_ok(f.data() + 14, 20));
        const auto bad = parse_frame(f);
        REQUIRE_FALSE(bad.has_value());
        CHECK(bad.error().code == ParseErrc::BadIpChecksum);
    }
}
