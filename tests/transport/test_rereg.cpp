// ibv_rereg_mr under traffic: a WRITE or READ in flight when its region is re-registered fails
// with a remote access error instead of landing (or being read) half through the old translation
// and half through the new one; the next message uses the new translation whole.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine_fixture.hpp"
#include "rnic/memory/mr_rereg.hpp"

using namespace rnic::test;
using namespace rnic::transport;

namespace {

constexpr size_t kBuf = 64 * 1024;  // 64 packets at MTU 1024

struct Fresh {  // page-aligned, zeroed: the region's next translation
    std::unique_ptr<uint8_t, decltype(&std::free)> p{static_cast<uint8_t*>(std::aligned_alloc(4096, kBuf)), &std::free};
    Fresh() { std::memset(p.get(), 0, kBuf); }
    std::vector<uintptr_t> pages() const {
        std::vector<uintptr_t> v;
        for (size_t i = 0; i < kBuf / 4096; ++i) v.push_back(reinterpret_cast<uintptr_t>(p.get()) + i * 4096);
        return v;
    }
    bool untouched() const {
        for (size_t i = 0; i < kBuf; ++i)
            if (p.get()[i] != 0) return false;
        return true;
    }
};

rnic::mem::MrRereg to(const std::vector<uintptr_t>& pages, uint64_t iova) {
    rnic::mem::MrRereg c;
    c.change_translation = true;
    c.pages = pages;
    c.length = kBuf;
    c.iova = iova;
    return c;
}

// 1 Gb/s: a 1 KiB frame every ~8 us, so the test can act while a message is on the wire.
rnic::sim::LinkConfig slow_link() {
    rnic::sim::LinkConfig link;
    link.bandwidth_bps = 1'000'000'000;
    return link;
}

uint64_t rx_packets(Endpoint& ep) {
    return ep.e().total_qp_counters().rx_packets;
}

}  // namespace

TEST_CASE("re-registration under a multi-packet WRITE: the rest is refused, nothing lands in the new pages",
          "[engine][rereg]") {
    TwoNodes t(61, slow_link());
    t.setup(kBuf);
    t.connect();
    fill_pattern(t.a.buf, 3);
    Fresh fresh;
    const auto pages = fresh.pages();
    SendWr wr = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), static_cast<uint32_t>(kBuf), t.a.mr.lkey}});
    wr.rkey = t.b.mr.rkey;
    wr.remote_addr = t.b.addr();
    REQUIRE(t.a.e().post_send(t.a.qpn, wr) == 0);
    const uint64_t before = rx_packets(t.b);
    REQUIRE(t.run_until([&] { return rx_packets(t.b) >= before + 8; }));
    REQUIRE(rx_packets(t.b) < before + 64);  // the WRITE is still in flight
    REQUIRE(t.b.e().rereg_mr(t.b.mr.lkey, to(pages, t.b.addr())) == 0);
    const auto wc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::RemAccessErr);
    CHECK(fresh.untouched());
}

TEST_CASE("after a re-registration a whole WRITE and READ use the new pages", "[engine][rereg]") {
    TwoNodes t(62);
    t.setup(kBuf);
    t.connect();
    fill_pattern(t.a.buf, 5);
    Fresh fresh;
    const auto pages = fresh.pages();
    REQUIRE(t.b.e().rereg_mr(t.b.mr.lkey, to(pages, t.b.addr())) == 0);
    SendWr wr = make_wr(WrOpcode::RdmaWrite, 1, {{t.a.addr(), static_cast<uint32_t>(kBuf), t.a.mr.lkey}});
    wr.rkey = t.b.mr.rkey;
    wr.remote_addr = t.b.addr();
    REQUIRE(t.a.e().post_send(t.a.qpn, wr) == 0);
    auto wc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::Success);
    CHECK(std::memcmp(fresh.p.get(), t.a.buf.data(), kBuf) == 0);
    CHECK(std::all_of(t.b.buf.begin(), t.b.buf.end(), [](uint8_t b) { return b == 0; }));

    std::memset(t.a.buf.data(), 0, kBuf);
    SendWr rd = make_wr(WrOpcode::RdmaRead, 2, {{t.a.addr(), static_cast<uint32_t>(kBuf), t.a.mr.lkey}});
    rd.rkey = t.b.mr.rkey;
    rd.remote_addr = t.b.addr();
    REQUIRE(t.a.e().post_send(t.a.qpn, rd) == 0);
    wc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::Success);
    CHECK(std::memcmp(fresh.p.get(), t.a.buf.data(), kBuf) == 0);
}

TEST_CASE("re-registration under a multi-packet READ response: the READ fails, no new bytes are read",
          "[engine][rereg]") {
    TwoNodes t(63, slow_link());
    t.setup(kBuf);
    t.connect();
    fill_pattern(t.b.buf, 7);
    Fresh fresh;
    std::memset(fresh.p.get(), 0xEE, kBuf);  // what must never reach A
    const auto pages = fresh.pages();
    SendWr rd = make_wr(WrOpcode::RdmaRead, 2, {{t.a.addr(), static_cast<uint32_t>(kBuf), t.a.mr.lkey}});
    rd.rkey = t.b.mr.rkey;
    rd.remote_addr = t.b.addr();
    REQUIRE(t.a.e().post_send(t.a.qpn, rd) == 0);
    const auto responses = [&t] { return t.b.e().total_qp_counters().read_responses_sent; };
    const uint64_t before = responses();
    REQUIRE(t.run_until([&] { return responses() >= before + 4; }));
    REQUIRE(responses() < before + 64);  // the READ response is still going out
    REQUIRE(t.b.e().rereg_mr(t.b.mr.lkey, to(pages, t.b.addr())) == 0);
    const auto wc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::RemAccessErr);
    // Every byte A got is the old region's (or still A's zero), never the new one's.
    bool only_old = true;
    for (size_t i = 0; i < kBuf; ++i) only_old = only_old && (t.a.buf[i] == 0 || t.a.buf[i] == t.b.buf[i]);
    CHECK(only_old);
}
