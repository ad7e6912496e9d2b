// A slow receiver under a deep send queue: every message takes several RNR rounds, and the
// requester's further packets in flight reach the responder out of sequence after each RNR NAK.
// Those rounds must cost only rnr_retry (7: infinite), never retry_cnt: `ib_send_bw -t 8` against
// a server that reposts its receives slowly used to fail with RETRY_EXC_ERR after 8 RNR rounds on
// one PSN, because each round was followed by a PSN-sequence-error NAK charged to retry_cnt.
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>

#include "engine_fixture.hpp"
#include "rnic/wire/icrc.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

namespace {

constexpr uint8_t kAethRnrNakType = 0x20;      // AETH syndrome bits 6:5 = 01
constexpr uint8_t kAethSeqNakSyndrome = 0x60;  // NAK, code 0: PSN sequence error
constexpr size_t kEthIpUdpBth = 14 + 20 + 8 + 12;

bool is_rc_ack(std::span<const uint8_t> f) {
    return f.size() >= kEthIpUdpBth + 4 + 4 && f[12] == 0x08 && f[13] == 0x00 && f[14 + 20 + 8] == 0x11;
}

// The frame of an RNR NAK turned into a PSN-sequence-error NAK for the same PSN: what a
// responder sends when the requester's next packet in flight reaches it after the RNR NAK.
std::vector<uint8_t> as_sequence_nak(std::span<const uint8_t> rnr) {
    std::vector<uint8_t> f(rnr.begin(), rnr.end());
    f[kEthIpUdpBth] = kAethSeqNakSyndrome;
    const uint32_t icrc = rnic::wire::compute_icrc(f.data() + 14, 20, f.size() - 14 - 4);
    for (int i = 0; i < 4; ++i) f[f.size() - 4 + static_cast<size_t>(i)] = static_cast<uint8_t>(icrc >> (8 * i));
    return f;
}

struct SlowReceiverRun {
    std::vector<WorkCompletion> send_wcs;
    std::vector<WorkCompletion> recv_wcs;
    uint64_t injected_seq_naks = 0;
    QpCounters a, b;  // requester's and responder's QP counters at the end
};

// ib_send_bw -F -m 1024 -s 2048 -n MESSAGES, client -t 8: the sender keeps 8 SENDs posted; the
// receiver posts one receive every `recv_interval_ns`, so each message waits several RNR timers
// (min_rnr_timer 12 = 0.64 ms). b's responder itself follows each RNR NAK with one sequence NAK
// for the same PSN when packets were in flight behind it (as rxe does). With `echo_seq_nak`,
// every RNR NAK b sends is followed by one more such NAK, injected `echo_delay_ns` after it (0:
// at once, inside the requester's RNR wait; longer than the RNR timer: after the wait).
SlowReceiverRun run_slow_receiver(uint64_t seed, uint32_t messages, uint64_t recv_interval_ns, bool echo_seq_nak,
                                  uint64_t echo_delay_ns = 0, double loss = 0) {
    constexpr uint32_t kSize = 2048, kDepth = 8;
    sim::LinkConfig link;
    link.latency_ns = 20'000;  // a few packets of the 8-deep window still in flight at each NAK
    link.bandwidth_bps = 10'000'000'000ull;
    link.loss_probability = loss;
    std::deque<std::pair<uint64_t, std::vector<uint8_t>>> to_inject;  // (due time, frame)
    const sim::Simulator* clock = nullptr;
    sim::LinkConfig b_to_a = link;
    if (echo_seq_nak) {
        b_to_a.drop_filter = [&to_inject, &clock, echo_delay_ns](std::span<const uint8_t> f) {
            if (is_rc_ack(f) && (f[kEthIpUdpBth] & 0x60) == kAethRnrNakType)
                to_inject.emplace_back(clock->now() + echo_delay_ns, as_sequence_nak(f));
            return false;
        };
    }
    TwoNodes t(seed, link);
    t.sim.link(t.id_b, t.id_a).config() = b_to_a;
    clock = &t.sim;
    t.setup(kSize * 2);
    QpOptions o;
    o.timeout = 14;  // perftest's default: 67 ms
    o.retry_cnt = 7;
    o.rnr_retry = 7;
    o.min_rnr_timer = 12;  // perftest's default: 0.64 ms
    t.connect(o);

    SlowReceiverRun out;
    uint32_t posted = 0, recvs_posted = 0;
    std::vector<WorkCompletion> batch(16);
    auto post_sends = [&] {
        while (posted < messages && posted - out.send_wcs.size() < kDepth) {
            REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, posted, {{t.a.addr(), kSize, t.a.mr.lkey}})) ==
                    0);
            ++posted;
        }
    };
    auto failed = [&] {
        for (const WorkCompletion& wc : out.send_wcs)
            if (wc.status != WcStatus::Success) return true;
        return false;
    };
    auto receive_due = [&] { return recvs_posted < messages && t.sim.now() >= (recvs_posted + 1) * recv_interval_ns; };
    auto step = [&] {
        while (!to_inject.empty() && to_inject.front().first <= t.sim.now()) {
            t.sim.send(t.id_b, to_inject.front().second);
            to_inject.pop_front();
            ++out.injected_seq_naks;
        }
        int n;
        while ((n = t.a.e().poll_cq(t.a.send_cq, batch)) > 0)
            out.send_wcs.insert(out.send_wcs.end(), batch.begin(), batch.begin() + n);
        while ((n = t.b.e().poll_cq(t.b.recv_cq, batch)) > 0)
            out.recv_wcs.insert(out.recv_wcs.end(), batch.begin(), batch.begin() + n);
        if (failed()) return true;
        post_sends();
        return out.send_wcs.size() >= messages || receive_due();
    };
    post_sends();
    // Bounded: each pass posts a receive, or ends the run (done, failed, or stuck for 200 ms:
    // longer than a 67 ms ACK timeout).
    for (uint32_t pass = 0; pass <= messages + 1; ++pass) {
        if (!t.run_until(step, 200'000'000) || failed() || out.send_wcs.size() >= messages) break;
        if (receive_due()) {
            REQUIRE(t.b.e().post_recv(t.b.qpn, RecvWr{recvs_posted, {{t.b.addr(), kSize, t.b.mr.lkey}}}) == 0);
            ++recvs_posted;
        }
    }
    // Let the last ACKs and receive completions land (under loss: after some ACK timeouts).
    if (!failed())
        t.run_until([&] { return step() || (out.send_wcs.size() >= messages && out.recv_wcs.size() >= messages); },
                    2'000'000'000);
    out.a = *t.a.e().qp_counters(t.a.qpn);
    out.b = *t.b.e().qp_counters(t.b.qpn);
    return out;
}

void check_all_delivered(const SlowReceiverRun& r, uint32_t messages) {
    for (const WorkCompletion& wc : r.send_wcs) {
        INFO(describe(wc));
        REQUIRE(wc.status == WcStatus::Success);
    }
    REQUIRE(r.send_wcs.size() == messages);
    REQUIRE(r.recv_wcs.size() == messages);
    for (uint32_t i = 0; i < messages; ++i) {
        CHECK(r.recv_wcs[i].status == WcStatus::Success);
        CHECK(r.recv_wcs[i].byte_len == 2048);
    }
}

}  // namespace

TEST_CASE("RNR rounds: a slow receiver under an 8-deep send queue never exhausts retry_cnt", "[engine][rnr]") {
    // 6 ms per receive against a 0.64 ms RNR timer: about 9 RNR rounds on each message's first
    // PSN, more than retry_cnt (7) allows retries.
    constexpr uint32_t kMessages = 24;
    const SlowReceiverRun r = run_slow_receiver(61, kMessages, 6'000'000, /*echo_seq_nak=*/false);
    check_all_delivered(r, kMessages);
    CHECK(r.a.rnr_naks_received >= 5 * kMessages);
    CHECK(r.a.local_ack_timeout_err == 0);
    // The packets in flight behind each RNR-NAKed PSN drew a sequence NAK for it (one per gap,
    // as rxe sends), and none of those was charged as a sequence error.
    CHECK(r.b.seq_naks_sent >= 5 * kMessages);
    CHECK(r.a.seq_naks_received == r.b.seq_naks_sent);
    CHECK(r.a.packet_seq_err == 0);
}

TEST_CASE("RNR rounds: an extra sequence NAK echoing each RNR NAK is not charged to retry_cnt",
          "[engine][rnr]") {
    constexpr uint32_t kMessages = 24;
    const SlowReceiverRun r = run_slow_receiver(62, kMessages, 6'000'000, /*echo_seq_nak=*/true);
    CHECK(r.injected_seq_naks >= 5 * kMessages);
    check_all_delivered(r, kMessages);
    CHECK(r.a.seq_naks_received >= r.injected_seq_naks);
    CHECK(r.a.packet_seq_err == 0);
    CHECK(r.a.local_ack_timeout_err == 0);
}

TEST_CASE("RNR rounds: a sequence NAK echoing an RNR NAK after the RNR wait is not charged either", "[engine][rnr]") {
    // 0.66 ms: past the 0.64 ms RNR timer, before the retransmission's own RNR NAK is back.
    constexpr uint32_t kMessages = 24;
    const SlowReceiverRun r = run_slow_receiver(64, kMessages, 6'000'000, /*echo_seq_nak=*/true, 660'000);
    CHECK(r.injected_seq_naks >= 5 * kMessages);
    check_all_delivered(r, kMessages);
    CHECK(r.a.packet_seq_err == 0);
    CHECK(r.a.local_ack_timeout_err == 0);
}

TEST_CASE("RNR rounds: under 5% loss each way the RNR rounds still end in delivery", "[engine][rnr][faults]") {
    // Lost RNR NAKs, echoes and retransmissions: an ignored echo must never leave the requester
    // waiting for nothing (the ACK timeout covers a lost retransmission).
    constexpr uint32_t kMessages = 24;
    const SlowReceiverRun r = run_slow_receiver(65, kMessages, 6'000'000, /*echo_seq_nak=*/false, 0, 0.05);
    check_all_delivered(r, kMessages);
    CHECK(r.a.rnr_naks_received >= kMessages / 2);  // receives pile up during 67 ms timeouts
}

TEST_CASE("RNR rounds: sequence NAKs with no RNR NAK pending still cost retry_cnt", "[engine][rnr]") {
    // Every RNR NAK b sends is lost, its sequence NAK (for the packet behind) arrives: to the
    // requester that is a plain sequence error each time, and retry_cnt 7 allows 7 rewinds.
    sim::LinkConfig b_to_a;
    b_to_a.drop_filter = [](std::span<const uint8_t> f) {
        return is_rc_ack(f) && (f[kEthIpUdpBth] & 0x60) == kAethRnrNakType;
    };
    TwoNodes t(63);
    t.sim.link(t.id_b, t.id_a).config() = b_to_a;
    t.setup(4096);
    QpOptions o;
    o.retry_cnt = 7;
    o.rnr_retry = 7;
    t.connect(o);
    REQUIRE(t.a.e().post_send(t.a.qpn, make_wr(WrOpcode::Send, 1, {{t.a.addr(), 2048, t.a.mr.lkey}})) == 0);
    auto sc = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::RetryExcErr);
    const QpCounters& a = *t.a.e().qp_counters(t.a.qpn);
    CHECK(a.rnr_naks_received == 0);
    CHECK(a.packet_seq_err == 8);  // 7 retries, the 8th NAK fails the QP
    CHECK(a.local_ack_timeout_err == 0);
}
