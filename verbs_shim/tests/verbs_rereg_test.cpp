// ibv_rereg_mr through our libibverbs between two real rnicd (check_rereg_verbs.py brings up the
// bed with both daemons in one socket directory), data checked in the target's memory:
// CHANGE_TRANSLATION (remote WRITE and READ reach the new buffer, never the old), CHANGE_ACCESS
// (a WRITE without REMOTE_WRITE is a remote access error), CHANGE_PD (the old PD's QP gets a
// local protection error, the new PD's QP works), pinned <-> on-demand, and every error the way
// libibverbs reports it, the region unchanged and usable afterwards.
#define CATCH_CONFIG_MAIN
#include "rc_bring_up.hpp"
#include "two_devices.hpp"
#include <catch2/catch.hpp>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

using rnic::test::Device;
using rnic::test::gid0;
using rnic::test::Pages;
using rnic::test::wait_for;

// An RC connection: QP a on device 0 (in `pd_a`, the device's own PD unless given), QP b on 1.
struct Link {
    ibv_cq* cqa = nullptr;
    ibv_cq* cqb = nullptr;
    ibv_qp* a = nullptr;
    ibv_qp* b = nullptr;
    Link(Device& da, Device& db, ibv_pd* pd_a = nullptr) {
        cqa = ibv_create_cq(da.ctx, 64, nullptr, nullptr, 0);
        cqb = ibv_create_cq(db.ctx, 64, nullptr, nullptr, 0);
        REQUIRE((cqa != nullptr && cqb != nullptr));
        a = make(pd_a ? pd_a : da.pd, cqa);
        b = make(db.pd, cqb);
        rnic::test::bring_up_rc(a, b->qp_num, gid0(db.ctx), kRemote, 7);
        rnic::test::bring_up_rc(b, a->qp_num, gid0(da.ctx), kRemote, 7);
    }
    ~Link() {
        ibv_destroy_qp(a);
        ibv_destroy_qp(b);
        ibv_destroy_cq(cqa);
        ibv_destroy_cq(cqb);
    }
    static ibv_qp* make(ibv_pd* pd, ibv_cq* cq) {
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap = {16, 16, 2, 2, 0};
        ibv_qp* qp = ibv_create_qp(pd, &init);
        REQUIRE(qp != nullptr);
        return qp;
    }
};

// One RDMA op from QP a; its completion's status (GENERAL_ERR when none came).
ibv_wc_status rdma(Link& l, ibv_wr_opcode op, uint64_t local, uint32_t length, uint32_t lkey, uint64_t remote,
                   uint32_t rkey) {
    ibv_sge sge{local, length, lkey};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(l.a, &wr, &bad) == 0);
    const auto wc = wait_for(l.cqa, 1);
    return wc.empty() ? IBV_WC_GENERAL_ERR : wc[0].status;
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 13);
}

}  // namespace

TEST_CASE("CHANGE_TRANSLATION: remote WRITE and READ hit the new buffer, not the old", "[rereg]") {
    Device d0(0), d1(1);
    Pages src(64 * 1024), old_buf(32 * 1024), new_buf(48 * 1024);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kRemote);
    ibv_mr* dmr = ibv_reg_mr(d1.pd, old_buf.p, old_buf.size, kRemote);
    REQUIRE((smr != nullptr && dmr != nullptr));
    const uint32_t lkey = dmr->lkey, rkey = dmr->rkey;
    fill(old_buf.p, old_buf.size, 1);
    const std::vector<uint8_t> old_copy(old_buf.p, old_buf.p + old_buf.size);
    fill(new_buf.p, new_buf.size, 2);

    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, new_buf.p + 100, 40000, 0) == 0);
    CHECK(dmr->lkey == lkey);  // kept, as mlx5 re-registers in place
    CHECK(dmr->rkey == rkey);
    CHECK(dmr->addr == new_buf.p + 100);
    CHECK(dmr->length == 40000);
    {
        Link l(d0, d1);
        fill(src.p, 30000, 9);
        // 30,000 bytes: many packets, all into the new buffer.
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 30000, smr->lkey, new_buf.addr(1000), rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, new_buf.p + 1000, 30000) == 0);
        CHECK(std::memcmp(old_copy.data(), old_buf.p, old_buf.size) == 0);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(40000), 9000, smr->lkey, new_buf.addr(31000), rkey) ==
              IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p + 40000, new_buf.p + 31000, 9000) == 0);
    }
    {
        // The old buffer's addresses are outside the region now.
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 64, smr->lkey, old_buf.addr(0), rkey) == IBV_WC_REM_ACCESS_ERR);
        CHECK(std::memcmp(old_copy.data(), old_buf.p, old_buf.size) == 0);
    }
    {
        // Past the new length (new_buf + 100 + 40000) as well.
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 64, smr->lkey, new_buf.addr(40100 - 32), rkey) ==
              IBV_WC_REM_ACCESS_ERR);
    }
    // As a local buffer too: a SEND-side gather from the new translation.
    REQUIRE(ibv_rereg_mr(smr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, new_buf.p, 4096, 0) == 0);
    {
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, new_buf.addr(0), 512, smr->lkey, new_buf.addr(5000), rkey) ==
              IBV_WC_SUCCESS);
    }
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("CHANGE_ACCESS: without REMOTE_WRITE a WRITE is a remote access error, READ still works", "[rereg]") {
    Device d0(0), d1(1);
    Pages src(8192), dst(8192);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kRemote);
    ibv_mr* dmr = ibv_reg_mr(d1.pd, dst.p, dst.size, kRemote);
    REQUIRE((smr != nullptr && dmr != nullptr));
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0);
    fill(dst.p, dst.size, 5);
    const std::vector<uint8_t> before(dst.p, dst.p + dst.size);
    {
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 100, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_REM_ACCESS_ERR);
        CHECK(std::memcmp(before.data(), dst.p, dst.size) == 0);
    }
    {
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(), 3000, smr->lkey, dst.addr(10), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p + 10, 3000) == 0);
    }
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == 0);
    {
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(), 8, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_REM_ACCESS_ERR);
    }
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemote) == 0);
    {
        Link l(d0, d1);
        fill(src.p, 100, 44);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 100, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p, 100) == 0);
    }
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("CHANGE_PD: a QP of the old PD gets a local protection error, one of the new PD works", "[rereg]") {
    Device d0(0), d1(1);
    ibv_pd* pd2 = ibv_alloc_pd(d0.ctx);
    REQUIRE(pd2 != nullptr);
    Pages src(8192), dst(8192);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kRemote);
    ibv_mr* dmr = ibv_reg_mr(d1.pd, dst.p, dst.size, kRemote);
    REQUIRE((smr != nullptr && dmr != nullptr));
    REQUIRE(ibv_rereg_mr(smr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0) == 0);
    CHECK(smr->pd == pd2);
    CHECK(ibv_dealloc_pd(pd2) == EBUSY);  // the region is in it now
    fill(src.p, 2000, 3);
    {
        Link l(d0, d1);  // QP a in d0.pd
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 2000, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_LOC_PROT_ERR);
    }
    {
        Link l(d0, d1, pd2);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 2000, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p, 2000) == 0);
    }
    // All three at once: back to the first PD, a new buffer, read-only for the peer.
    Pages other(4096);
    REQUIRE(ibv_rereg_mr(smr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                         d0.pd, other.p, other.size, IBV_ACCESS_LOCAL_WRITE) == 0);
    {
        Link l(d0, d1);
        fill(dst.p, 1000, 8);
        CHECK(rdma(l, IBV_WR_RDMA_READ, other.addr(), 1000, smr->lkey, dst.addr(), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(other.p, dst.p, 1000) == 0);
    }
    CHECK(ibv_dealloc_pd(pd2) == 0);
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("ibv_rereg_mr errors: libibverbs' codes and errno, the region unchanged and usable", "[rereg]") {
    Device d0(0), d1(1);
    Pages src(8192), dst(8192);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kRemote);
    ibv_mr* dmr = ibv_reg_mr(d1.pd, dst.p, dst.size, kRemote | IBV_ACCESS_MW_BIND);
    REQUIRE((smr != nullptr && dmr != nullptr));
    const ibv_mr before = *dmr;
    const auto expect = [&](int flags, ibv_pd* pd, void* addr, size_t length, int access, int code, int err) {
        errno = 0;
        CHECK(ibv_rereg_mr(dmr, flags, pd, addr, length, access) == code);
        CHECK(errno == err);
        CHECK(dmr->lkey == before.lkey);
        CHECK(dmr->rkey == before.rkey);
        CHECK(dmr->addr == before.addr);
        CHECK(dmr->length == before.length);
        CHECK(dmr->pd == before.pd);
    };
    // rdma-core's own checks.
    expect(1 << 5, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL);
    expect(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 4096, 0, IBV_REREG_MR_ERR_INPUT, EINVAL);
    expect(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, dst.p, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL);
    expect(IBV_REREG_MR_CHANGE_PD, d1.pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE, IBV_REREG_MR_ERR_INPUT, EINVAL);
    // The command's (the kernel's and the driver's answers).
    expect(0, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL);
    expect(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE, IBV_REREG_MR_ERR_CMD, EINVAL);
    expect(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE | (1 << 15), IBV_REREG_MR_ERR_CMD,
           EINVAL);
    expect(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE | (1 << 9) /* FLUSH_PERSISTENT */,
           IBV_REREG_MR_ERR_CMD, EOPNOTSUPP);
    expect(IBV_REREG_MR_CHANGE_PD, d0.pd, nullptr, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL);  // another device's PD
    expect(IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL);
    void* none = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(none != MAP_FAILED);
    expect(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, none, 4096, 0, IBV_REREG_MR_ERR_CMD, EFAULT);
    munmap(none, 4096);

    // A window bound to the region holds it (EBUSY) until unbound.
    {
        Link l(d0, d1);
        ibv_mw* mw = ibv_alloc_mw(d1.pd, IBV_MW_TYPE_1);
        REQUIRE(mw != nullptr);
        ibv_mw_bind bind{};
        bind.wr_id = 50;
        bind.send_flags = IBV_SEND_SIGNALED;
        bind.bind_info = {dmr, dst.addr(100), 1000, IBV_ACCESS_REMOTE_READ};
        REQUIRE(ibv_bind_mw(l.b, mw, &bind) == 0);
        auto wc = wait_for(l.cqb, 1);
        REQUIRE(wc.size() == 1);
        REQUIRE(wc[0].status == IBV_WC_SUCCESS);
        expect(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemote, IBV_REREG_MR_ERR_CMD, EBUSY);
        bind.bind_info = {dmr, dst.addr(100), 0, 0};
        REQUIRE(ibv_bind_mw(l.b, mw, &bind) == 0);
        wc = wait_for(l.cqb, 1);
        REQUIRE(wc.size() == 1);
        CHECK(wc[0].status == IBV_WC_SUCCESS);
        CHECK(ibv_dealloc_mw(mw) == 0);
    }
    // Still the same region, and it works.
    {
        Link l(d0, d1);
        fill(src.p, 4000, 6);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 4000, smr->lkey, dst.addr(50), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p + 50, 4000) == 0);
    }
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemote) == 0);
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("on-demand regions: pinned -> ODP, a new ODP translation, ODP -> pinned", "[rereg][odp]") {
    Device d0(0), d1(1);
    Pages src(16384), a(16384), b(16384);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kRemote);
    ibv_mr* dmr = ibv_reg_mr(d1.pd, a.p, a.size, kRemote);
    REQUIRE((smr != nullptr && dmr != nullptr));
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemote | IBV_ACCESS_ON_DEMAND) == 0);
    {
        Link l(d0, d1);
        fill(src.p, 9000, 1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 9000, smr->lkey, a.addr(7), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, a.p + 7, 9000) == 0);
    }
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b.p, b.size, 0) == 0);
    {
        Link l(d0, d1);
        fill(src.p, 5000, 2);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 5000, smr->lkey, b.addr(300), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, b.p + 300, 5000) == 0);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(8000), 2000, smr->lkey, b.addr(300), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p + 8000, b.p + 300, 2000) == 0);
    }
    REQUIRE(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemote) == 0);
    {
        Link l(d0, d1);
        fill(src.p, 1000, 3);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 1000, smr->lkey, b.addr(0), dmr->rkey) == IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, b.p, 1000) == 0);
    }
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}
