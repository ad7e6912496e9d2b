#include "client_session.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace rnic::host::test {

using abi::Op;

std::vector<abi::Cqe> ClientCq::poll() {
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

ClientSession::ClientSession(Rig& r) : rig(r), c(r.host->socket_path()) {
    Reply h = rig.hello(c);
    REQUIRE(h.header.status == 0);
    REQUIRE(h.fds.size() == 5);
    status_fd = h.take_fd(0);
    kick_fd = h.take_fd(1);
    async_fd = h.take_fd(3);
    async_wake_fd = h.take_fd(4);
    async_size = h.as<abi::HelloReply>().async_ring_size;
    const uint32_t doorbell_offset = h.as<abi::HelloReply>().doorbell_offset;
    REQUIRE(doorbell_offset >= abi::ring_bytes(async_size, sizeof(abi::AsyncEventEntry)));
    async_ring = std::make_unique<Mapping>(h.fds[2], doorbell_offset + sizeof(abi::DoorbellBits));
    doorbells = reinterpret_cast<abi::DoorbellBits*>(async_ring->data + doorbell_offset);
    Reply p = rig.call(c, Op::AllocPd, nullptr, 0);
    pd = p.as<abi::HandleReply>().handle;
    const MrKeys keys = register_file(buf.fd, buf.size, 7, buf.data);
    lkey = keys.lkey;
    rkey = keys.rkey;
    Reply ch = rig.call(c, Op::CreateCompChannel, nullptr, 0);
    REQUIRE(ch.header.status == 0);
    REQUIRE(ch.fds.size() == 2);
    channel_fd = ch.take_fd(0);
    channel_wake_fd = ch.take_fd(1);
    Reply cqr = rig.call(c, Op::CreateCq, abi::CreateCqRequest{32, ch.as<abi::HandleReply>().handle, 0, 0});
    REQUIRE(cqr.header.status == 0);
    const auto cr = cqr.as<abi::CreateCqReply>();
    cq.handle = cr.handle;
    cq.ring_memory = std::make_unique<Mapping>(cqr.fds[0], cr.ring_bytes);
    cq.ring = abi::RingView(cq.ring_memory->data, cr.ring_size, sizeof(abi::Cqe));
    CHECK(cq.ring.header().size == cr.ring_size);
}

ClientSession::~ClientSession() {
    for (int fd : {channel_fd, channel_wake_fd, async_fd, async_wake_fd, status_fd, kick_fd})
        if (fd >= 0) close(fd);
}

MrKeys ClientSession::register_file(int fd, uint64_t length, uint32_t segment_id, const void* addr) {
    REQUIRE(rig.call(c, Op::ShareSegment, abi::ShareSegmentRequest{segment_id, 0, length}, {fd}).header.status == 0);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    const auto a = reinterpret_cast<uint64_t>(addr);
    mr.req = {pd, kLocalWrite | kRemoteWrite | kRemoteRead, a, length, a, 0, 1};
    mr.run = {segment_id, 0, 0, length};
    Reply reg = rig.call(c, Op::RegMr, mr);
    REQUIRE(reg.header.status == 0);
    return {reg.as<abi::RegMrReply>().lkey, reg.as<abi::RegMrReply>().rkey};
}

ClientQp ClientSession::create_qp() {
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

int ClientSession::modify(uint32_t qpn, uint32_t mask, const abi::QpAttr& attr) {
    abi::ModifyQpRequest m{qpn, mask, attr};
    return rig.call(c, Op::ModifyQp, m).header.status;
}

abi::ModifyQpRequest ClientSession::rtr_request(uint32_t qpn, const wire::Gid& peer, uint8_t sgid_index) {
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

void ClientSession::connect_pair(const ClientQp& a, const ClientQp& b, const wire::Gid& gid, uint8_t sgid_index) {
    connect(a.qpn, b.qpn, gid, sgid_index);
    connect(b.qpn, a.qpn, gid, sgid_index);
}

void ClientSession::connect(uint32_t qpn, uint32_t dest, const wire::Gid& dgid, uint8_t sgid_index) {
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

void ClientSession::post_recv(ClientQp& qp, uint64_t wr_id, uint64_t addr, uint32_t length) {
    auto* slot = static_cast<uint8_t*>(qp.rq.entry(qp.rq_produced));
    abi::RecvWqe w{wr_id, 1, 0};
    abi::Sge g{addr, length, lkey};
    std::memcpy(slot, &w, sizeof w);
    std::memcpy(slot + sizeof w, &g, sizeof g);
    qp.rq.publish(++qp.rq_produced);
    ring(qp);
}

void ClientSession::ring(const ClientQp& qp) {
    abi::ring_doorbell_slot(*doorbells, qp.reply.doorbell);
}

void ClientSession::post(ClientQp& qp, const abi::SendWqe& wqe, const abi::Sge& sge) {
    auto* slot = static_cast<uint8_t*>(qp.sq.entry(qp.sq_produced));
    abi::SendWqe w = wqe;
    w.num_sge = 1;
    std::memcpy(slot, &w, sizeof w);
    std::memcpy(slot + abi::kSendWqeHeader, &sge, sizeof sge);
    qp.sq.publish(++qp.sq_produced);
    ring(qp);
}

void ClientSession::post_send(ClientQp& qp, uint64_t wr_id, uint8_t opcode, uint64_t addr, uint32_t length,
                              uint32_t flags, uint64_t remote) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = flags;
    w.remote_addr = remote;
    w.rkey = rkey;
    post(qp, w, abi::Sge{addr, length, lkey});
}

std::vector<abi::Cqe> ClientSession::wait_cqes(size_t n, int max_turns) {
    std::vector<abi::Cqe> all;
    for (int i = 0; i < max_turns && all.size() < n; ++i) {
        rig.turn(10'000);
        for (const auto& e : cq.poll()) all.push_back(e);
    }
    return all;
}

long ClientSession::drain(int fd) {
    char buf[256];
    long total = 0;
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0;) total += n;
    return total;
}

std::vector<abi::AsyncEventEntry> ClientSession::async_events(uint32_t& consumed) {
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

}  // namespace rnic::host::test
