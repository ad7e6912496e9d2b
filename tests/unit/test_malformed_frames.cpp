// Broken frames: every truncation, every single-bit flip, illegal opcodes, pad counts and
// versions. The parser must name the right rule and never read outside the frame (the
// sanitizer build runs these too).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <vector>

#include "pcap_file.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/icrc.hpp"
#include "rnic/wire/inet_checksum.hpp"
#include "rnic/wire/parser.hpp"
#include "sample_frames.hpp"

using namespace rnic::wire;

namespace {

using Frame = std::vector<uint8_t>;

std::string golden(const char* name) {
    const char* env = std::getenv("RNIC_GOLDEN_DIR");
    return std::string(env ? env : RNIC_GOLDEN_DIR) + "/" + name;
}

// A few real rxe frames of different shapes: SEND_ONLY with payload, ACK, READ request,
// atomic, UD with DETH, and an IPv6 WRITE_FIRST.
std::vector<Frame> real_frames() {
    std::vector<Frame> out;
    auto take = [&](const char* file, std::initializer_list<size_t> indices) {
        const auto frames = rnic::tools::read_all_frames(golden(file));
        for (size_t i : indices) out.push_back(frames.at(i).bytes);
    };
    take("rxe_rc_pingpong_mtu1024_s64.pcap", {0, 1});
    take("rxe_read_lat_mtu1024_s64.pcap", {0, 1});
    take("rxe_atomic_bw_fetch_add.pcap", {0, 1});
    take("rxe_ud_pingpong_mtu1024_s1024.pcap", {0});
    take("rxe_ipv6_write_bw_mtu1024_s8192.pcap", {0});
    return out;
}

// Recomputes the IPv4 checksum and the ICRC after a test edited header fields, using the
// layout of the frame before the edit (the edited one may no longer parse).
void reseal(Frame& f, const RoceFrame& layout) {
    uint8_t* ip = f.data() + layout.l3_offset;
    const size_t ip_header = layout.l4_offset - layout.l3_offset;
    if (layout.ip_version == 4) store_be16(ip + 10, ipv4_header_checksum(ip, ip_header));
    store_le32(f.data() + layout.frame_length - 4,
               compute_icrc(ip, ip_header, layout.frame_length - 4 - layout.l3_offset));
}


// Cuts (or zero-extends) the transport packet to `transport_length` bytes and fixes IP/UDP
// lengths to match, so the error is found in the transport layer rather than as a short IP
// packet.
Frame with_transport_length(const Frame& original, size_t transport_length) {
    auto p = parse_frame(original);
    REQUIRE(p);
    Frame f = original;  // longer transport lengths grow the frame with zero bytes
    f.resize(p->bth_offset + transport_length);
    const uint16_t udp_length = static_cast<uint16_t>(UdpHeader::kSize + transport_length);
    store_be16(f.data() + p->l4_offset + 4, udp_length);
    uint8_t* ip = f.data() + p->l3_offset;
    if (p->ip_version == 4) {
        store_be16(ip + 2, static_cast<uint16_t>(p->l4_offset - p->l3_offset + udp_length));
        store_be16(ip + 10, ipv4_header_checksum(ip, p->l4_offset - p->l3_offset));
    } else {
        store_be16(ip + 4, udp_length);
    }
    return f;
}

ParseErrc error_of(const Frame& f, const ParseOptions& opt = {}) {
    auto p = parse_frame(f, opt);
    REQUIRE_FALSE(p.has_value());
    return p.error().code;
}

}  // namespace

TEST_CASE("every truncation of real frames is an error naming the layer", "[malformed]") {
    for (const Frame& full : real_frames()) {
        REQUIRE(parse_frame(full));
        for (size_t len = 0; len < full.size(); ++len) {
            INFO("length " << len << " of " << full.size());
            // A heap copy of exactly `len` bytes, so ASan sees any read past the end.
            const Frame cut(full.begin(), full.begin() + static_cast<long>(len));
            const ParseErrc e = error_of(cut);
            if (len < EthernetHeader::kSize) CHECK(e == ParseErrc::TruncatedEthernet);
            else CHECK(e == ParseErrc::TruncatedIp);
        }
    }
}

TEST_CASE("short transport packets with consistent IP/UDP lengths", "[malformed]") {
    const auto frames = real_frames();
    const Frame& send = frames[0];  // RC_SEND_ONLY, 64 B
    const Frame& ack = frames[1];   // RC_ACKNOWLEDGE
    const Frame& atomic = frames[4];  // RC_FETCH_ADD
    CHECK(error_of(with_transport_length(send, 0)) == ParseErrc::TruncatedBth);
    CHECK(error_of(with_transport_length(send, 11)) == ParseErrc::TruncatedBth);
    CHECK(error_of(with_transport_length(ack, 12)) == ParseErrc::HeaderMissing);
    CHECK(error_of(with_transport_length(ack, 15)) == ParseErrc::HeaderMissing);
    CHECK(error_of(with_transport_length(ack, 16)) == ParseErrc::MissingIcrc);
    CHECK(error_of(with_transport_length(atomic, 12 + 27)) == ParseErrc::HeaderMissing);
    CHECK(error_of(with_transport_length(send, 12 + 4 + 2)) == ParseErrc::BadPacketLength);
    CHECK(error_of(with_transport_length(send, 12 + 4 + 8)) == ParseErrc::BadIcrc);
}

TEST_CASE("every single-bit flip past the Ethernet header is caught unless the bit is variant", "[malformed]") {
    for (const Frame& good : real_frames()) {
        auto p = parse_frame(good);
        REQUIRE(p);
        const size_t l3 = p->l3_offset;
        const size_t bth_byte4 = p->bth_offset + 4;
        const size_t payload_begin = static_cast<size_t>(p->payload.data() - good.data());
        const size_t icrc_begin = p->frame_length - 4;
        for (size_t byte = 0; byte < good.size(); ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                Frame f = good;
                f[byte] ^= static_cast<uint8_t>(1u << bit);
                auto r = parse_frame(f);
                INFO("byte " << byte << " bit " << bit);
                const size_t ip_off = byte - l3;
                const bool ipv6_variant = p->ip_version == 6 && byte >= l3 &&
                                          (ip_off <= 3 || ip_off == 7) && !(ip_off == 0 && bit >= 4);
                if (byte < l3) {
                    // MAC addresses are outside the ICRC (the FCS covers them on a real link);
                    // the EtherType is not.
                    if (byte >= 12) CHECK_FALSE(r.has_value());
                } else if (byte == bth_byte4 || ipv6_variant) {
                    CHECK(r.has_value());  // FECN/BECN/resv6 and IPv6 TC/flow label/hop limit are masked
                } else if (byte >= payload_begin && byte < icrc_begin + 4 && byte >= icrc_begin - p->pad.size() - p->payload.size()) {
                    REQUIRE_FALSE(r.has_value());
                    CHECK(r.error().code == ParseErrc::BadIcrc);
                } else {
                    CHECK_FALSE(r.has_value());
                }
            }
        }
    }
}

TEST_CASE("illegal opcodes, bad pad counts and BTH versions", "[malformed]") {
    const auto frames = real_frames();
    for (int opc = 0; opc < 256; ++opc) {
        if (opcode_info(static_cast<uint8_t>(opc)).valid()) continue;
        Frame f = frames[0];
        auto p = parse_frame(f);
        f[p->bth_offset] = static_cast<uint8_t>(opc);
        reseal(f, *p);
        INFO("opcode " << opc);
        CHECK(error_of(f) == ParseErrc::IllegalOpcode);
    }
    for (uint8_t tver = 1; tver < 16; ++tver) {
        Frame f = frames[0];
        auto p = parse_frame(f);
        f[p->bth_offset + 1] = static_cast<uint8_t>((f[p->bth_offset + 1] & 0xF0) | tver);
        reseal(f, *p);
        CHECK(error_of(f) == ParseErrc::BadBthVersion);
    }
    {
        Frame ack = frames[1];  // no payload: any pad count is wrong
        auto p = parse_frame(ack);
        ack[p->bth_offset + 1] |= 0x10;
        reseal(ack, *p);
        CHECK(error_of(ack) == ParseErrc::BadPadCount);
    }
    {
        // A 1-byte SEND carries 3 pad bytes; pad counts 0..3 are all legal, so grow a 0-byte
        // SEND instead: its 0 bytes of payload admit no pad at all.
        FrameSpec s;
        s.src_gid = Gid::from_ipv4(0x0A000001);
        s.dst_gid = Gid::from_ipv4(0x0A000002);
        s.bth.opcode = op::kRcSendOnly;
        Frame f(128);
        auto n = build_frame(s, f);
        REQUIRE(n);
        f.resize(*n);
        auto p = parse_frame(f);
        REQUIRE(p);
        f[p->bth_offset + 1] |= 0x20;
        reseal(f, *p);
        CHECK(error_of(f) == ParseErrc::BadPadCount);
    }
    {
        auto layout = parse_frame(frames[1]);
        Frame ack = with_transport_length(frames[1], 12 + 4 + 4 + 4);  // ACK + 4 bytes payload
        layout->frame_length += 4;
        reseal(ack, *layout);
        CHECK(error_of(ack) == ParseErrc::PayloadNotAllowed);
    }
}

TEST_CASE("IP and UDP layer errors", "[malformed]") {
    const auto frames = real_frames();
    Frame f = frames[0];
    f[12] = 0x08;
    f[13] = 0x06;  // ARP
    CHECK(error_of(f) == ParseErrc::NotIp);
    CHECK(is_not_rocev2(ParseErrc::NotIp));

    f = frames[0];
    f[14] = 0x65;  // version 6 in an IPv4 EtherType
    CHECK(error_of(f) == ParseErrc::BadIpVersion);
    f[14] = 0x44;  // IHL 4
    CHECK(error_of(f) == ParseErrc::BadIpHeaderLength);

    f = frames[0];
    auto layout = parse_frame(f);
    f[14 + 9] = 6;  // TCP
    reseal(f, *layout);
    CHECK(error_of(f) == ParseErrc::NotUdp);

    f = frames[0];
    store_be16(f.data() + 14 + 20 + 2, 4790);
    CHECK(error_of(f) == ParseErrc::WrongPort);
    CHECK(parse_frame(f, ParseOptions{.udp_port = 4790}).error().code == ParseErrc::BadIcrc);

    f = frames[0];
    store_be16(f.data() + 14 + 6, 0x2001);  // DF cleared, MF set
    reseal(f, *layout);
    CHECK(error_of(f) == ParseErrc::IpFragment);

    f = frames[0];
    store_be16(f.data() + 14 + 20 + 4, static_cast<uint16_t>(load_be16(f.data() + 14 + 20 + 4) - 4));
    CHECK(error_of(f) == ParseErrc::BadUdpLength);

    f = frames[0];
    store_be16(f.data() + 14 + 2, 19);  // total length below the header
    CHECK(error_of(f) == ParseErrc::BadIpTotalLength);

    // An IPv6 header with an IPv4-mapped source address.
    Frame v6 = frames.back();
    auto v6layout = parse_frame(v6);
    REQUIRE(v6layout);
    REQUIRE(v6layout->ip_version == 6);
    const Gid mapped = Gid::from_ipv4(0x0A000001);
    std::copy(mapped.raw.begin(), mapped.raw.end(), v6.begin() + static_cast<long>(v6layout->l3_offset + 8));
    reseal(v6, *v6layout);
    CHECK(error_of(v6) == ParseErrc::MappedIpv6Address);

    // A correct non-zero UDP checksum is accepted (the ICRC masks the field), a wrong one is not.
    f = frames[0];
    auto p = parse_frame(f);
    const uint16_t ck = udp_checksum(f.data() + 14, f.data() + 34, p->udp.length);
    store_be16(f.data() + 34 + 6, ck);
    CHECK(parse_frame(f).has_value());
    store_be16(f.data() + 34 + 6, static_cast<uint16_t>(ck ^ 0x0100));
    CHECK(error_of(f) == ParseErrc::BadUdpChecksum);
}

TEST_CASE("random bytes never crash the parser", "[malformed]") {
    std::mt19937 rng(12345);
    const auto samples = rnic::tools::build_sample_frames();
    size_t accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        Frame f;
        if (i % 2 == 0) {
            f.resize(rng() % 200);
            for (auto& b : f) b = static_cast<uint8_t>(rng());
        } else {
            // Mutate a valid frame in a few places, keeping the headers mostly plausible.
            f = samples[rng() % samples.size()];
            for (int k = 0; k < 3; ++k) f[rng() % f.size()] = static_cast<uint8_t>(rng());
            f.resize(rng() % (f.size() + 1));
        }
        auto r = parse_frame(f, ParseOptions{.verify_icrc = (i % 4) != 1});
        if (r) {
            ++accepted;
            REQUIRE(r->frame_length <= f.size());
            REQUIRE(r->payload.data() + r->payload.size() <= f.data() + f.size());
        }
    }
    SUCCEED("accepted " << accepted);
}

TEST_CASE("every error code has a name and a sentence", "[malformed]") {
    for (size_t i = 0; i < kParseErrcCount; ++i) {
        const auto c = static_cast<ParseErrc>(i);
        CHECK(parse_errc_name(c) != "unknown");
        CHECK(parse_errc_text(c) != "unknown error");
    }
}
