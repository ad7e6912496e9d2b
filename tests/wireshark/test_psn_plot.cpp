// rnic-pcap --plot's pieces on frames built by the wire library: what each frame becomes
// (request, retransmission, ACK, NAK by code, RNR NAK, READ response, repeat, CNP), how
// response flows pair with the request flows they answer, PSN wrap, and the SVG text.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "psn_events.hpp"
#include "psn_plot.hpp"
#include "rnic/wire/aeth.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/parser.hpp"
#include "svg_writer.hpp"

using namespace rnic::tools;
namespace wire = rnic::wire;

namespace {

constexpr uint32_t kA = 0x0A000001, kB = 0x0A000002;

struct Builder {
    PsnTracker tracker;
    uint64_t frame = 0;

    void add(uint32_t src, uint32_t dst, uint8_t opcode, uint32_t dest_qp, uint32_t psn,
             std::optional<uint8_t> syndrome = {}, uint64_t t_ns = 0) {
        wire::FrameSpec s;
        s.src_gid = wire::Gid::from_ipv4(src);
        s.dst_gid = wire::Gid::from_ipv4(dst);
        s.bth.opcode = opcode;
        s.bth.dest_qp = dest_qp;
        s.bth.psn = psn & 0xFFFFFF;
        const wire::OpcodeInfo& info = wire::opcode_info(opcode);
        if (info.has(wire::kExtReth)) s.ext.reth = wire::Reth{0x1000, 0x42, 8};
        if (info.has(wire::kExtAeth)) s.ext.aeth = wire::Aeth{syndrome.value_or(0x1F), 1};
        if (info.has(wire::kExtAtomicEth)) s.ext.atomic_eth = wire::AtomicEth{0x1000, 0x42, 1, 0};
        if (info.has(wire::kExtAtomicAckEth)) s.ext.atomic_ack_eth = wire::AtomicAckEth{0};
        static const std::array<uint8_t, 8> payload{};
        if (info.has_payload) s.payload = payload;
        std::array<uint8_t, 256> buf{};
        auto n = wire::build_frame(s, buf);
        REQUIRE(n);
        auto parsed = wire::parse_frame(std::span<const uint8_t>(buf.data(), *n));
        REQUIRE(parsed);
        ++frame;
        tracker.add(frame, t_ns ? t_ns : frame * 1000, *parsed, static_cast<uint32_t>(*n));
    }
};

FlowKey key(uint32_t src, uint32_t dst, uint32_t qp) {
    return {wire::Gid::from_ipv4(src).to_ip_string(), wire::Gid::from_ipv4(dst).to_ip_string(), qp};
}

std::vector<PsnEventKind> kinds(const PsnTracker& t, const FlowKey& k) {
    std::vector<PsnEventKind> out;
    for (const PsnEvent& e : t.flows().at(k).events) out.push_back(e.kind);
    return out;
}

size_t count(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("plot: a request PSN sent again is a retransmission, per flow", "[plot]") {
    Builder b;
    b.add(kA, kB, wire::op::kRcWriteFirst, 0x12, 10);
    b.add(kA, kB, wire::op::kRcWriteLast, 0x12, 11);
    b.add(kA, kB, wire::op::kRcWriteFirst, 0x12, 10);  // go-back-N
    b.add(kA, kB, wire::op::kRcSendOnly, 0x13, 10);    // another QP: its own PSN space
    b.add(kB, kA, wire::op::kRcSendOnly, 0x12, 10);    // the other direction too
    using K = PsnEventKind;
    CHECK(kinds(b.tracker, key(kA, kB, 0x12)) == std::vector<K>{K::Request, K::Request, K::Retransmission});
    CHECK(kinds(b.tracker, key(kA, kB, 0x13)) == std::vector<K>{K::Request});
    CHECK(kinds(b.tracker, key(kB, kA, 0x12)) == std::vector<K>{K::Request});
}

TEST_CASE("plot: AETH syndromes give ACK, NAK by code and RNR NAK", "[plot]") {
    Builder b;
    using wire::AethSyndrome;
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 5, AethSyndrome::ack().encode());
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 6, AethSyndrome::nak(wire::NakCode::PsnSequenceError).encode());
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 6, AethSyndrome::nak(wire::NakCode::RemoteAccessError).encode());
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 6, AethSyndrome::rnr_nak(12).encode());
    b.add(kB, kA, wire::op::kRcAtomicAcknowledge, 0x22, 7, AethSyndrome::ack().encode());
    const auto& ev = b.tracker.flows().at(key(kB, kA, 0x22)).events;
    REQUIRE(ev.size() == 5);
    CHECK(ev[0].kind == PsnEventKind::Ack);
    CHECK((ev[1].kind == PsnEventKind::Nak && ev[1].code == 0));
    CHECK((ev[2].kind == PsnEventKind::Nak && ev[2].code == 2));
    CHECK((ev[3].kind == PsnEventKind::RnrNak && ev[3].code == 12));
    CHECK(ev[4].kind == PsnEventKind::Ack);
}

TEST_CASE("plot: READ responses sent again and CNPs", "[plot]") {
    Builder b;
    b.add(kA, kB, wire::op::kRcReadRequest, 0x12, 100);
    b.add(kB, kA, wire::op::kRcReadResponseFirst, 0x22, 100);
    b.add(kB, kA, wire::op::kRcReadResponseLast, 0x22, 101);
    b.add(kB, kA, wire::op::kRcReadResponseFirst, 0x22, 100);
    b.add(kB, kA, 0x81, 0x22, 0);
    using K = PsnEventKind;
    CHECK(kinds(b.tracker, key(kB, kA, 0x22)) ==
          std::vector<K>{K::ReadResponse, K::ReadResponse, K::ReadResponseAgain, K::Cnp});
}

TEST_CASE("plot: PSN offsets and retransmissions across the 24-bit wrap", "[plot]") {
    CHECK(psn_offset(0, 0xFFFFFF) == 1);
    CHECK(psn_offset(0xFFFFFF, 0) == -1);
    CHECK(psn_offset(0x7FFFFF, 0) == 0x7FFFFF);
    CHECK(psn_offset(0x800000, 0) == -0x800000);
    Builder b;
    b.add(kA, kB, wire::op::kRcSendOnly, 0x12, 0xFFFFFF);
    b.add(kA, kB, wire::op::kRcSendOnly, 0x12, 0);
    b.add(kA, kB, wire::op::kRcSendOnly, 0x12, 0xFFFFFF);
    using K = PsnEventKind;
    CHECK(kinds(b.tracker, key(kA, kB, 0x12)) == std::vector<K>{K::Request, K::Request, K::Retransmission});
    const auto panels = b.tracker.panels();
    REQUIRE(panels.size() == 1);
    CHECK(panels[0].base_psn == 0xFFFFFF);
}

TEST_CASE("plot: each response flow goes with the request flow whose PSNs it answers", "[plot]") {
    Builder b;
    for (uint32_t i = 0; i < 10; ++i) {
        b.add(kA, kB, wire::op::kRcWriteOnly, 0x12, 100 + i);
        b.add(kA, kB, wire::op::kRcWriteOnly, 0x13, 5000 + i);
    }
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x23, 5009);  // QP 0x13's peer
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 109);   // QP 0x12's peer
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x99, 777777);  // answers nothing here
    const auto panels = b.tracker.panels();
    REQUIRE(panels.size() == 3);
    CHECK(panels[0].requests == key(kA, kB, 0x12));
    CHECK(panels[0].responses == key(kB, kA, 0x22));
    CHECK(panels[0].base_psn == 100);
    CHECK(panels[1].requests == key(kA, kB, 0x13));
    CHECK(panels[1].responses == key(kB, kA, 0x23));
    CHECK(!panels[2].requests);
    CHECK(panels[2].responses == key(kB, kA, 0x99));

    PlotSummary summary;
    const std::string svg = render_psn_plot(b.tracker, PlotOptions{}, summary);
    CHECK(summary.panels == 3);
    CHECK(summary.markers["ev-req"] == 20);
    CHECK(summary.markers["ev-ack"] == 3);
    CHECK(count(svg, "class=\"ev-req\"") == 20);  // every event drawn exactly once
    CHECK(count(svg, "class=\"ev-ack\"") == 3);
    CHECK(count(svg, "<svg ") == 1);
    CHECK(svg.find("Throughput per direction") != std::string::npos);
}

TEST_CASE("plot: RNR NAKs shade the wait until the next request", "[plot]") {
    Builder b;
    b.add(kA, kB, wire::op::kRcSendOnly, 0x12, 1, {}, 1000);
    b.add(kB, kA, wire::op::kRcAcknowledge, 0x22, 1, wire::AethSyndrome::rnr_nak(12).encode(), 2000);
    b.add(kA, kB, wire::op::kRcSendOnly, 0x12, 1, {}, 700000);
    PlotSummary summary;
    const std::string svg = render_psn_plot(b.tracker, PlotOptions{}, summary);
    CHECK(summary.markers["ev-rnr"] == 1);
    CHECK(summary.markers["ev-retx"] == 1);
    CHECK(summary.markers["rnr-wait"] == 1);
    CHECK(count(svg, "class=\"rnr-wait\"") == 1);
}

TEST_CASE("plot: panels past the limit are named, not drawn, and empty captures still draw", "[plot]") {
    Builder b;
    for (uint32_t qp = 0x10; qp < 0x15; ++qp) b.add(kA, kB, wire::op::kRcSendOnly, qp, 1);
    PlotOptions opt;
    opt.max_panels = 2;
    PlotSummary summary;
    std::string svg = render_psn_plot(b.tracker, opt, summary);
    CHECK(summary.panels == 2);
    CHECK(summary.panels_omitted == 3);
    CHECK(svg.find("3 more flow(s) not drawn") != std::string::npos);

    Builder late;  // a frame stamped before the first one (merged captures)
    late.add(kA, kB, wire::op::kRcSendOnly, 0x12, 1, {}, 5000);
    late.add(kA, kB, wire::op::kRcSendOnly, 0x12, 2, {}, 3000);
    CHECK(late.tracker.first_ns() == 3000);
    CHECK(late.tracker.last_ns() == 5000);

    PsnTracker empty;
    svg = render_psn_plot(empty, PlotOptions{}, summary);
    CHECK(summary.panels == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
}

TEST_CASE("plot: SVG text is escaped", "[plot][svg]") {
    CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
    CHECK(xml_escape(std::string("x\x01y\x1f", 4)) == "xy");
    SvgWriter w(10, 10);
    w.text(1, 1, "<&>");
    w.marker(MarkerShape::Dot, 1, 1, 1, "red", "c", "tip <1> & 2");
    const std::string doc = w.finish();
    CHECK(doc.find("&lt;&amp;&gt;</text>") != std::string::npos);
    CHECK(doc.find("<title>tip &lt;1&gt; &amp; 2</title></circle>") != std::string::npos);
    CHECK(doc.find("<&>") == std::string::npos);
}
