// Memory windows through our libibverbs between two real rnicd (rnic0 and rnic1 of one run
// directory, each daemon in its namespace of the test bed, RC QPs across the veth), everything
// written against rdma-core's verbs.h: ibv_alloc_mw / ibv_bind_mw / ibv_dealloc_mw, IBV_WR_BIND_MW
// by ibv_post_send and by ibv_wr_bind_mw, remote WRITE/READ/atomics through windows with the data
// checked, what a window does not grant (outside it, after invalidation, another QP) failing with
// IBV_WC_REM_ACCESS_ERR, LOCAL_INV, SEND_WITH_INV (IBV_WC_WITH_INV), and rxe's errors.
#define CATCH_CONFIG_MAIN
#include "rc_bring_up.hpp"
#include <catch2/catch.hpp>
#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBuf = 64 * 1024;
constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;

// One device: context, PD, CQ and a registered buffer.
struct Side {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
    ibv_mr* mr = nullptr;

    Side(const char* name, int access) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        REQUIRE(list != nullptr);
        for (int i = 0; i < n && ctx == nullptr; ++i)
            if (std::string(ibv_get_device_name(list[i])) == name) ctx = ibv_open_device(list[i]);
        ibv_free_device_list(list);
        REQUIRE(ctx != nullptr);
        pd = ibv_alloc_pd(ctx);
        cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
        mr = ibv_reg_mr(pd, buf.data(), buf.size(), access);
        REQUIRE((pd && cq && mr));
    }
    ~Side() {
        if (mr) ibv_dereg_mr(mr);
        ibv_destroy_cq(cq);
        ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
    }
    uint64_t addr(size_t off = 0) { return reinterpret_cast<uint64_t>(buf.data()) + off; }
};

ibv_gid gid0(ibv_context* ctx) {
    ibv_gid g{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &g) == 0);
    return g;
}

ibv_qp* make_qp(Side& s) {
    ibv_qp_init_attr_ex attr{};
    attr.send_cq = s.cq;
    attr.recv_cq = s.cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {64, 64, 2, 2, 0};
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.pd = s.pd;
    attr.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_RDMA_WRITE |
                          IBV_QP_EX_WITH_SEND_WITH_INV;
    ibv_qp* qp = ibv_create_qp_ex(s.ctx, &attr);
    REQUIRE(qp != nullptr);
    return qp;
}

void bring_up(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& remote_gid) {
    rnic::test::bring_up_rc(qp, remote_qpn, remote_gid, kRemoteAll, 7);
}

// An RC QP on each side, connected to each other.
struct Link {
    ibv_qp* a;
    ibv_qp* b;
    Link(Side& sa, Side& sb) : a(make_qp(sa)), b(make_qp(sb)) {
        bring_up(a, b->qp_num, gid0(sb.ctx));
        bring_up(b, a->qp_num, gid0(sa.ctx));
    }
    ~Link() {
        ibv_destroy_qp(a);
        ibv_destroy_qp(b);
    }
};

ibv_wc wait(ibv_cq* cq) {
    ibv_wc wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        REQUIRE(n >= 0);
        if (n == 1) return wc;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    FAIL("no completion within 10 s");
    return wc;
}

ibv_wc remote_op(ibv_qp* qp, ibv_cq* cq, Side& local, ibv_wr_opcode op, uint64_t remote, uint32_t rkey, size_t off,
                 uint32_t len, uint64_t add = 0) {
    ibv_sge sge{local.addr(off), len, local.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 5;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = remote;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = add;
    } else {
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey = rkey;
    }
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
    return wait(cq);
}

// IBV_WR_BIND_MW through the batch API (type 2); returns the completion.
ibv_wc wr_bind(ibv_qp* qp, ibv_cq* cq, ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr, uint64_t len,
               unsigned access) {
    ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
    ibv_wr_start(x);
    x->wr_id = 31;
    x->wr_flags = IBV_SEND_SIGNALED;
    const ibv_mw_bind_info info{mr, addr, len, access};
    ibv_wr_bind_mw(x, mw, rkey, &info);
    REQUIRE(ibv_wr_complete(x) == 0);
    return wait(cq);
}

void fill(std::vector<uint8_t>& v, size_t off, size_t len, uint8_t seed) {
    for (size_t i = 0; i < len; ++i) v[off + i] = static_cast<uint8_t>(i * 7 + seed);
}

}  // namespace

TEST_CASE("device attributes advertise type 1 and 2B memory windows", "[mw]") {
    Side a("rnic0", kRemoteAll);
    ibv_device_attr attr{};
    REQUIRE(ibv_query_device(a.ctx, &attr) == 0);
    CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0);
    CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
    CHECK(attr.max_mw > 0);
    ibv_mw* bad = ibv_alloc_mw(a.pd, static_cast<ibv_mw_type>(3));
    CHECK(bad == nullptr);
    CHECK(errno == EINVAL);
}

TEST_CASE("type 2 window: WRITE, READ, atomic inside, outside the window fails", "[mw]") {
    Side a("rnic0", kRemoteAll);
    Side b("rnic1", kRemoteAll | IBV_ACCESS_MW_BIND);
    Link l(a, b);
    ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
    REQUIRE(mw != nullptr);
    CHECK(mw->type == IBV_MW_TYPE_2);
    CHECK(mw->rkey != b.mr->rkey);
    const uint32_t rkey = ibv_inc_rkey(mw->rkey);
    const ibv_wc bc = wr_bind(l.b, b.cq, mw, rkey, b.mr, b.addr(4096), 8192,
                              IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    CHECK(bc.status == IBV_WC_SUCCESS);
    CHECK(bc.opcode == IBV_WC_BIND_MW);
    mw->rkey = rkey;  // the application's to keep with the batch API

    fill(a.buf, 0, 8192, 1);
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_RDMA_WRITE, b.addr(4096), rkey, 0, 8192).status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(a.buf.data(), b.buf.data() + 4096, 8192) == 0);
    fill(b.buf, 4096, 8192, 9);
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(4096 + 3), rkey, 16384, 3000).status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(a.buf.data() + 16384, b.buf.data() + 4096 + 3, 3000) == 0);
    uint64_t v = 1000;
    std::memcpy(b.buf.data() + 8192, &v, 8);
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_ATOMIC_FETCH_AND_ADD, b.addr(8192), rkey, 32768, 8, 24).status ==
          IBV_WC_SUCCESS);
    std::memcpy(&v, b.buf.data() + 8192, 8);
    CHECK(v == 1024);
    std::memcpy(&v, a.buf.data() + 32768, 8);
    CHECK(v == 1000);

    // The region would allow it; the window does not reach that far.
    const uint8_t untouched = b.buf[4096 + 8192];
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_RDMA_WRITE, b.addr(4096 + 8192 - 4), rkey, 0, 8).status ==
          IBV_WC_REM_ACCESS_ERR);
    CHECK(b.buf[4096 + 8192] == untouched);
    // A region with a window bound cannot be deregistered (rxe: EINVAL).
    CHECK(ibv_dereg_mr(b.mr) == EINVAL);
    CHECK(ibv_dealloc_mw(mw) == 0);
}

TEST_CASE("type 2 window: another QP cannot use it, LOCAL_INV and SEND_WITH_INV end it", "[mw]") {
    Side a("rnic0", kRemoteAll);
    Side b("rnic1", kRemoteAll | IBV_ACCESS_MW_BIND);
    Link l1(a, b);
    Link l2(a, b);
    ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
    REQUIRE(mw != nullptr);
    // Bound by ibv_post_send through B's QP of the second link.
    ibv_send_wr wr{};
    wr.wr_id = 40;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info = {b.mr, b.addr(0), 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(l2.b, &wr, &bad) == 0);
    ibv_wc wc = wait(b.cq);
    REQUIRE(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_BIND_MW);
    CHECK(wc.wr_id == 40);
    const uint32_t rkey = wr.bind_mw.rkey;

    fill(a.buf, 0, 64, 3);
    CHECK(remote_op(l2.a, a.cq, a, IBV_WR_RDMA_WRITE, b.addr(0), rkey, 0, 64).status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(a.buf.data(), b.buf.data(), 64) == 0);
    // Through the first link: the window belongs to the other QP.
    CHECK(remote_op(l1.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(0), rkey, 0, 64).status == IBV_WC_REM_ACCESS_ERR);

    // SEND_WITH_INV from A on the second link: B's receive says which rkey went.
    ibv_sge rsge{b.addr(8192), 256, b.mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 41;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    REQUIRE(ibv_post_recv(l2.b, &rwr, &rbad) == 0);
    ibv_sge ssge{a.addr(0), 32, a.mr->lkey};
    ibv_send_wr s{};
    s.wr_id = 42;
    s.sg_list = &ssge;
    s.num_sge = 1;
    s.opcode = IBV_WR_SEND_WITH_INV;
    s.send_flags = IBV_SEND_SIGNALED;
    s.invalidate_rkey = rkey;
    REQUIRE(ibv_post_send(l2.a, &s, &bad) == 0);
    // A's send completion and B's receive, on different CQs.
    wc = wait(b.cq);
    REQUIRE(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RECV);
    CHECK((wc.wc_flags & IBV_WC_WITH_INV) != 0);
    CHECK(wc.invalidated_rkey == rkey);
    CHECK(wc.byte_len == 32);
    CHECK(wait(a.cq).status == IBV_WC_SUCCESS);
    CHECK(remote_op(l2.a, a.cq, a, IBV_WR_RDMA_WRITE, b.addr(0), rkey, 0, 8).status == IBV_WC_REM_ACCESS_ERR);

    // Free again: bound anew (batch API) on a fresh link, used, then LOCAL_INV (batch API).
    Link l3(a, b);
    const uint32_t rkey2 = ibv_inc_rkey(rkey);
    mw->rkey = rkey;
    REQUIRE(wr_bind(l3.b, b.cq, mw, rkey2, b.mr, b.addr(0), 4096, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
    CHECK(remote_op(l3.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(0), rkey2, 0, 64).status == IBV_WC_SUCCESS);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(l3.b);
    ibv_wr_start(x);
    x->wr_id = 43;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_local_inv(x, rkey2);
    REQUIRE(ibv_wr_complete(x) == 0);
    wc = wait(b.cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_LOCAL_INV);
    CHECK(remote_op(l3.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(0), rkey2, 0, 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(ibv_dealloc_mw(mw) == 0);
}

TEST_CASE("type 1 window: ibv_bind_mw, rebind, zero-length unbind, no invalidation", "[mw]") {
    Side a("rnic0", kRemoteAll);
    Side b("rnic1", kRemoteAll | IBV_ACCESS_MW_BIND);
    Link l(a, b);
    ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
    REQUIRE(mw != nullptr);
    const uint32_t first = mw->rkey;
    ibv_mw_bind bind{};
    bind.wr_id = 50;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_info = {b.mr, b.addr(100), 1000, IBV_ACCESS_REMOTE_READ};
    REQUIRE(ibv_bind_mw(l.b, mw, &bind) == 0);
    CHECK(mw->rkey == ibv_inc_rkey(first));
    ibv_wc wc = wait(b.cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_BIND_MW);
    CHECK(wc.wr_id == 50);
    fill(b.buf, 100, 1000, 4);
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(100), mw->rkey, 0, 1000).status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(a.buf.data(), b.buf.data() + 100, 1000) == 0);
    // Zero based is refused for type 1 (rxe), before anything is posted.
    ibv_mw_bind zb = bind;
    zb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
    CHECK(ibv_bind_mw(l.b, mw, &zb) == EINVAL);
    // The verb's own checks (verbs.h): region of another PD, or a range without a region.
    ibv_mw_bind norange = bind;
    norange.bind_info.mr = nullptr;
    CHECK(ibv_bind_mw(l.b, mw, &norange) == EINVAL);

    // A zero-length bind unbinds: the rkey stops working.
    ibv_mw_bind unbind{};
    unbind.wr_id = 51;
    unbind.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(ibv_bind_mw(l.b, mw, &unbind) == 0);
    CHECK(wait(b.cq).status == IBV_WC_SUCCESS);
    CHECK(remote_op(l.a, a.cq, a, IBV_WR_RDMA_READ, b.addr(100), mw->rkey, 0, 8).status == IBV_WC_REM_ACCESS_ERR);
    // And the region may go again.
    REQUIRE(ibv_dereg_mr(b.mr) == 0);
    b.mr = nullptr;
    CHECK(ibv_dealloc_mw(mw) == 0);
}

TEST_CASE("LOCAL_INV of a type 1 window and binds rxe refuses fail their WR", "[mw]") {
    Side a("rnic0", kRemoteAll);
    Side b("rnic1", kRemoteAll);  // no MW_BIND on the region
    {
        Link l(a, b);
        ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
        REQUIRE(mw != nullptr);
        const ibv_wc wc = wr_bind(l.b, b.cq, mw, ibv_inc_rkey(mw->rkey), b.mr, b.addr(0), 64, IBV_ACCESS_REMOTE_READ);
        CHECK(wc.status == IBV_WC_MW_BIND_ERR);
        CHECK(wc.wr_id == 31);
        ibv_qp_attr at{};
        ibv_qp_init_attr init{};
        REQUIRE(ibv_query_qp(l.b, &at, IBV_QP_STATE, &init) == 0);
        CHECK(at.qp_state == IBV_QPS_ERR);
        CHECK(ibv_dealloc_mw(mw) == 0);
    }
    {
        Link l(a, b);
        ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
        REQUIRE(mw != nullptr);
        ibv_send_wr inv{};
        inv.wr_id = 60;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.send_flags = IBV_SEND_SIGNALED;
        inv.invalidate_rkey = mw->rkey;
        ibv_send_wr* bad = nullptr;
        REQUIRE(ibv_post_send(l.b, &inv, &bad) == 0);
        const ibv_wc wc = wait(b.cq);
        CHECK(wc.status == IBV_WC_LOC_QP_OP_ERR);
        CHECK(wc.wr_id == 60);
        CHECK(ibv_dealloc_mw(mw) == 0);
    }
}
