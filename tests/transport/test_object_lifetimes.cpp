// What happens when an application destroys objects that others still use, and when the port is
// full: the engine answers as the kernel and rxe do (EBUSY where uverbs holds a reference, work
// that completes or fails cleanly otherwise) and never loses a QP's turn.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>

#include "engine_fixture.hpp"

using namespace rnic::test;
namespace sim = rnic::sim;

namespace {

// Takes at most `room` frames per transmit call, then reports itself full, as a port whose TX
// ring filled up mid-burst.
class TightSink : public FrameSink {
public:
    explicit TightSink(size_t room) : room_(room) {}
    std::span<uint8_t> allocate(size_t length) override {
        if (taken_ == room_) return {};
        buf_.resize(length);
        return buf_;
    }
    void commit(size_t length) override {
        frames.emplace_back(buf_.begin(), buf_.begin() + static_cast<long>(length));
        ++taken_;
    }
    void next_burst() { taken_ = 0; }
    std::vector<std::vector<uint8_t>> frames;

private:
    size_t room_;
    size_t taken_ = 0;
    std::vector<uint8_t> buf_;
};

}  // namespace

TEST_CASE("objects in use cannot be destroyed under their users (EBUSY), and can once free", "[engine][lifetimes]") {
    TwoNodes t(1);
    t.setup(8192);
    Engine& e = t.a.e();
    auto srq = e.create_srq(t.a.pd, {16, 1, 0});
    REQUIRE(srq);
    QpInitAttr init;
    init.pd = t.a.pd;
    init.send_cq = t.a.send_cq;
    init.recv_cq = t.a.recv_cq;
    init.srq = *srq;
    init.cap = {8, 0, 1, 1, 0};
    auto qp = e.create_qp(init);
    REQUIRE(qp);
    AddressVector av;
    av.dgid = t.b.e().config().gids[0];
    auto ah = e.create_ah(t.a.pd, av);
    REQUIRE(ah);

    CHECK(e.destroy_cq(t.a.send_cq) == EBUSY);
    CHECK(e.destroy_cq(t.a.recv_cq) == EBUSY);
    CHECK(e.destroy_srq(*srq) == EBUSY);
    CHECK(e.dealloc_pd(t.a.pd) == EBUSY);
    // Handles of one kind are not valid as another, though slot numbers coincide.
    CHECK(e.dealloc_pd(t.a.send_cq) == EINVAL);
    CHECK(e.destroy_cq(t.a.pd) == EINVAL);
    CHECK(e.destroy_ah(*srq) == EINVAL);

    REQUIRE(e.destroy_qp(qp->qpn) == 0);
    CHECK(e.destroy_qp(qp->qpn) == EINVAL);
    CHECK(e.post_send(qp->qpn, make_wr(WrOpcode::Send, 1, {})) == EINVAL);
    REQUIRE(e.destroy_srq(*srq) == 0);
    REQUIRE(e.destroy_cq(t.a.send_cq) == 0);
    REQUIRE(e.destroy_cq(t.a.recv_cq) == 0);
    CHECK(e.dealloc_pd(t.a.pd) == EBUSY);  // the AH and the MR
    REQUIRE(e.destroy_ah(*ah) == 0);
    CHECK(e.dealloc_pd(t.a.pd) == EBUSY);  // the MR
    REQUIRE(e.dereg_mr(t.a.mr.lkey) == 0);
    CHECK(e.dereg_mr(t.a.mr.lkey) == EINVAL);
    REQUIRE(e.dealloc_pd(t.a.pd) == 0);
    CHECK(e.pd_count() == 0);
    CHECK(e.cq_count() == 0);
    CHECK(e.qp_count() == 0);
    CHECK(e.mr_count() == 0);
}

TEST_CASE("a QP destroyed with work outstanding leaves no timer, turn or completion behind", "[engine][lifetimes]") {
    sim::LinkConfig link;
    link.drop_filter = [](std::span<const uint8_t>) { return true; };  // nothing is acknowledged
    TwoNodes t(2, link);
    t.setup(65536);
    t.connect();
    for (uint64_t i = 0; i < 20; ++i) {
        SendWr w = make_wr(WrOpcode::RdmaWrite, i, {{t.a.addr(), 4096, t.a.mr.lkey}});
        w.remote_addr = t.b.addr();
        w.rkey = t.b.mr.rkey;
        REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    }
    t.run_until([] { return false; }, 100'000);
    CHECK(t.a.e().armed_timers() == 1);  // the ACK timeout
    REQUIRE(t.a.e().destroy_qp(t.a.qpn) == 0);
    CHECK(t.a.e().armed_timers() == 0);
    CHECK_FALSE(t.a.e().has_pending_work());
    // Time passes; nothing fires, nothing completes.
    t.run_until([] { return false; }, 50'000'000);
    std::vector<WorkCompletion> wcs(32);
    CHECK(t.a.e().poll_cq(t.a.send_cq, wcs) == 0);
    CHECK(t.a.e().device_counters().internal_errors == 0);
}

TEST_CASE("a send whose MR was deregistered after posting fails with a protection error", "[engine][lifetimes]") {
    TwoNodes t(3);
    t.setup(8192);
    t.connect();
    // A second MR for the source, deregistered before the requester reaches the WQE.
    std::vector<uint8_t> src(4096, 0x5A);
    auto mr = t.a.e().reg_mr(t.a.pd, src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0xF);
    REQUIRE(mr);
    SendWr w = make_wr(WrOpcode::RdmaWrite, 7, {{reinterpret_cast<uint64_t>(src.data()), 4096, mr->lkey}});
    w.remote_addr = t.b.addr();
    w.rkey = t.b.mr.rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    REQUIRE(t.a.e().dereg_mr(mr->lkey) == 0);
    auto wcs = t.wait_cq(t.a, t.a.send_cq, 1);
    REQUIRE(wcs.size() == 1);
    CHECK(wcs[0].wr_id == 7);
    CHECK(wcs[0].status == WcStatus::LocProtErr);
    CHECK(std::count(t.b.buf.begin(), t.b.buf.end(), 0x5A) == 0);  // nothing was written
}

TEST_CASE("a READ whose target MR goes away before its response is built gets a remote access NAK",
          "[engine][lifetimes]") {
    TwoNodes t(4);
    t.setup(8192);
    t.connect();
    // b's READ target is a separate MR that b deregisters once the request arrived.
    std::vector<uint8_t> target(4096, 0x33);
    auto mr = t.b.e().reg_mr(t.b.pd, target.data(), target.size(), reinterpret_cast<uint64_t>(target.data()), 0xF);
    REQUIRE(mr);
    SendWr w = make_wr(WrOpcode::RdmaRead, 9, {{t.a.addr(), 4096, t.a.mr.lkey}});
    w.remote_addr = reinterpret_cast<uint64_t>(target.data());
    w.rkey = mr->rkey;
    REQUIRE(t.a.e().post_send(t.a.qpn, w) == 0);
    // Deliver the request to b without letting b transmit its response yet.
    std::vector<std::vector<uint8_t>> frames;
    VectorSink sink(frames);
    REQUIRE(t.a.e().transmit(sink, 1000, 16) == 1);
    REQUIRE(t.b.e().receive(frames[0], 1000).verdict == RxVerdict::Accepted);
    REQUIRE(t.b.e().dereg_mr(mr->lkey) == 0);
    frames.clear();
    REQUIRE(t.b.e().transmit(sink, 2000, 16) == 1);  // the NAK, not READ data
    REQUIRE(t.a.e().receive(frames[0], 2000).verdict == RxVerdict::Accepted);
    std::vector<WorkCompletion> wcs(4);
    REQUIRE(t.a.e().poll_cq(t.a.send_cq, wcs) == 1);
    CHECK(wcs[0].wr_id == 9);
    CHECK(wcs[0].status == WcStatus::RemAccessErr);
}

TEST_CASE("a QP whose turn ends on a full port keeps its place: UD and RC sends all leave", "[engine][backpressure]") {
    TwoNodes t(5);
    t.setup(65536);
    QpOptions o;
    o.type = QpType::Ud;
    t.connect(o);
    Engine& e = t.a.e();
    for (uint64_t i = 0; i < 100; ++i) {
        SendWr w = make_wr(WrOpcode::Send, i, {{t.a.addr(), 64, t.a.mr.lkey}});
        w.ah = t.ah_a_to_b;
        w.remote_qpn = t.b.qpn;
        w.remote_qkey = o.qkey;
        REQUIRE(e.post_send(t.a.qpn, w) == 0);
    }
    // Three frames fit per burst; nothing else ever wakes the QP (no frames arrive, no timers):
    // the QP must stay scheduled until its queue is empty.
    TightSink sink(3);
    for (int burst = 0; burst < 40; ++burst) {
        sink.next_burst();
        e.transmit(sink, 1000 + burst, 256);
    }
    CHECK(sink.frames.size() == 100);
    std::vector<WorkCompletion> wcs(128);
    CHECK(e.poll_cq(t.a.send_cq, wcs) == 100);
    CHECK_FALSE(e.has_pending_work());
}
