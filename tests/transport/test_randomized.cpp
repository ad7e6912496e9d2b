// Thousands of mixed operations under random faults, checked against a shadow model of the
// responder's memory. RC executes requests in PSN order, so a READ sees every earlier WRITE;
// WRITEs carry the fence so they cannot pass an earlier READ.
// A failure prints the seed; rerun with RNIC_SEED=<seed> to replay it exactly.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <random>

#include "engine_fixture.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

namespace {

struct Expectation {
    WrOpcode op;
    size_t local_offset = 0;     // where READ data / atomic result lands in a's buffer
    std::vector<uint8_t> data;   // expected READ data, or 8 bytes of atomic original
};

void run_random(uint64_t seed, uint32_t ops) {
    INFO("seed=" << seed << " (replay: RNIC_SEED=" << seed << ")");
    std::mt19937_64 rng(seed);
    sim::LinkConfig link;
    link.latency_ns = 1000 + rng() % 5000;
    link.jitter_ns = rng() % 2000;
    link.loss_probability = (rng() % 6) / 100.0;
    link.duplicate_probability = (rng() % 4) / 100.0;
    link.duplicate_delay_max_ns = 40'000;
    link.reorder_probability = (rng() % 4) / 100.0;
    link.corrupt_probability = (rng() % 3) / 100.0;
    INFO("loss=" << link.loss_probability << " dup=" << link.duplicate_probability
                 << " reorder=" << link.reorder_probability << " corrupt=" << link.corrupt_probability);
    TwoNodes t(seed, link);
    constexpr size_t kRemote = 1 << 18, kLocal = 1 << 22, kCounter = kRemote - 64;
    t.setup(kLocal);
    QpOptions o;
    const Mtu mtus[] = {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096};
    o.mtu = mtus[rng() % 5];
    o.timeout = 8;
    o.max_rd_atomic = static_cast<uint8_t>(1 + rng() % 16);
    t.connect(o);
    INFO("mtu=" << mtu_bytes(o.mtu) << " max_rd_atomic=" << int(o.max_rd_atomic));

    std::vector<uint8_t> shadow(kRemote, 0);  // what b's first kRemote bytes must hold
    std::memset(t.b.buf.data(), 0, kRemote);
    fill_pattern(t.a.buf, static_cast<uint32_t>(seed));
    std::vector<Expectation> expect;
    std::vector<std::vector<uint8_t>> sends;
    size_t local_cursor = 0;
    auto local_area = [&](size_t n) {
        if (local_cursor + n > kLocal / 2) local_cursor = 0;
        const size_t off = kLocal / 2 + local_cursor;
        local_cursor += (n + 7) & ~size_t{7};
        return off;
    };
    const size_t recv_slot = 16384;
    uint32_t recvs_posted = 0;

    for (uint32_t i = 0; i < ops; ++i) {
        const uint32_t kind = rng() % 6;
        const uint32_t len = static_cast<uint32_t>(rng() % (kind == 0 ? recv_slot : 12000));
        const size_t src = rng() % (kLocal / 2 - 16384);
        const uint64_t raddr = rng() % (kCounter - 12000);
        SendWr wr;
        wr.wr_id = i;
        wr.send_flags = SendFlag::Signaled;
        wr.rkey = t.b.mr.rkey;
        Expectation e;
        switch (kind) {
            case 0: {
                wr.opcode = WrOpcode::Send;
                wr.sg_list = {{t.a.addr(src), len, t.a.mr.lkey}};
                sends.emplace_back(t.a.buf.begin() + static_cast<long>(src), t.a.buf.begin() + static_cast<long>(src + len));
                const size_t slot = kRemote + (recvs_posted % 64) * recv_slot;
                REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{recvs_posted, {{t.b.addr(slot), static_cast<uint32_t>(recv_slot), t.b.mr.lkey}}}) == 0);
                ++recvs_posted;
                break;
            }
            case 1:
            case 2:
                wr.opcode = WrOpcode::RdmaWrite;
                // Without the fence a WRITE may overtake an earlier READ of the same bytes at
                // the responder (IBA ordering rules; the fence is how an application asks).
                wr.send_flags |= SendFlag::Fence;
                wr.sg_list = {{t.a.addr(src), len, t.a.mr.lkey}};
                wr.remote_addr = t.b.addr(raddr);
                std::memcpy(shadow.data() + raddr, t.a.buf.data() + src, len);
                break;
            case 3: {
                wr.opcode = WrOpcode::RdmaRead;
                const size_t dst = local_area(len);
                wr.sg_list = {{t.a.addr(dst), len, t.a.mr.lkey}};
                wr.remote_addr = t.b.addr(raddr);
                e.local_offset = dst;
                e.data.assign(shadow.begin() + static_cast<long>(raddr), shadow.begin() + static_cast<long>(raddr + len));
                break;
            }
            default: {
                const bool cas = kind == 4;
                wr.opcode = cas ? WrOpcode::AtomicCmpAndSwp : WrOpcode::AtomicFetchAndAdd;
                const size_t dst = local_area(8);
                wr.sg_list = {{t.a.addr(dst), 8, t.a.mr.lkey}};
                wr.remote_addr = t.b.addr(kCounter);
                uint64_t before;
                std::memcpy(&before, shadow.data() + kCounter, 8);
                const uint64_t arg = rng() % 1000;
                wr.compare_add = cas ? (rng() % 2 ? before : before + 1) : arg;
                wr.swap = arg;
                const uint64_t after = cas ? (wr.compare_add == before ? arg : before) : before + arg;
                std::memcpy(shadow.data() + kCounter, &after, 8);
                e.local_offset = dst;
                e.data.resize(8);
                std::memcpy(e.data.data(), &before, 8);
                break;
            }
        }
        e.op = wr.opcode;
        expect.push_back(std::move(e));
        // Keep the send queue within its depth: drain completions as we go.
        while (t.a.e().post_send(t.a.qpn, wr) == ENOMEM) t.run_until([] { return false; }, 100'000);
        if (i % 64 == 63) {
            auto sc = t.wait_cq(t.a, t.a.send_cq, 64, 120'000'000'000ull);
            REQUIRE(sc.size() == 64);
            for (const auto& wc : sc) {
                INFO(describe(wc));
                REQUIRE(wc.status == WcStatus::Success);
                const Expectation& ex = expect[wc.wr_id];
                if (!ex.data.empty()) {
                    size_t first_diff = 0;
                    while (first_diff < ex.data.size() && t.a.buf[ex.local_offset + first_diff] == ex.data[first_diff])
                        ++first_diff;
                    INFO("first differing byte " << first_diff << " of " << ex.data.size());
                    REQUIRE(std::memcmp(t.a.buf.data() + ex.local_offset, ex.data.data(), ex.data.size()) == 0);
                }
            }
            auto rc = t.wait_cq(t.b, t.b.recv_cq, sends.size(), 120'000'000'000ull);
            REQUIRE(rc.size() == sends.size());
            for (size_t k = 0; k < rc.size(); ++k) {
                REQUIRE(rc[k].status == WcStatus::Success);
                REQUIRE(rc[k].byte_len == sends[k].size());
                const size_t slot = kRemote + (rc[k].wr_id % 64) * recv_slot;
                REQUIRE(std::memcmp(t.b.buf.data() + slot, sends[k].data(), sends[k].size()) == 0);
            }
            sends.clear();
        }
    }
    t.wait_cq(t.a, t.a.send_cq, ops % 64, 120'000'000'000ull);
    t.run_until([] { return false; }, 10'000'000);
    REQUIRE(std::memcmp(t.b.buf.data(), shadow.data(), kRemote) == 0);
    const auto& c = *t.a.e().qp_counters(t.a.qpn);
    INFO("retransmits=" << c.retransmits << " seq_naks=" << c.seq_naks_received << " timeouts=" << c.local_ack_timeout_err);
    SUCCEED();
}

}  // namespace

TEST_CASE("randomized mixed operations under random faults", "[engine][random]") {
    if (const char* s = std::getenv("RNIC_SEED")) {
        run_random(std::strtoull(s, nullptr, 10), 2048);
        return;
    }
    for (uint64_t seed : {1ull, 2ull, 3ull, 4ull, 5ull}) run_random(seed, 2048);
}
