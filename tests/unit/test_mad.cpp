#include <catch2/catch.hpp>
#include <vector>

#include "rnic/wire/mad.hpp"

using namespace rnic::wire;

namespace {

Mad sample_mad() {
    Mad m;
    m.header.mgmt_class = 0x07;
    m.header.class_version = 2;
    m.header.method = MadMethod::Get;
    m.header.status = 0x1234;
    m.header.class_specific = 0x5678;
    m.header.transaction_id = 0x0102030405060708;
    m.header.attribute_id = 0x0001;
    m.header.reserved = 0xBEEF;
    m.header.attribute_modifier = 0x9ABCDEF0;
    for (size_t i = 0; i < m.data.size(); ++i) m.data[i] = static_cast<uint8_t>(i * 7 + 3);
    return m;
}

}  // namespace

TEST_CASE("MAD common header: IBA 13.4.3 byte positions", "[mad]") {
    const auto b = sample_mad().bytes();
    const std::vector<uint8_t> header(b.begin(), b.begin() + 24);
    CHECK(header == std::vector<uint8_t>{0x01, 0x07, 0x02, 0x01, 0x12, 0x34, 0x56, 0x78, 0x01, 0x02, 0x03, 0x04,
                                         0x05, 0x06, 0x07, 0x08, 0x00, 0x01, 0xBE, 0xEF, 0x9A, 0xBC, 0xDE, 0xF0});
    CHECK(b[24] == 3);
    CHECK(b[255] == static_cast<uint8_t>(231 * 7 + 3));
}

TEST_CASE("MAD: parse gives back every byte, reserved field included", "[mad]") {
    const Mad m = sample_mad();
    const auto bytes = m.bytes();
    auto p = parse_mad(bytes);
    REQUIRE(p);
    CHECK(*p == m);
    CHECK(p->bytes() == bytes);
    CHECK_FALSE(p->header.is_response());
    Mad resp = m;
    resp.header.method = MadMethod::GetResp;
    CHECK(resp.header.is_response());
}

TEST_CASE("MAD: wrong lengths and base versions are refused without reading past the buffer", "[mad]") {
    const auto bytes = sample_mad().bytes();
    for (size_t len : {size_t{0}, size_t{1}, size_t{23}, size_t{24}, size_t{255}}) {
        INFO(len);
        // A heap copy of exactly `len` bytes so ASan sees any over-read.
        std::vector<uint8_t> short_mad(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
        auto p = parse_mad(short_mad);
        REQUIRE_FALSE(p);
        CHECK(p.error().code == ParseErrc::BadMadLength);
        CHECK(p.error().offset == len);
    }
    std::vector<uint8_t> long_mad(bytes.begin(), bytes.end());
    long_mad.push_back(0);
    auto p = parse_mad(long_mad);
    REQUIRE_FALSE(p);
    CHECK(p.error().code == ParseErrc::BadMadLength);
    CHECK(p.error().offset == kMadSize);

    for (uint8_t version : {uint8_t{0}, uint8_t{2}, uint8_t{0x80}}) {
        auto bad = bytes;
        bad[0] = version;
        auto q = parse_mad(bad);
        REQUIRE_FALSE(q);
        CHECK(q.error().code == ParseErrc::BadMadBaseVersion);
        CHECK(q.error().offset == 0);
    }
}

TEST_CASE("MAD: Linux's answer to a Get or Set no agent handles", "[mad]") {
    Mad get = sample_mad();
    get.header.status = 0;
    auto r = unmatched_method_response(get);
    REQUIRE(r);
    CHECK(r->header.method == MadMethod::GetResp);
    CHECK(r->header.status == kMadStatusMethodAttrUnsupported);
    CHECK(r->header.transaction_id == get.header.transaction_id);
    CHECK(r->header.attribute_id == get.header.attribute_id);
    CHECK(r->header.attribute_modifier == get.header.attribute_modifier);
    CHECK(r->data == get.data);

    Mad set = get;
    set.header.method = MadMethod::Set;
    CHECK(unmatched_method_response(set));
    for (MadMethod m : {MadMethod::Send, MadMethod::GetResp, MadMethod::Trap, MadMethod::Report}) {
        Mad other = get;
        other.header.method = m;
        CHECK_FALSE(unmatched_method_response(other));
    }
    CHECK(mad_method_name(MadMethod::Send) == "Send");
    CHECK(mad_method_name(MadMethod::GetResp) == "GetResp");
    CHECK(mad_method_name(static_cast<MadMethod>(0x42)) == "unknown");
}
