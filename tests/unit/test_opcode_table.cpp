#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "rnic/wire/headers.hpp"
#include "rnic/wire/opcode.hpp"

using namespace rnic::wire;

TEST_CASE("opcode table: names, transports and header sets", "[opcode]") {
    size_t count = 0;
    const uint8_t* ops = valid_opcodes(&count);
    REQUIRE(count == 40);
    std::set<std::string_view> names;
    for (size_t i = 0; i < count; ++i) {
        const OpcodeInfo& info = opcode_info(ops[i]);
        REQUIRE(info.valid());
        REQUIRE(names.insert(info.name).second);
        const auto prefix = std::string(transport_name(info.transport)) + "_";
        if (info.transport != Transport::CNP) REQUIRE(std::string(info.name).rfind(prefix, 0) == 0);
        // Transport bits of the opcode (IBA table 38) agree with the table's transport.
        const uint8_t high = ops[i] >> 5;
        if (info.transport == Transport::RC) REQUIRE(high == 0);
        if (info.transport == Transport::UC) REQUIRE(high == 1);
        if (info.transport == Transport::UD) REQUIRE(high == 3);
        // Immediate data only on last/only packets; RETH only on first/only of a WRITE or READ.
        if (info.has(kExtImmDt)) REQUIRE(info.ends_message());
        if (info.has(kExtReth)) REQUIRE(info.starts_message());
        if (info.transport == Transport::UD) REQUIRE(info.has(kExtDeth));
        if (info.transport == Transport::UC) REQUIRE_FALSE(info.has(kExtAeth));
    }
    CHECK(opcode_info(op::kRcSendFirst).name == "RC_SEND_FIRST");
    CHECK(opcode_info(op::kRcSendOnlyInv).name == "RC_SEND_ONLY_WITH_INVALIDATE");
    CHECK(opcode_info(op::kUcWriteOnlyImm).name == "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");
    CHECK(opcode_info(op::kCnp).transport == Transport::CNP);
}

TEST_CASE("opcode table: reserved opcodes are invalid", "[opcode]") {
    for (int opc : {0x15, 0x18, 0x1F, 0x2C, 0x3F, 0x40, 0x5F, 0x60, 0x63, 0x66, 0x80, 0x82, 0xC0, 0xFF}) {
        INFO("opcode " << opc);
        CHECK_FALSE(opcode_info(static_cast<uint8_t>(opc)).valid());
        CHECK(opcode_info(static_cast<uint8_t>(opc)).name == "INVALID");
    }
}

TEST_CASE("opcode table: header lengths", "[opcode]") {
    CHECK(opcode_info(op::kRcSendMiddle).header_length == Bth::kSize);
    CHECK(opcode_info(op::kRcWriteFirst).header_length == Bth::kSize + Reth::kSize);
    CHECK(opcode_info(op::kRcReadRequest).header_length == Bth::kSize + Reth::kSize);
    CHECK(opcode_info(op::kRcReadResponseFirst).header_length == Bth::kSize + Aeth::kSize);
    CHECK(opcode_info(op::kRcReadResponseMiddle).header_length == Bth::kSize);
    CHECK(opcode_info(op::kRcCompareSwap).header_length == Bth::kSize + AtomicEth::kSize);
    CHECK(opcode_info(op::kRcSendLastInv).header_length == Bth::kSize + Ieth::kSize);
    CHECK(opcode_info(op::kUdSendOnly).header_length == Bth::kSize + Deth::kSize);
    CHECK_FALSE(opcode_info(op::kRcAcknowledge).has_payload);
    CHECK_FALSE(opcode_info(op::kRcReadRequest).has_payload);
    CHECK(opcode_info(op::kRcReadResponseOnly).has_payload);
    CHECK(opcode_info(op::kRcReadRequest).is_request());
    CHECK(opcode_info(op::kRcReadResponseLast).is_response());
    CHECK(opcode_info(op::kRcReadResponseLast).kind == OpKind::RdmaReadResponse);
}
