// On-demand paging through our libibverbs between two real rnicd (check_odp_verbs.py brings up
// the bed with both daemons in one socket directory): explicit and implicit ODP regions as the
// target of remote WRITE and READ and as local buffers, a page unmapped under an ODP region
// (error completion, both daemons alive), ibv_advise_mr, and odp_caps.
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
constexpr int kOdp = kRemote | IBV_ACCESS_ON_DEMAND;

using rnic::test::Device;
using rnic::test::gid0;
using rnic::test::Pages;
using rnic::test::wait_for;

struct Link {
    ibv_cq* cqa = nullptr;
    ibv_cq* cqb = nullptr;
    ibv_qp* a = nullptr;
    ibv_qp* b = nullptr;
    Link(Device& da, Device& db) {
        cqa = ibv_create_cq(da.ctx, 256, nullptr, nullptr, 0);
        cqb = ibv_create_cq(db.ctx, 256, nullptr, nullptr, 0);
        REQUIRE((cqa != nullptr && cqb != nullptr));
        a = make(da, cqa);
        b = make(db, cqb);
        bring_up(a, b->qp_num, gid0(db.ctx));
        bring_up(b, a->qp_num, gid0(da.ctx));
    }
    ~Link() {
        ibv_destroy_qp(a);
        ibv_destroy_qp(b);
        ibv_destroy_cq(cqa);
        ibv_destroy_cq(cqb);
    }
    static ibv_qp* make(Device& d, ibv_cq* cq) {
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap = {64, 64, 2, 2, 0};
        ibv_qp* qp = ibv_create_qp(d.pd, &init);
        REQUIRE(qp != nullptr);
        return qp;
    }
    static void bring_up(ibv_qp* qp, uint32_t remote, ibv_gid dgid) {
        rnic::test::bring_up_rc(qp, remote, dgid, kRemote, 7);
    }
};

ibv_wc rdma(Link& l, ibv_wr_opcode op, uint64_t local, uint32_t length, uint32_t lkey, uint64_t remote,
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
    if (wc.empty()) {
        ibv_wc none{};
        none.status = IBV_WC_GENERAL_ERR;
        return none;
    }
    return wc[0];
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 13);
}

}  // namespace

TEST_CASE("odp_caps: explicit and implicit ODP, RC WRITE/READ/SEND/RECV", "[odp]") {
    Device d(0);
    ibv_device_attr_ex attr{};
    REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &attr) == 0);
    CHECK((attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0);
    CHECK((attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) != 0);
    CHECK((attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE) != 0);
    CHECK((attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_READ) != 0);
    CHECK((attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_ATOMIC) == 0);
}

TEST_CASE("explicit ODP region: remote WRITE and READ, and as local buffers", "[odp]") {
    Device d0(0), d1(1);
    Link l(d0, d1);
    Pages src(64 * 1024), dst(64 * 1024);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, kOdp);  // local buffers on demand too
    ibv_mr* dmr = ibv_reg_mr(d1.pd, dst.p, dst.size, kOdp);
    REQUIRE(smr != nullptr);
    REQUIRE(dmr != nullptr);
    fill(src.p, 40000, 3);
    // The target pages were never touched: the first WRITE faults them in.
    auto wc = rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 40000, smr->lkey, dst.addr(1000), dmr->rkey);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(src.p, dst.p + 1000, 40000) == 0);
    fill(dst.p + 50000, 5000, 77);
    wc = rdma(l, IBV_WR_RDMA_READ, src.addr(20000), 5000, smr->lkey, dst.addr(50000), dmr->rkey);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(src.p + 20000, dst.p + 50000, 5000) == 0);
    CHECK(ibv_dereg_mr(dmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("implicit ODP region: the whole address space, and a page unmapped under it", "[odp]") {
    Device d0(0), d1(1);
    Pages src(16 * 4096), dst(16 * 4096);
    ibv_mr* smr = ibv_reg_mr(d0.pd, src.p, src.size, int{IBV_ACCESS_LOCAL_WRITE});
    REQUIRE(smr != nullptr);
    ibv_mr* all = ibv_reg_mr(d1.pd, nullptr, SIZE_MAX, kOdp);
    REQUIRE(all != nullptr);
    CHECK(all->addr == nullptr);
    CHECK(all->length == SIZE_MAX);
    {
        Link l(d0, d1);
        fill(src.p, 8192, 9);
        // Any address of the process is reachable under the one rkey (iova = address).
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 8192, smr->lkey, dst.addr(4096), all->rkey).status ==
              IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p + 4096, 8192) == 0);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(8192), 100, smr->lkey, dst.addr(4096), all->rkey).status ==
              IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p + 8192, dst.p + 4096, 100) == 0);
    }
    {
        // Unmap a page under the implicit region: a WRITE there is a remote access error; the
        // page beside it is untouched beyond what the failed access may have stored before it.
        Link l(d0, d1);
        REQUIRE(munmap(dst.p + 8 * 4096, 4096) == 0);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 4096, smr->lkey, dst.addr(8 * 4096), all->rkey).status ==
              IBV_WC_REM_ACCESS_ERR);
    }
    {
        Link l(d0, d1);
        CHECK(rdma(l, IBV_WR_RDMA_READ, src.addr(), 64, smr->lkey, dst.addr(8 * 4096 + 64), all->rkey).status ==
              IBV_WC_REM_ACCESS_ERR);
        // Give the page back so the destructor's munmap stays well-defined.
        REQUIRE(mmap(dst.p + 8 * 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
                MAP_FAILED);
    }
    {
        // Both daemons are fine: a fresh connection works.
        Link l(d0, d1);
        fill(src.p, 64, 1);
        CHECK(rdma(l, IBV_WR_RDMA_WRITE, src.addr(), 64, smr->lkey, dst.addr(8 * 4096), all->rkey).status ==
              IBV_WC_SUCCESS);
        CHECK(std::memcmp(src.p, dst.p + 8 * 4096, 64) == 0);
    }
    CHECK(ibv_dereg_mr(all) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
}

TEST_CASE("ibv_advise_mr: prefetch on ODP regions, errors", "[odp]") {
    Device d(0);
    Pages buf(8 * 4096);
    ibv_mr* mr = ibv_reg_mr(d.pd, buf.p, buf.size, kOdp);
    REQUIRE(mr != nullptr);
    ibv_sge sge{buf.addr(100), 3 * 4096, mr->lkey};
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1) == 0);
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &sge, 1) == 0);
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1) == 0);
    // PREFETCH_WRITE made the pages present: mincore says so.
    unsigned char present[3] = {};
    REQUIRE(mincore(buf.p, 3 * 4096, present) == 0);
    CHECK((present[0] & present[1] & present[2] & 1) == 1);
    CHECK(ibv_advise_mr(d.pd, static_cast<ibv_advise_mr_advice>(7), 0, &sge, 1) == EINVAL);
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sge, 1) == EINVAL);
    ibv_sge past{buf.addr(7 * 4096), 8192, mr->lkey};  // beyond the region
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &past, 1) == EINVAL);
    std::vector<uint8_t> pinned(4096);
    ibv_mr* plain = ibv_reg_mr(d.pd, pinned.data(), pinned.size(), int{IBV_ACCESS_LOCAL_WRITE});
    REQUIRE(plain != nullptr);
    ibv_sge not_odp{reinterpret_cast<uintptr_t>(pinned.data()), 64, plain->lkey};
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &not_odp, 1) == EINVAL);
    // An unmapped page inside the region: EFAULT.
    REQUIRE(munmap(buf.p + 6 * 4096, 4096) == 0);
    ibv_sge hole{buf.addr(6 * 4096), 4096, mr->lkey};
    CHECK(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &hole, 1) == EFAULT);
    REQUIRE(mmap(buf.p + 6 * 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            MAP_FAILED);
    CHECK(ibv_dereg_mr(plain) == 0);
    CHECK(ibv_dereg_mr(mr) == 0);
}
