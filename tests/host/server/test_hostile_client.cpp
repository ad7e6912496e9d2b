// What clients may do that hurts, legal or not, through the rings and the socket (the cases the
// host fuzzer, tests/fuzz/fuzz_host_service.cpp, found or must keep finding harmless): each test
// ends with the daemon serving a well-behaved client.
#include <malloc.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "sanitizer.hpp"
#include "session_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

const wire::Gid kOwnGid4 = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
const wire::Gid kOwnGid6 = wire::Gid::from_ipv6(port::test::kSelfIp6);  // GID 2
constexpr uint32_t kQkey = 0x11111111;

#ifdef RNIC_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif

// Bytes of heap in use (ASan's allocator replaces malloc's in the sanitizer tree).
size_t heap_in_use() {
#ifdef RNIC_TEST_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#endif
}

// A PD, a registered buffer and one CQ: what every test's session starts from.
struct Basics {
    uint32_t pd = 0;
    Buffer buf;
    CqRing cq;
};

Basics basics(SessionClient& c, size_t buffer_bytes, uint32_t cqe) {
    Basics b;
    REQUIRE(c.hello() == 0);
    REQUIRE(c.alloc_pd(b.pd) == 0);
    REQUIRE(c.register_buffer(b.pd, buffer_bytes, 1, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead,
                              b.buf) == 0);
    REQUIRE(c.create_cq(cqe, 0, b.cq) == 0);
    return b;
}

QpRings make_qp(SessionClient& c, const Basics& b, uint32_t type, uint32_t depth) {
    abi::CreateQpRequest req{};
    req.qp_type = type;
    req.pd = b.pd;
    req.send_cq = req.recv_cq = b.cq.handle;
    req.cap = {depth, depth, 1, 1, 0};
    QpRings qp;
    REQUIRE(c.create_qp(req, qp) == 0);
    return qp;
}

// A SEND between two fresh RC QPs of a fresh session, checked byte for byte.
void well_behaved_send(ServiceRig& rig) {
    SessionClient c(rig);
    Basics b = basics(c, 2 * 4096, 16);
    QpRings x = make_qp(c, b, 2, 4), y = make_qp(c, b, 2, 4);
    REQUIRE(c.connect(x, y.qpn, kOwnGid4) == 0);
    REQUIRE(c.connect(y, x.qpn, kOwnGid4) == 0);
    for (int i = 0; i < 1000; ++i) b.buf.memory->data[i] = static_cast<uint8_t>(i * 13 + 5);
    const abi::Sge into{b.buf.iova() + 4096, 4096, b.buf.lkey};
    c.post_recv(y, 1, std::span(&into, 1));
    abi::SendWqe w{};
    w.wr_id = 2;
    w.opcode = 2;
    w.send_flags = 2;
    w.num_sge = 1;
    const abi::Sge from{b.buf.iova(), 1000, b.buf.lkey};
    c.post_send(x, w, std::span(&from, 1));
    const auto cqes = c.wait_cqes(b.cq, 2);
    REQUIRE(cqes.size() == 2);
    CHECK(cqes[0].status == 0);
    CHECK(cqes[1].status == 0);
    CHECK(std::memcmp(b.buf.memory->data, b.buf.memory->data + 4096, 1000) == 0);
}

}  // namespace

TEST_CASE("UD sends posted through an AH complete after the AH is destroyed with most still queued") {
    // Legal (providers copy the address vector into the WQE at post time) and once a crash: the
    // queued sends read the destroyed AH. The daemon reads all 100 WQEs in one turn, the datapath
    // sends 32 frames per turn, so the AH goes while most are queued; a new AH to another address
    // takes its slot.
    ServiceRig rig;
    SessionClient c(rig);
    constexpr uint32_t kSends = 100, kBytes = 64, kGrh = 40;
    Basics b = basics(c, 32 * 4096, 256);
    QpRings a = make_qp(c, b, 4, 128), r = make_qp(c, b, 4, 128);
    REQUIRE(c.connect(a, 0, kOwnGid4, 0, kQkey) == 0);
    REQUIRE(c.connect(r, 0, kOwnGid4, 0, kQkey) == 0);
    uint32_t ah = 0;
    REQUIRE(c.create_ah(b.pd, kOwnGid4, 0, ah) == 0);
    uint8_t* mem = b.buf.memory->data;
    for (uint32_t i = 0; i < kSends * kBytes; ++i) mem[i] = static_cast<uint8_t>(i * 7 + i / 251);
    const uint64_t recv_base = b.buf.iova() + 16 * 4096;
    for (uint32_t i = 0; i < kSends; ++i) {
        const abi::Sge into{recv_base + i * (kGrh + kBytes), kGrh + kBytes, b.buf.lkey};
        c.post_recv(r, i, std::span(&into, 1));
    }
    for (uint32_t i = 0; i < kSends; ++i) {
        abi::SendWqe w{};
        w.wr_id = 1000 + i;
        w.opcode = 2;      // IBV_WR_SEND
        w.send_flags = 2;  // IBV_SEND_SIGNALED
        w.num_sge = 1;
        w.ah = ah;
        w.remote_qpn = r.qpn;
        w.remote_qkey = kQkey;
        const abi::Sge from{b.buf.iova() + i * kBytes, kBytes, b.buf.lkey};
        c.post_send(a, w, std::span(&from, 1));
    }
    rig.host->poll(rig.now);  // every WQE into the engine
    rig.dp.poll(rig.now);     // one burst on the way
    CHECK(rig.dp.counters().loopback_frames < kSends);
    // DestroyAh and a new AH to our IPv6 address, served without a datapath turn.
    const abi::HandleRequest destroy{ah, 0};
    const auto seq = c.send(Op::DestroyAh, &destroy, sizeof destroy);
    REQUIRE(seq);
    rig.host->poll_control();
    auto reply = c.wait(*seq, 0);
    REQUIRE(reply);
    REQUIRE(reply->status() == 0);
    CHECK(rig.engine.ah_count() == 0);
    abi::CreateAhRequest other{};
    other.pd = b.pd;
    std::memcpy(other.av.dgid, kOwnGid6.raw.data(), 16);
    other.av.sgid_index = 2;
    const auto seq2 = c.send(Op::CreateAh, &other, sizeof other);
    REQUIRE(seq2);
    rig.host->poll_control();
    reply = c.wait(*seq2, 0);
    REQUIRE(reply);
    REQUIRE(reply->status() == 0);

    const auto cqes = c.wait_cqes(b.cq, 2 * kSends);
    REQUIRE(cqes.size() == 2 * kSends);
    uint32_t sends = 0, recvs = 0;
    for (const abi::Cqe& e : cqes) {
        INFO("wr_id " << e.wr_id << " opcode " << e.opcode << " status " << e.status);
        CHECK(e.status == 0);
        if (e.opcode == 128) {  // IBV_WC_RECV, in order
            CHECK(e.wr_id == recvs);
            CHECK(e.byte_len == kGrh + kBytes);
            CHECK(e.src_qp == a.qpn);
            ++recvs;
        } else {
            CHECK(e.wr_id == 1000 + sends);
            ++sends;
        }
    }
    CHECK(sends == kSends);
    CHECK(recvs == kSends);
    for (uint32_t i = 0; i < kSends; ++i) {
        INFO("message " << i);
        CHECK(std::memcmp(mem + 16 * 4096 + i * (kGrh + kBytes) + kGrh, mem + i * kBytes, kBytes) == 0);
    }
    CHECK(rig.port.sent().empty());  // none went towards another address
    well_behaved_send(rig);
}

TEST_CASE("a session that sets every doorbell bit makes the daemon read only the words of its own slots") {
    // 32768 slots' worth of bits cost a turn 45 us when the daemon took them all; a client could
    // write them again before every turn. The daemon takes the words its slots are in and leaves
    // the rest as the client wrote them.
    ServiceRig rig;
    SessionClient c(rig);
    Basics b = basics(c, 2 * 4096, 16);
    QpRings x = make_qp(c, b, 2, 4), y = make_qp(c, b, 2, 4);
    REQUIRE(c.connect(x, y.qpn, kOwnGid4) == 0);
    REQUIRE(c.connect(y, x.qpn, kOwnGid4) == 0);
    REQUIRE(x.reply.doorbell < 64);
    REQUIRE(y.reply.doorbell < 64);
    std::memcpy(b.buf.memory->data, "rung among 32768 bits", 21);
    // A WQE published without its own bit: the flood of bits is what announces it.
    const abi::Sge into{b.buf.iova() + 4096, 64, b.buf.lkey};
    abi::RecvWqe r{7, 1, 0};
    std::memcpy(y.rq.entry(0), &r, sizeof r);
    std::memcpy(static_cast<uint8_t*>(y.rq.entry(0)) + sizeof r, &into, sizeof into);
    y.rq.publish(++y.rq_produced);
    abi::DoorbellBits& bits = *c.doorbells;
    bits.top.store(~uint64_t{0});
    for (auto& w : bits.summary) w.store(~uint64_t{0});
    for (auto& w : bits.words) w.store(~uint64_t{0});
    rig.turn();
    CHECK(y.rq.header().consumer.load() == 1);  // its own queue was served
    CHECK(bits.words[0].load() == 0);
    size_t untouched = 0;
    for (uint32_t w = 1; w < abi::kDoorbellWords; ++w) untouched += bits.words[w].load() == ~uint64_t{0};
    CHECK(untouched == abi::kDoorbellWords - 1);
    abi::SendWqe w{};
    w.wr_id = 8;
    w.opcode = 2;
    w.send_flags = 2;
    w.num_sge = 1;
    const abi::Sge from{b.buf.iova(), 21, b.buf.lkey};
    c.post_send(x, w, std::span(&from, 1));
    const auto cqes = c.wait_cqes(b.cq, 2);
    REQUIRE(cqes.size() == 2);
    CHECK(std::memcmp(b.buf.memory->data + 4096, "rung among 32768 bits", 21) == 0);
    well_behaved_send(rig);
}

TEST_CASE("WQEs the daemon rejects overrun a CQ that is never polled instead of piling up in the daemon") {
    // Each rejected WQE is a completion the daemon makes itself; with the CQ's ring full they
    // waited in the daemon without bound (16 MB per 200000 WQEs, measured). They count against the
    // CQ's capacity now: past it the CQ is in error, its owner gets IBV_EVENT_CQ_ERR once, and the
    // rest are lost, as when the engine's CQ overflows.
    ServiceRig rig;
    SessionClient c(rig);
    Basics b = basics(c, 4096, 4);
    QpRings x = make_qp(c, b, 2, 16), y = make_qp(c, b, 2, 16);
    REQUIRE(c.connect(x, y.qpn, kOwnGid4) == 0);
    REQUIRE(c.connect(y, x.qpn, kOwnGid4) == 0);
    for (int round = 0; round < 16; ++round) {
        for (int i = 0; i < 16; ++i) {
            abi::SendWqe w{};
            w.wr_id = static_cast<uint64_t>(round * 16 + i);
            w.opcode = 200;  // no such opcode: completed by the daemon with IBV_WC_LOC_QP_OP_ERR
            w.send_flags = 2;
            c.post_send(x, w, {});
        }
        rig.turn();
    }
    const auto events = c.async_events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].event_type == 0);  // IBV_EVENT_CQ_ERR
    CHECK(events[0].object == b.cq.handle);
    CHECK(b.cq.ring.header().error.load() == 1);
    const auto stats = rig.host->stats_json();
    CHECK(stats.find("\"host_cqes_overrun\":248") != std::string::npos);  // 256 made, 4 in the ring, 4 kept
    // What the CQ holds is delivered in order: the first turn's first four (the ring), then the
    // second turn's first four (kept while the ring was full); the rest were lost.
    std::vector<abi::Cqe> cqes;
    b.cq.poll(cqes);
    rig.turn();
    b.cq.poll(cqes);
    REQUIRE(cqes.size() == 8);
    for (size_t i = 0; i < cqes.size(); ++i) {
        CHECK(cqes[i].wr_id == (i < 4 ? i : 12 + i));
        CHECK(cqes[i].status == 2);  // IBV_WC_LOC_QP_OP_ERR
    }
    well_behaved_send(rig);
}

TEST_CASE("a client ringing a queue the engine has no room for costs the daemon no memory per doorbell") {
    // An RC QP with no ACK timeout (0: none) sending to a QP that does not exist: its sends never
    // complete, the engine's send queue stays full and every further WQE waits for room. Each
    // doorbell on that queue added an entry to the list of queues waiting for room until the
    // device's next completion (anyone's): 8 bytes a turn while nothing completes anywhere.
    ServiceRig rig;
    SessionClient c(rig);
    Basics b = basics(c, 4096, 64);
    QpRings q = make_qp(c, b, 2, 16);
    abi::QpAttr a{};
    a.qp_state = 1;
    a.port_num = 1;
    REQUIRE(c.modify_qp(q.qpn, 1 | 16 | 32 | 8, a) == 0);
    a = {};
    a.qp_state = 2;
    a.path_mtu = 3;
    a.dest_qp_num = 0xFFFF00;
    std::memcpy(a.ah_attr.dgid, kOwnGid4.raw.data(), 16);
    REQUIRE(c.modify_qp(q.qpn, 1 | 128 | 256 | (1u << 20) | (1u << 12) | (1u << 17) | (1u << 15), a) == 0);
    a = {};
    a.qp_state = 3;
    a.timeout = 0;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    REQUIRE(c.modify_qp(q.qpn, 1 | (1u << 16) | 512 | 1024 | 2048 | 8192, a) == 0);
    abi::SendWqe w{};
    w.opcode = 0;  // a zero-length WRITE
    w.send_flags = 2;
    for (int round = 0; round < 2; ++round) {  // 16 in the engine, 16 waiting in the ring
        for (int i = 0; i < 16; ++i) c.post_send(q, w, {});
        for (int i = 0; i < 10; ++i) rig.turn();
    }
    REQUIRE(q.sq.header().consumer.load() == 16);
    for (int i = 0; i < 1000; ++i) {  // warm up whatever a turn keeps
        c.ring_doorbell(q.reply.doorbell);
        rig.turn();
    }
    const size_t before = heap_in_use();
    for (int i = 0; i < 50000; ++i) {
        c.ring_doorbell(q.reply.doorbell);
        rig.turn();
    }
    const size_t after = heap_in_use();
    INFO("heap " << before << " -> " << after);
    CHECK(after < before + 16 * 1024);  // the list grew to 50000 entries (400 KB and more) before
    CHECK(q.sq.header().consumer.load() == 16);
    well_behaved_send(rig);
}

TEST_CASE("one session's queues read at most its share of WQEs per turn, however many it publishes") {
    // WQEs the daemon rejects cost their client nothing: 1000 QPs re-publishing 256 bad ones each
    // made every turn 6.7 ms for everyone. A session's queues now read 1024 WQEs per turn between
    // them; the rest wait for the next turns, and other sessions' queues are served meanwhile.
    ServiceRig rig;
    SessionClient hostile(rig);
    Basics h = basics(hostile, 4096, 4096);
    std::vector<QpRings> qps;
    for (int i = 0; i < 16; ++i) qps.push_back(make_qp(hostile, h, 2, 256));
    for (int i = 0; i < 16; ++i) REQUIRE(hostile.connect(qps[i], qps[(i + 1) % 16].qpn, kOwnGid4) == 0);
    SessionClient good(rig);
    Basics g = basics(good, 2 * 4096, 16);
    QpRings gx = make_qp(good, g, 2, 4), gy = make_qp(good, g, 2, 4);
    REQUIRE(good.connect(gx, gy.qpn, kOwnGid4) == 0);
    REQUIRE(good.connect(gy, gx.qpn, kOwnGid4) == 0);
    for (QpRings& q : qps) {
        for (uint32_t i = 0; i < q.sq.size(); ++i) {
            abi::SendWqe w{};
            w.opcode = 200;  // rejected: completed by the daemon
            std::memcpy(q.sq.entry(i), &w, sizeof w);
        }
        q.sq_produced = q.sq.size();
        q.sq.publish(q.sq_produced);
        hostile.ring_doorbell(q.reply.doorbell);
    }
    const abi::Sge into{g.buf.iova() + 4096, 64, g.buf.lkey};
    good.post_recv(gy, 1, std::span(&into, 1));
    auto consumed = [&] {
        uint32_t n = 0;
        for (const QpRings& q : qps) n += q.sq.header().consumer.load();
        return n;
    };
    rig.host->poll(rig.now += 1000);
    CHECK(consumed() == 1024);
    CHECK(gy.rq.header().consumer.load() == 1);  // served in the same turn
    for (int i = 0; i < 3; ++i) rig.host->poll(rig.now += 1000);
    CHECK(consumed() == 16 * 256);
    well_behaved_send(rig);
}
