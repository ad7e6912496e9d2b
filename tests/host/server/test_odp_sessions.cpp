// On-demand regions at the host protocol: what a client may ask (and what it may not), and data
// landing in this process's own memory through the daemon's process_vm_writev; a page unmapped
// under a region costs the access, not the daemon. Also WQEs of the IBTA 1.5 opcodes with
// fields the engine refuses.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "session_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

const wire::Gid kOwnGid4 = wire::Gid::from_ipv4(port::test::kSelf.ipv4);
constexpr uint32_t kOnDemand = 1u << 6;
constexpr uint32_t kRights = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

int reg_odp(SessionClient& c, uint32_t pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access,
            abi::RegMrReply* out = nullptr) {
    abi::RegMrRequest req{pd, access, addr, length, iova, static_cast<uint32_t>(addr & 4095), 0};
    auto r = c.call(Op::RegMr, req);
    REQUIRE(r);
    if (out != nullptr && r->status() == 0) *out = r->as<abi::RegMrReply>();
    return r->status();
}

struct Anon {
    uint8_t* p;
    size_t size;
    explicit Anon(size_t n) : size(n) {
        p = static_cast<uint8_t*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        REQUIRE(p != MAP_FAILED);
    }
    ~Anon() { munmap(p, size); }
    uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(p + off); }
};

}  // namespace

TEST_CASE("ODP registrations a client may and may not make") {
    ServiceRig rig;
    SessionClient c(rig);
    REQUIRE(c.hello() == 0);
    uint32_t pd = 0;
    REQUIRE(c.alloc_pd(pd) == 0);
    Anon mem(4 * 4096);
    CHECK(reg_odp(c, pd + 77, mem.addr(), 4096, mem.addr(), kRights | kOnDemand) == EINVAL);   // unknown PD
    CHECK(reg_odp(c, pd, 0, 4096, 0, kRights | kOnDemand) == EINVAL);                         // NULL, not implicit
    CHECK(reg_odp(c, pd, mem.addr(), 0, mem.addr(), kRights | kOnDemand) == EINVAL);          // empty
    CHECK(reg_odp(c, pd, mem.addr(), 4096, mem.addr() + 8, kRights | kOnDemand) == EINVAL);   // iova offset
    CHECK(reg_odp(c, pd, mem.addr(), UINT64_MAX, mem.addr(), kRights | kOnDemand) == EINVAL); // wraps
    CHECK(reg_odp(c, pd, mem.addr(), 4096, mem.addr(), kAccessRemoteWrite | kOnDemand) == EINVAL);  // no local write
    // Without ON_DEMAND and without segment runs: the ordinary path's EINVAL.
    CHECK(reg_odp(c, pd, mem.addr(), 4096, mem.addr(), kRights) == EINVAL);
    abi::RegMrReply explicit_mr{}, implicit_mr{};
    CHECK(reg_odp(c, pd, mem.addr(), mem.size, mem.addr(), kRights | kOnDemand, &explicit_mr) == 0);
    CHECK(reg_odp(c, pd, 0, UINT64_MAX, 0, kRights | kOnDemand, &implicit_mr) == 0);
    CHECK(c.destroy(Op::DeregMr, implicit_mr.lkey) == 0);
    // A session that goes away with ODP regions registered: nothing left behind, daemon fine.
    c.disconnect();
    SessionClient d(rig);
    REQUIRE(d.hello() == 0);
    REQUIRE(d.alloc_pd(pd) == 0);
    CHECK(reg_odp(d, pd, mem.addr(), 4096, mem.addr(), kRights | kOnDemand) == 0);
}

// The rig's turns advance simulated time, but an ODP copy runs on a real worker thread: on a
// loaded machine it may outlast many turns (the access Pending, RNR-NAKed or parked meanwhile).
// Real time between rounds of turns lets it finish.
static std::vector<abi::Cqe> wait_cqes_real(SessionClient& c, CqRing& cq, size_t n) {
    std::vector<abi::Cqe> all;
    for (int i = 0; i < 2000 && all.size() < n; ++i) {
        for (const auto& e : c.wait_cqes(cq, n - all.size(), 50)) all.push_back(e);
        if (all.size() < n) usleep(1000);
    }
    return all;
}

TEST_CASE("RDMA WRITE and READ into an ODP region of this process, and an unmapped page failing the access") {
    ServiceRig rig;
    SessionClient c(rig);
    REQUIRE(c.hello() == 0);
    uint32_t pd = 0;
    REQUIRE(c.alloc_pd(pd) == 0);
    Buffer src;
    REQUIRE(c.register_buffer(pd, 4 * 4096, 1, kRights, src) == 0);
    CqRing cq;
    REQUIRE(c.create_cq(64, 0, cq) == 0);
    Anon dst(8 * 4096);
    abi::RegMrReply odp{};
    REQUIRE(reg_odp(c, pd, dst.addr(), dst.size, dst.addr(), kRights | kOnDemand, &odp) == 0);
    auto qp_pair = [&](QpRings& x, QpRings& y) {
        abi::CreateQpRequest req{};
        req.qp_type = 2;
        req.pd = pd;
        req.send_cq = req.recv_cq = cq.handle;
        req.cap = {8, 8, 1, 1, 0};
        REQUIRE(c.create_qp(req, x) == 0);
        REQUIRE(c.create_qp(req, y) == 0);
        REQUIRE(c.connect(x, y.qpn, kOwnGid4) == 0);
        REQUIRE(c.connect(y, x.qpn, kOwnGid4) == 0);
    };
    QpRings x, y;
    qp_pair(x, y);
    for (int i = 0; i < 6000; ++i) src.memory->data[i] = static_cast<uint8_t>(i * 7 + 1);
    abi::SendWqe w{};
    w.wr_id = 1;
    w.opcode = 0;  // IBV_WR_RDMA_WRITE
    w.send_flags = 2;
    w.num_sge = 1;
    w.remote_addr = dst.addr(100);
    w.rkey = odp.rkey;
    const abi::Sge from{src.iova(), 6000, src.lkey};
    c.post_send(x, w, std::span(&from, 1));
    auto cqes = wait_cqes_real(c, cq, 1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].status == 0);
    CHECK(std::memcmp(src.memory->data, dst.p + 100, 6000) == 0);

    REQUIRE(munmap(dst.p + 4 * 4096, 4096) == 0);
    w.wr_id = 2;
    w.remote_addr = dst.addr(4 * 4096);
    const abi::Sge small{src.iova(), 64, src.lkey};
    c.post_send(x, w, std::span(&small, 1));
    cqes = wait_cqes_real(c, cq, 1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].status == 10);  // IBV_WC_REM_ACCESS_ERR
    REQUIRE(mmap(dst.p + 4 * 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            MAP_FAILED);

    // The daemon goes on: READ back through a fresh pair.
    QpRings x2, y2;
    qp_pair(x2, y2);
    abi::SendWqe r{};
    r.wr_id = 3;
    r.opcode = 4;  // IBV_WR_RDMA_READ
    r.send_flags = 2;
    r.num_sge = 1;
    r.remote_addr = dst.addr(100);
    r.rkey = odp.rkey;
    const abi::Sge into{src.iova() + 8192, 6000, src.lkey};
    c.post_send(x2, r, std::span(&into, 1));
    cqes = wait_cqes_real(c, cq, 1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].status == 0);
    CHECK(std::memcmp(src.memory->data + 8192, dst.p + 100, 6000) == 0);
}

TEST_CASE("ATOMIC_WRITE and FLUSH WQEs with fields the engine refuses complete in error") {
    ServiceRig rig;
    SessionClient c(rig);
    REQUIRE(c.hello() == 0);
    uint32_t pd = 0;
    REQUIRE(c.alloc_pd(pd) == 0);
    Buffer buf;
    REQUIRE(c.register_buffer(pd, 4096, 1, kRights, buf) == 0);
    CqRing cq;
    REQUIRE(c.create_cq(64, 0, cq) == 0);
    abi::CreateQpRequest req{};
    req.qp_type = 2;
    req.pd = pd;
    req.send_cq = req.recv_cq = cq.handle;
    req.cap = {8, 8, 2, 2, 0};
    QpRings x, y;
    REQUIRE(c.create_qp(req, x) == 0);
    REQUIRE(c.create_qp(req, y) == 0);
    REQUIRE(c.connect(x, y.qpn, kOwnGid4) == 0);
    REQUIRE(c.connect(y, x.qpn, kOwnGid4) == 0);
    abi::SendWqe w{};
    w.wr_id = 1;
    w.opcode = 14;  // IBV_WR_FLUSH with placement type 0
    w.send_flags = 2;
    w.flush_type = 0;
    w.remote_addr = buf.iova();
    w.rkey = buf.rkey;
    c.post_send(x, w, {});
    w.wr_id = 2;
    w.opcode = 15;  // IBV_WR_ATOMIC_WRITE of 4 bytes
    w.num_sge = 1;
    const abi::Sge four{buf.iova(), 4, buf.lkey};
    c.post_send(x, w, std::span(&four, 1));
    const auto cqes = c.wait_cqes(cq, 2);
    REQUIRE(cqes.size() == 2);
    CHECK(cqes[0].status != 0);
    CHECK(cqes[1].status != 0);
    // A well-formed ATOMIC_WRITE on a fresh pair still works.
    QpRings x2, y2;
    REQUIRE(c.create_qp(req, x2) == 0);
    REQUIRE(c.create_qp(req, y2) == 0);
    REQUIRE(c.connect(x2, y2.qpn, kOwnGid4) == 0);
    REQUIRE(c.connect(y2, x2.qpn, kOwnGid4) == 0);
    abi::SendWqe a{};
    a.wr_id = 3;
    a.opcode = 15;
    a.send_flags = 2;
    a.remote_addr = buf.iova() + 64;
    a.rkey = buf.rkey;
    a.compare_add = 0x1122334455667788ull;  // no SGE: the 8 bytes travel in the WQE
    c.post_send(x2, a, {});
    const auto ok = c.wait_cqes(cq, 1);
    REQUIRE(ok.size() == 1);
    CHECK(ok[0].status == 0);
    CHECK(ok[0].opcode == 9);  // IBV_WC_ATOMIC_WRITE
    uint64_t v;
    std::memcpy(&v, buf.memory->data + 64, 8);
    CHECK(v == 0x1122334455667788ull);
}
