// The data path through the rings: WQEs in, CQEs out over the datapath's loopback, completion
// channels, corrupt rings, address resolution that waits for ARP, the sleeping protocol and
// shutdown.
#include <sys/eventfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

constexpr uint32_t kLocalWrite = 1, kRemoteWrite = 2, kRemoteRead = 4;

struct ClientQp {
    uint32_t qpn = 0;
    abi::CreateQpReply reply{};
    std::unique_ptr<Mapping> rings;
    abi::RingView sq, rq;
    uint32_t sq_produced = 0, rq_produced = 0;
};

struct ClientCq {
    uint32_t handle = 0;
    std::unique_ptr<Mapping> ring_memory;
    abi::RingView ring;
    uint32_t consumed = 0;
    std::vector<abi::Cqe> poll() {
        std::vector<abi::Cqe> out;
        const uint32_t n = ring.ready(consumed);
        REQUIRE(n != abi::RingView::kCorrupt);
        for (uint32_t i = 0; i < n; ++i) {
            abi::Cqe c;
            std::memcpy(&c, ring.entry(consumed++), sizeof c);
            out.push_back(c);
        }
        ring.release(consumed);
        return out;
    }
};

// One session with a PD, a registered buffer, a CQ (on a channel) and RC QPs on it.
struct Setup {
    Rig& rig;
    RawClient c;
    uint32_t pd = 0;
    SharedBuffer buf{4 * 4096};
    uint32_t lkey = 0, rkey = 0;
    int channel_fd = -1;
    int async_fd = -1;
    std::unique_ptr<Mapping> async_ring;
    abi::DoorbellBits* doorbells = nullptr;  // in the async ring's memfd
    uint32_t async_size = 0;
    ClientCq cq;

    explicit Setup(Rig& r) : rig(r), c(r.host->socket_path()) {
        async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        abi::HelloRequest hello{static_cast<uint32_t>(getpid()), 0};
        Reply h = rig.call(c, Op::Hello, hello, {async_fd});
        REQUIRE(h.header.status == 0);
        async_size = h.as<abi::HelloReply>().async_ring_size;
        const uint32_t doorbell_offset = h.as<abi::HelloReply>().doorbell_offset;
        REQUIRE(doorbell_offset >= abi::ring_bytes(async_size, sizeof(abi::AsyncEventEntry)));
        async_ring = std::make_unique<Mapping>(h.fds[2], doorbell_offset + sizeof(abi::DoorbellBits));
        doorbells = reinterpret_cast<abi::DoorbellBits*>(async_ring->data + doorbell_offset);
        Reply p = rig.call(c, Op::AllocPd, nullptr, 0);
        pd = p.as<abi::HandleReply>().handle;
        REQUIRE(rig.call(c, Op::ShareSegment, abi::ShareSegmentRequest{7, 0, buf.size}, {buf.fd}).header.status == 0);
        struct {
            abi::RegMrRequest req;
            abi::SegmentRun run;
        } mr{};
        const auto addr = reinterpret_cast<uint64_t>(buf.data);
        mr.req = {pd, kLocalWrite | kRemoteWrite | kRemoteRead, addr, buf.size, addr, 0, 1};
        mr.run = {7, 0, 0, buf.size};
        Reply reg = rig.call(c, Op::RegMr, mr);
        REQUIRE(reg.header.status == 0);
        lkey = reg.as<abi::RegMrReply>().lkey;
        rkey = reg.as<abi::RegMrReply>().rkey;
        channel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        Reply ch = rig.call(c, Op::CreateCompChannel, nullptr, 0, {channel_fd});
        REQUIRE(ch.header.status == 0);
        Reply cqr = rig.call(c, Op::CreateCq, abi::CreateCqRequest{32, ch.as<abi::HandleReply>().handle, 0, 0});
        REQUIRE(cqr.header.status == 0);
        const auto cr = cqr.as<abi::CreateCqReply>();
        cq.handle = cr.handle;
        cq.ring_memory = std::make_unique<Mapping>(cqr.fds[0], cr.ring_bytes);
        cq.ring = abi::RingView(cq.ring_memory->data, cr.ring_size, sizeof(abi::Cqe));
        CHECK(cq.ring.header().size == cr.ring_size);
    }
    ~Setup() {
        close(channel_fd);
        close(async_fd);
    }

    ClientQp create_qp() {
        abi::CreateQpRequest q{};
        q.qp_type = 2;
        q.pd = pd;
        q.send_cq = q.recv_cq = cq.handle;
        q.cap = {8, 8, 2, 2, 64};
        Reply r = rig.call(c, Op::CreateQp, q);
        REQUIRE(r.header.status == 0);
        ClientQp qp;
        qp.reply = r.as<abi::CreateQpReply>();
        qp.qpn = qp.reply.qpn;
        qp.rings = std::make_unique<Mapping>(r.fds[0], qp.reply.ring_bytes);
        qp.sq = abi::RingView(qp.rings->data, qp.reply.sq_size, qp.reply.sq_stride);
        qp.rq = abi::RingView(qp.rings->data + qp.reply.rq_offset, qp.reply.rq_size, qp.reply.rq_stride);
        CHECK(qp.sq.header().entry_size == qp.reply.sq_stride);
        CHECK(qp.rq.header().size == qp.reply.rq_size);
        return qp;
    }

    int modify(uint32_t qpn, uint32_t mask, const abi::QpAttr& attr) {
        abi::ModifyQpRequest m{qpn, mask, attr};
        return rig.call(c, Op::ModifyQp, m).header.status;
    }

    // Moves the QP to INIT (the port's frames so far forgotten) and returns a ModifyQp to RTR
    // with a path to QP 0x99 at `peer` from GID `sgid_index`: the request that resolves a MAC.
    abi::ModifyQpRequest rtr_request(uint32_t qpn, const wire::Gid& peer, uint8_t sgid_index) {
        abi::QpAttr attr{};
        attr.qp_state = 1;
        attr.port_num = 1;
        REQUIRE(modify(qpn, 1 | 16 | 32 | 8, attr) == 0);
        rig.port.sent().clear();
        attr = {};
        attr.qp_state = 2;
        attr.path_mtu = 3;
        attr.dest_qp_num = 0x99;
        attr.max_dest_rd_atomic = 1;
        std::memcpy(attr.ah_attr.dgid, peer.raw.data(), 16);
        attr.ah_attr.sgid_index = sgid_index;
        const uint32_t mask = 1 | 128 | 256 | (1u << 20) | (1u << 12) | (1u << 17) | (1u << 15);
        return abi::ModifyQpRequest{qpn, mask, attr};
    }

    // RESET -> INIT -> RTR -> RTS towards `dest` at `dgid`.
    void connect(uint32_t qpn, uint32_t dest, const wire::Gid& dgid, uint8_t sgid_index = 0) {
        abi::QpAttr a{};
        a.qp_state = 1;
        a.port_num = 1;
        a.qp_access_flags = kLocalWrite | kRemoteWrite | kRemoteRead;
        REQUIRE(modify(qpn, 1 | 16 | 32 | 8, a) == 0);
        a = {};
        a.qp_state = 2;
        a.path_mtu = 3;
        a.dest_qp_num = dest;
        a.rq_psn = 100;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 1;
        std::memcpy(a.ah_attr.dgid, dgid.raw.data(), 16);
        a.ah_attr.sgid_index = sgid_index;
        a.ah_attr.hop_limit = 64;
        a.ah_attr.is_global = 1;
        REQUIRE(modify(qpn, 1 | 128 | 256 | (1u << 20) | (1u << 12) | (1u << 17) | (1u << 15), a) == 0);
        a = {};
        a.qp_state = 3;
        a.sq_psn = 100;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        REQUIRE(modify(qpn, 1 | (1u << 16) | (1u << 9) | (1u << 10) | (1u << 11) | (1u << 13), a) == 0);
    }

    void post_recv(ClientQp& qp, uint64_t wr_id, uint64_t addr, uint32_t length) {
        auto* slot = static_cast<uint8_t*>(qp.rq.entry(qp.rq_produced));
        abi::RecvWqe w{wr_id, 1, 0};
        abi::Sge g{addr, length, lkey};
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, &g, sizeof g);
        qp.rq.publish(++qp.rq_produced);
        ring(qp);
    }

    // The doorbell: the QP's bit, as the client library sets it after publishing.
    void ring(const ClientQp& qp) { abi::ring_doorbell_slot(*doorbells, qp.reply.doorbell); }

    void post_send(ClientQp& qp, uint64_t wr_id, uint8_t opcode, uint64_t addr, uint32_t length, uint32_t flags,
                   uint64_t remote = 0) {
        auto* slot = static_cast<uint8_t*>(qp.sq.entry(qp.sq_produced));
        abi::SendWqe w{};
        w.wr_id = wr_id;
        w.opcode = opcode;
        w.send_flags = flags;
        w.num_sge = 1;
        w.remote_addr = remote;
        w.rkey = rkey;
        abi::Sge g{addr, length, lkey};
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + abi::kSendWqeHeader, &g, sizeof g);
        qp.sq.publish(++qp.sq_produced);
        ring(qp);
    }

    std::vector<abi::Cqe> wait_cqes(size_t n, int max_turns = 500) {
        std::vector<abi::Cqe> all;
        for (int i = 0; i < max_turns && all.size() < n; ++i) {
            rig.turn(10'000);
            for (const auto& e : cq.poll()) all.push_back(e);
        }
        return all;
    }

    std::vector<abi::AsyncEventEntry> async_events(uint32_t& consumed) {
        abi::RingView ring(async_ring->data, async_size, sizeof(abi::AsyncEventEntry));
        std::vector<abi::AsyncEventEntry> out;
        const uint32_t n = ring.ready(consumed);
        for (uint32_t i = 0; i < n; ++i) {
            abi::AsyncEventEntry e;
            std::memcpy(&e, ring.entry(consumed++), sizeof e);
            out.push_back(e);
        }
        ring.release(consumed);
        return out;
    }
};

const wire::Gid kOwnGid = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
const wire::Gid kOwnGid6 = wire::Gid::from_ipv6(port::test::kSelfIp6);  // GID 2

}  // namespace

TEST_CASE("a SEND and an RDMA WRITE through the rings, between two QPs of this daemon (loopback)") {
    // Over the IPv4 GID and over our IPv6 GID fd77::1 (resolved to our own MAC, no ND).
    const uint8_t sgid = GENERATE(uint8_t{0}, uint8_t{2});
    INFO("sgid_index " << int{sgid});
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    CHECK(a.reply.sq_stride == abi::send_stride(2, 64));
    s.connect(a.qpn, b.qpn, sgid ? kOwnGid6 : kOwnGid, sgid);
    s.connect(b.qpn, a.qpn, sgid ? kOwnGid6 : kOwnGid, sgid);

    // Arm the CQ: the first completion signals the channel.
    s.cq.ring.header().arm.store(abi::kArmNext);
    const uint64_t base = reinterpret_cast<uint64_t>(s.buf.data);
    std::memcpy(s.buf.data, "hello over the rings", 21);
    s.post_recv(b, 0xB0B, base + 4096, 4096);
    s.post_send(a, 0xA11CE, /*IBV_WR_SEND*/ 2, base, 21, /*SIGNALED*/ 2);
    auto cqes = s.wait_cqes(2);
    REQUIRE(cqes.size() == 2);
    const abi::Cqe* send = cqes[0].opcode == 0 ? &cqes[0] : &cqes[1];
    const abi::Cqe* recv = cqes[0].opcode == 0 ? &cqes[1] : &cqes[0];
    CHECK(send->wr_id == 0xA11CE);
    CHECK(send->status == 0);
    CHECK(send->qp_num == a.qpn);
    CHECK(send->wqe_index == 0);
    CHECK(recv->wr_id == 0xB0B);
    CHECK(recv->status == 0);
    CHECK(recv->opcode == 128);
    CHECK(recv->byte_len == 21);
    CHECK(recv->qp_num == b.qpn);
    CHECK(recv->src_qp == a.qpn);
    CHECK(std::memcmp(s.buf.data + 4096, "hello over the rings", 21) == 0);
    CHECK(a.sq.header().consumer.load() == 1);
    CHECK(b.rq.header().consumer.load() == 1);
    // Armed once: one event, the arm consumed, the channel's eventfd written.
    CHECK(s.cq.ring.header().arm.load() == abi::kArmNone);
    CHECK(s.cq.ring.header().events.load() == 1);
    uint64_t v = 0;
    CHECK(read(s.channel_fd, &v, sizeof v) == sizeof v);
    CHECK(v == 1);

    // An unsignaled WRITE then a signaled one: one CQE, at the second WQE's index.
    std::memcpy(s.buf.data + 100, "written", 7);
    s.post_send(a, 1, /*IBV_WR_RDMA_WRITE*/ 0, base + 100, 7, 0, base + 8192);
    s.post_send(a, 2, 0, base + 100, 7, 2, base + 8200);
    cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 2);
    CHECK(cqes[0].wqe_index == 2);
    CHECK(cqes[0].opcode == 1);
    CHECK(std::memcmp(s.buf.data + 8192, "written", 7) == 0);
    CHECK(std::memcmp(s.buf.data + 8200, "written", 7) == 0);
    CHECK(rig.dp.counters().loopback_frames > 0);
    CHECK(rig.port.sent().empty());  // nothing of it went to the wire

    // Three packets from A since both sides set PSN 100: Stats and QueryQp report where the
    // requester and the responder are now, not the PSNs ModifyQp set.
    const auto stats = nlohmann::json::parse(rig.host->stats_json());
    std::map<uint32_t, nlohmann::json> by_qpn;
    for (const auto& q : stats["qps"]) by_qpn[q["qpn"].get<uint32_t>()] = q;
    REQUIRE(by_qpn.size() == 2);
    CHECK(by_qpn[a.qpn]["sq_psn"] == 103);
    CHECK(by_qpn[a.qpn]["sq_una_psn"] == 103);
    CHECK(by_qpn[a.qpn]["rq_psn"] == 100);
    CHECK(by_qpn[b.qpn]["sq_psn"] == 100);  // its ACKs take no PSN
    CHECK(by_qpn[b.qpn]["rq_psn"] == 103);
    for (const auto& [qpn, sq, rq] : {std::tuple{a.qpn, 103u, 100u}, std::tuple{b.qpn, 100u, 103u}}) {
        Reply q = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{qpn, 0});
        REQUIRE(q.header.status == 0);
        CHECK(q.as<abi::QueryQpReply>().attr.sq_psn == sq);
        CHECK(q.as<abi::QueryQpReply>().attr.rq_psn == rq);
    }
}

TEST_CASE("a WQE the engine refuses completes with IBV_WC_LOC_QP_OP_ERR") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    // An RC QP cannot post IBV_WR_BIND_MW (8) through this engine.
    s.post_send(a, 77, 8, reinterpret_cast<uint64_t>(s.buf.data), 8, 2);
    auto cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 77);
    CHECK(cqes[0].status == 2);
    CHECK(cqes[0].wqe_index == 0);
    // num_sge above the QP's cap is refused before the engine sees it.
    auto* slot = static_cast<uint8_t*>(a.sq.entry(a.sq_produced));
    abi::SendWqe w{};
    w.wr_id = 78;
    w.opcode = 2;
    w.send_flags = 2;
    w.num_sge = 200;
    std::memcpy(slot, &w, sizeof w);
    a.sq.publish(++a.sq_produced);
    s.ring(a);
    cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 78);
    CHECK(cqes[0].status == 2);
}

TEST_CASE("a corrupt ring moves the QP to error and raises IBV_EVENT_QP_FATAL") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    s.post_recv(a, 5, reinterpret_cast<uint64_t>(s.buf.data), 64);
    rig.turn();
    a.sq.header().producer.store(a.reply.sq_size + 3);  // more than the ring holds
    // Unannounced, the daemon never looks at the ring; rung, it finds the ring corrupt.
    for (int i = 0; i < 5; ++i) rig.turn();
    CHECK(a.sq.header().error.load() == 0);
    s.ring(a);
    uint32_t consumed = 0;
    std::vector<abi::AsyncEventEntry> events;
    for (int i = 0; i < 20 && events.empty(); ++i) {
        rig.turn();
        events = s.async_events(consumed);
    }
    REQUIRE(events.size() == 1);
    CHECK(events[0].event_type == 1);
    CHECK(events[0].object == a.qpn);
    uint64_t v = 0;
    CHECK(read(s.async_fd, &v, sizeof v) == sizeof v);
    CHECK(a.sq.header().error.load() == 1);
    // The posted receive is flushed to the CQ.
    auto cqes = s.wait_cqes(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 5);
    CHECK(cqes[0].status == 5);
    abi::QueryQpRequest q{a.qpn, 0};
    CHECK(rig.call(s.c, Op::QueryQp, q).as<abi::QueryQpReply>().attr.qp_state == 6);

    // RESET starts the rings over: both indices 0, the error flag cleared.
    abi::QpAttr reset{};
    reset.qp_state = 0;
    REQUIRE(s.modify(a.qpn, 1, reset) == 0);
    CHECK(a.sq.header().producer.load() == 0);
    CHECK(a.sq.header().consumer.load() == 0);
    CHECK(a.sq.header().error.load() == 0);
    CHECK(a.rq.header().consumer.load() == 0);
}

TEST_CASE("ModifyQp with a path waits for ARP, then completes with the resolved MAC") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    const wire::Gid peer = wire::Gid::from_ipv4(port::test::kPeerIp);
    abi::ModifyQpRequest m = s.rtr_request(a.qpn, peer, 0);
    m.attr.ah_attr.hop_limit = 1;  // what ibv_rc_pingpong asks for; Linux sends 64 anyway

    SECTION("the peer answers") {
        const uint32_t seq = s.c.send(Op::ModifyQp, &m, sizeof m);
        for (int i = 0; i < 20; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());  // deferred
        REQUIRE(rig.port.sent().size() == 1);
        const auto req = port::parse_arp(rig.port.sent()[0]);
        REQUIRE(req);
        CHECK(req->op == 1);
        CHECK(req->target_ip == port::test::kPeerIp);
        rig.port.inject(port::test::arp_frame(2, port::test::kPeerMac, port::test::kPeerIp, port::test::kSelf.ipv4,
                                              port::test::kSelf.mac, port::test::kSelf.mac));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        Reply q = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0});
        const auto qr = q.as<abi::QueryQpReply>();
        CHECK(qr.attr.qp_state == 2);
        CHECK(std::memcmp(qr.attr.ah_attr.dmac, port::test::kPeerMac.data(), 6) == 0);
        CHECK(std::memcmp(qr.attr.ah_attr.dgid, peer.raw.data(), 16) == 0);
        CHECK(qr.attr.ah_attr.hop_limit == 64);  // the route's hop limit, as Linux resolves it
    }
    SECTION("nobody answers: EHOSTUNREACH after ARP gives up") {
        s.c.send(Op::ModifyQp, &m, sizeof m);
        std::optional<Reply> r;
        for (int i = 0; i < 100 && !r; ++i) {
            rig.turn(100'000'000);  // 100 ms per turn: ARP retries every second, three times
            r = s.c.try_receive();
        }
        REQUIRE(r);
        CHECK(r->header.status == EHOSTUNREACH);
        CHECK(rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0}).as<abi::QueryQpReply>().attr.qp_state == 1);
    }
    SECTION("a destination of the other IP version than the source GID, or no such GID: EINVAL") {
        abi::ModifyQpRequest v6 = m;
        std::memcpy(v6.attr.ah_attr.dgid, wire::Gid::from_ipv6(port::test::kPeerIp6).raw.data(), 16);
        CHECK(rig.call(s.c, Op::ModifyQp, v6).header.status == EINVAL);  // sgid 0 is IPv4
        abi::ModifyQpRequest v4 = m;
        v4.attr.ah_attr.sgid_index = 2;  // fd77::1 towards 10.77.0.2
        CHECK(rig.call(s.c, Op::ModifyQp, v4).header.status == EINVAL);
        v4.attr.ah_attr.sgid_index = 3;
        CHECK(rig.call(s.c, Op::ModifyQp, v4).header.status == EINVAL);
        CHECK(rig.port.sent().empty());  // no neighbour was asked
    }
}

TEST_CASE("ModifyQp and CreateAh towards an IPv6 peer wait for neighbour discovery") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    const wire::Gid peer = wire::Gid::from_ipv6(port::test::kPeerIp6);
    const abi::ModifyQpRequest m = s.rtr_request(a.qpn, peer, 2);  // from fd77::1

    SECTION("the peer answers the solicitation") {
        const uint32_t seq = s.c.send(Op::ModifyQp, &m, sizeof m);
        for (int i = 0; i < 20; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());  // deferred
        REQUIRE(rig.port.sent().size() == 1);
        const auto ns = port::parse_icmp6(rig.port.sent()[0]);
        REQUIRE(ns);
        CHECK(ns->type == 135);
        CHECK(ns->dst == port::solicited_node(port::test::kPeerIp6));
        CHECK(ns->src == port::test::kSelfIp6);
        rig.port.inject(port::test::advertisement(port::test::kPeerIp6, 0x60));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        const auto qr = rig.call(s.c, Op::QueryQp, abi::QueryQpRequest{a.qpn, 0}).as<abi::QueryQpReply>();
        CHECK(qr.attr.qp_state == 2);
        CHECK(std::memcmp(qr.attr.ah_attr.dmac, port::test::kPeerMac.data(), 6) == 0);
        CHECK(std::memcmp(qr.attr.ah_attr.dgid, peer.raw.data(), 16) == 0);
        CHECK(qr.attr.ah_attr.sgid_index == 2);

        // An AH for the same peer is answered at once: the neighbour is known now.
        abi::CreateAhRequest ah{};
        ah.pd = s.pd;
        std::memcpy(ah.av.dgid, peer.raw.data(), 16);
        ah.av.sgid_index = 2;
        CHECK(rig.call(s.c, Op::CreateAh, ah).header.status == 0);
        // Our own link-local address resolves to our MAC without asking anyone.
        std::memcpy(ah.av.dgid, port::test::kSelf.ipv6[0].addr.data(), 16);
        ah.av.sgid_index = 1;
        CHECK(rig.call(s.c, Op::CreateAh, ah).header.status == 0);
        CHECK(rig.port.sent().size() == 1);
    }
    SECTION("nobody answers: EHOSTUNREACH after the solicitations; off-link at once") {
        s.c.send(Op::ModifyQp, &m, sizeof m);
        std::optional<Reply> r;
        for (int i = 0; i < 100 && !r; ++i) {
            rig.turn(100'000'000);
            r = s.c.try_receive();
        }
        REQUIRE(r);
        CHECK(r->header.status == EHOSTUNREACH);
        CHECK(rig.dp.nd().counters().solicitations_sent == 3);
        abi::ModifyQpRequest far = m;
        std::memcpy(far.attr.ah_attr.dgid, wire::Gid::parse("2001:db8::2")->raw.data(), 16);
        CHECK(rig.call(s.c, Op::ModifyQp, far).header.status == EHOSTUNREACH);
    }
    SECTION("CreateAh for an unknown IPv6 peer is deferred the same way") {
        abi::CreateAhRequest ah{};
        ah.pd = s.pd;
        std::memcpy(ah.av.dgid, peer.raw.data(), 16);
        ah.av.sgid_index = 2;
        const uint32_t seq = s.c.send(Op::CreateAh, &ah, sizeof ah);
        for (int i = 0; i < 5; ++i) rig.turn();
        CHECK_FALSE(s.c.try_receive());
        rig.port.inject(port::test::advertisement(port::test::kPeerIp6, 0x60));
        Reply r = rig.wait_reply(s.c);
        CHECK(r.header.seq == seq);
        CHECK(r.header.status == 0);
        CHECK(rig.engine.ah_count() == 1);
    }
}

TEST_CASE("the sleeping protocol: a pending doorbell or a kick ends a nap at once") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    rig.turn();
    using Clock = std::chrono::steady_clock;

    // A doorbell rung before the fence is seen by the last scan: no sleep at all.
    s.post_recv(a, 1, reinterpret_cast<uint64_t>(s.buf.data), 64);
    auto t0 = Clock::now();
    rig.host->sleep(2'000'000'000);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(rig.host->status().sleeping.load() == 0);
    rig.turn();

    // Nothing pending: the nap lasts its length.
    t0 = Clock::now();
    rig.host->sleep(20'000'000);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(15));

    // A client that saw `sleeping` writes the kick eventfd: the daemon wakes.
    RawClient other(rig.host->socket_path());
    Reply again = rig.hello(other);
    REQUIRE(again.fds.size() == 3);
    // Each session has its own kick eventfd: one client cannot read (and swallow) another's kicks.
    const uint64_t one = 1;
    uint64_t got = 0;
    RawClient third(rig.host->socket_path());
    Reply third_hello = rig.hello(third);
    REQUIRE(third_hello.fds.size() == 3);
    REQUIRE(write(again.fds[1], &one, sizeof one) == sizeof one);
    CHECK(read(third_hello.fds[1], &got, sizeof got) == -1);
    CHECK(errno == EAGAIN);
    for (int i = 0; i < 5; ++i) rig.turn();  // the daemon consumed it
    REQUIRE(write(again.fds[1], &one, sizeof one) == sizeof one);
    t0 = Clock::now();
    rig.host->sleep(2'000'000'000);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(nlohmann::json::parse(rig.host->stats_json())["counters"]["host_kicks"] == 2);
}

TEST_CASE("shutdown: DEVICE_FATAL to every session, QPs flushed into the rings, socket removed") {
    Rig rig;
    Setup s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect(a.qpn, b.qpn, kOwnGid);
    s.post_recv(a, 9, reinterpret_cast<uint64_t>(s.buf.data), 64);
    rig.turn();
    const std::string path = rig.host->socket_path();
    rig.host->shutdown(rig.now);
    CHECK(rig.host->status().shutting_down.load() == 1);
    uint32_t consumed = 0;
    const auto events = s.async_events(consumed);
    REQUIRE(events.size() == 1);
    CHECK(events[0].event_type == 8);
    const auto cqes = s.cq.poll();
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 9);
    CHECK(cqes[0].status == 5);
    CHECK(rig.engine.qp_count() == 0);
    CHECK_FALSE(std::filesystem::exists(path));
    auto r = s.c.try_receive();
    REQUIRE(r);
    CHECK(r->eof);
}
