// Fidelity to Linux rxe (Debian 12: kernel 6.1, rdma-core 44's rxe provider) of the drop-in
// libibverbs.so.1, against a real rnicd (check_verbs_api.py brings up the bed; $RNIC_RUN_DIR
// names its socket directory). Each case checks data, not only return codes:
//  - posting in a QP state that forbids it (rxe's errno, nothing reaches the wire or a CQ);
//  - ibv_query_device(_ex)/ibv_query_port as rxe fills them;
//  - ibv_create_cq_ex with every wc_flags rxe accepts and each ibv_wc_read_* accessor over
//    SEND, SEND_WITH_IMM, WRITE_WITH_IMM, RDMA READ/WRITE, atomics and UD;
//  - the ibv_wr_* API: every operation rxe's qp_ex offers that rnicd implements, SGE lists and
//    inline data lists, the per-QP-type send_ops_flags rxe allows.
#define CATCH_CONFIG_MAIN
#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Device {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    Device() {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        REQUIRE(list != nullptr);
        REQUIRE(n >= 1);
        ctx = ibv_open_device(list[0]);
        ibv_free_device_list(list);
        REQUIRE(ctx != nullptr);
        pd = ibv_alloc_pd(ctx);
        REQUIRE(pd != nullptr);
    }
    ~Device() {
        if (pd != nullptr) ibv_dealloc_pd(pd);
        if (ctx != nullptr) ibv_close_device(ctx);
    }
};

struct Buffer {
    std::vector<uint8_t> bytes;
    ibv_mr* mr = nullptr;
    Buffer(ibv_pd* pd, size_t size)
        : bytes(size) {
        mr = ibv_reg_mr(pd, bytes.data(), size,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC);
        REQUIRE(mr != nullptr);
    }
    ~Buffer() { ibv_dereg_mr(mr); }
    uint64_t addr(size_t offset = 0) { return reinterpret_cast<uintptr_t>(bytes.data() + offset); }
    void fill(uint8_t seed) {
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
    }
};

std::vector<ibv_wc> wait_for(ibv_cq* cq, size_t want, int ms = 5000) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc[8];
        const int n = ibv_poll_cq(cq, 8, wc);
        REQUIRE(n >= 0);
        out.insert(out.end(), wc, wc + n);
        if (n == 0) usleep(50);
    }
    return out;
}

// One extended completion, as the ibv_wc_read_* accessors see it.
struct ExWc {
    uint64_t wr_id;
    ibv_wc_status status;
    ibv_wc_opcode opcode;
    uint32_t byte_len, qp_num, src_qp, slid, vendor_err;
    __be32 imm;
    unsigned wc_flags;
    uint8_t sl, dlid_path_bits;
};

std::vector<ExWc> wait_ex(ibv_cq_ex* cq, size_t want) {
    std::vector<ExWc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ibv_poll_cq_attr attr{};
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
        int rc = ibv_start_poll(cq, &attr);
        if (rc == ENOENT) {
            usleep(50);
            continue;
        }
        REQUIRE(rc == 0);
        while (rc == 0) {
            ExWc w{};
            w.wr_id = cq->wr_id;
            w.status = cq->status;
            w.opcode = ibv_wc_read_opcode(cq);
            w.vendor_err = ibv_wc_read_vendor_err(cq);
            w.byte_len = ibv_wc_read_byte_len(cq);
            w.imm = ibv_wc_read_imm_data(cq);
            w.qp_num = ibv_wc_read_qp_num(cq);
            w.src_qp = ibv_wc_read_src_qp(cq);
            w.wc_flags = ibv_wc_read_wc_flags(cq);
            w.slid = ibv_wc_read_slid(cq);
            w.sl = ibv_wc_read_sl(cq);
            w.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
            out.push_back(w);
            rc = ibv_next_poll(cq);
        }
        REQUIRE(rc == ENOENT);
        ibv_end_poll(cq);
    }
    return out;
}

ibv_gid gid0(ibv_context* ctx) {
    ibv_gid g{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &g) == 0);
    return g;
}

constexpr uint32_t kQkey = 0x11111111;

void to_init(ibv_qp* qp, ibv_qp_type type) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (type == IBV_QPT_UD) {
        at.qkey = kQkey;
        mask |= IBV_QP_QKEY;
    } else {
        at.qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    REQUIRE(ibv_modify_qp(qp, &at, mask) == 0);
}

void to_rtr(ibv_qp* qp, ibv_qp_type type, uint32_t remote, ibv_context* ctx) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    int mask = IBV_QP_STATE;
    if (type != IBV_QPT_UD) {
        at.path_mtu = IBV_MTU_1024;
        at.dest_qp_num = remote;
        at.rq_psn = 100;
        at.ah_attr.is_global = 1;
        at.ah_attr.grh.dgid = gid0(ctx);
        at.ah_attr.grh.hop_limit = 64;
        at.ah_attr.port_num = 1;
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (type == IBV_QPT_RC) {
            at.max_dest_rd_atomic = 4;
            at.min_rnr_timer = 1;
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
    }
    REQUIRE(ibv_modify_qp(qp, &at, mask) == 0);
}

void to_rts(ibv_qp* qp, ibv_qp_type type) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 100;
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (type == IBV_QPT_RC) {
        at.timeout = 14;
        at.retry_cnt = 7;
        at.rnr_retry = 7;
        at.max_rd_atomic = 4;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    REQUIRE(ibv_modify_qp(qp, &at, mask) == 0);
}

ibv_qp* make_qp(Device& d, ibv_cq* cq, ibv_qp_type type, uint64_t send_ops = 0) {
    ibv_qp_init_attr_ex attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = type;
    attr.cap = {32, 32, 4, 4, 64};
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | (send_ops != 0 ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
    attr.pd = d.pd;
    attr.send_ops_flags = send_ops;
    ibv_qp* qp = ibv_create_qp_ex(d.ctx, &attr);
    REQUIRE(qp != nullptr);
    return qp;
}

void connect(Device& d, ibv_qp* a, ibv_qp* b, ibv_qp_type type) {
    to_init(a, type);
    to_init(b, type);
    to_rtr(a, type, b->qp_num, d.ctx);
    to_rtr(b, type, a->qp_num, d.ctx);
    to_rts(a, type);
    to_rts(b, type);
}

int try_send(ibv_qp* qp, Buffer& buf, uint64_t wr_id, ibv_send_wr** bad) {
    ibv_sge sge{buf.addr(), 16, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    *bad = nullptr;
    const int rc = ibv_post_send(qp, &wr, bad);
    if (rc != 0) CHECK(*bad == &wr);
    return rc;
}

int try_recv(ibv_qp* qp, Buffer& buf, uint64_t wr_id, size_t offset = 0, uint32_t length = 64) {
    ibv_sge sge{buf.addr(offset), length, buf.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp, &wr, &bad);
    if (rc != 0) CHECK(bad == &wr);
    return rc;
}

int try_wr_send(ibv_qp* qp, Buffer& buf, uint64_t wr_id) {
    ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
    REQUIRE(x != nullptr);
    ibv_wr_start(x);
    x->wr_id = wr_id;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, buf.mr->lkey, buf.addr(), 16);
    return ibv_wr_complete(x);
}

}  // namespace

TEST_CASE("posting in each QP state: rxe's EINVAL before RTS (send) and in RESET (recv), flush in ERR",
          "[fidelity]") {
    Device d;
    ibv_cq* cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp* a = make_qp(d, cq, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
    ibv_qp* b = make_qp(d, cq, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
    Buffer src(d.pd, 4096), dst(d.pd, 4096);
    src.fill(3);
    ibv_send_wr* bad = nullptr;

    // RESET: both directions refused, bad_wr at the request.
    CHECK(a->state == IBV_QPS_RESET);
    CHECK(try_send(a, src, 1, &bad) == EINVAL);
    CHECK(try_wr_send(a, src, 2) == EINVAL);
    CHECK(try_recv(b, dst, 3) == EINVAL);

    // INIT: receives accepted, sends refused.
    to_init(a, IBV_QPT_RC);
    to_init(b, IBV_QPT_RC);
    CHECK(try_recv(b, dst, 100, 0) == 0);
    CHECK(try_send(a, src, 4, &bad) == EINVAL);
    CHECK(try_wr_send(a, src, 5) == EINVAL);

    // RTR: the same.
    to_rtr(a, IBV_QPT_RC, b->qp_num, d.ctx);
    to_rtr(b, IBV_QPT_RC, a->qp_num, d.ctx);
    CHECK(try_recv(b, dst, 101, 64) == 0);
    CHECK(try_send(a, src, 6, &bad) == EINVAL);
    CHECK(try_wr_send(a, src, 7) == EINVAL);

    // Nothing refused reached the wire or a CQ.
    usleep(20000);
    ibv_wc none[4];
    CHECK(ibv_poll_cq(cq, 4, none) == 0);

    // RTS: both post APIs work, and the receives posted in INIT and RTR take the data in order.
    to_rts(a, IBV_QPT_RC);
    to_rts(b, IBV_QPT_RC);
    REQUIRE(try_send(a, src, 8, &bad) == 0);
    REQUIRE(try_wr_send(a, src, 9) == 0);
    auto wc = wait_for(cq, 4);
    REQUIRE(wc.size() == 4);
    std::vector<uint64_t> send_ids, recv_ids;
    for (const ibv_wc& w : wc) {
        CHECK(w.status == IBV_WC_SUCCESS);
        (w.opcode == IBV_WC_RECV ? recv_ids : send_ids).push_back(w.wr_id);
    }
    CHECK(send_ids == std::vector<uint64_t>{8, 9});
    CHECK(recv_ids == std::vector<uint64_t>{100, 101});
    CHECK(std::memcmp(dst.bytes.data(), src.bytes.data(), 16) == 0);
    CHECK(std::memcmp(dst.bytes.data() + 64, src.bytes.data(), 16) == 0);

    // ERR: posting is accepted and every request completes with IBV_WC_WR_FLUSH_ERR.
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    REQUIRE(ibv_modify_qp(a, &err, IBV_QP_STATE) == 0);
    CHECK(a->state == IBV_QPS_ERR);
    CHECK(try_recv(a, dst, 200) == 0);
    CHECK(try_send(a, src, 201, &bad) == 0);
    CHECK(try_wr_send(a, src, 202) == 0);
    wc = wait_for(cq, 3);
    REQUIRE(wc.size() == 3);
    std::vector<uint64_t> flushed;
    for (const ibv_wc& w : wc) {
        CHECK(w.status == IBV_WC_WR_FLUSH_ERR);
        CHECK(w.qp_num == a->qp_num);
        flushed.push_back(w.wr_id);
    }
    std::sort(flushed.begin(), flushed.end());
    CHECK(flushed == std::vector<uint64_t>{200, 201, 202});

    // Back to RESET: refused again (the state the application set is the one that counts).
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    REQUIRE(ibv_modify_qp(a, &reset, IBV_QP_STATE) == 0);
    CHECK(try_recv(a, dst, 300) == EINVAL);
    CHECK(try_send(a, src, 301, &bad) == EINVAL);

    CHECK(ibv_destroy_qp(a) == 0);
    CHECK(ibv_destroy_qp(b) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("a QP the daemon moved to ERR by itself still accepts posts and flushes them", "[fidelity]") {
    // RC to a QPN nobody owns: the requester's retries run out and rnicd moves the QP to ERR on
    // its own (no modify_qp by this process). rxe then still accepts posts (its requester is in
    // its error state, past "ready") and flushes them; the shim's state rules agree.
    Device d;
    ibv_cq* cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp* a = make_qp(d, cq, IBV_QPT_RC);
    to_init(a, IBV_QPT_RC);
    to_rtr(a, IBV_QPT_RC, 0xfffff0, d.ctx);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 1;
    at.timeout = 1;  // 8 us: the retries run out quickly
    at.retry_cnt = 1;
    at.rnr_retry = 0;
    at.max_rd_atomic = 1;
    REQUIRE(ibv_modify_qp(a, &at,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    Buffer src(d.pd, 64), dst(d.pd, 256);
    ibv_send_wr* bad = nullptr;
    REQUIRE(try_send(a, src, 1, &bad) == 0);
    auto wc = wait_for(cq, 1, 10000);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
    CHECK(a->state == IBV_QPS_RTS);  // the cached state: this process made no transition
    CHECK(try_send(a, src, 2, &bad) == 0);
    CHECK(try_recv(a, dst, 3) == 0);
    wc = wait_for(cq, 2);
    REQUIRE(wc.size() == 2);
    for (const ibv_wc& w : wc) CHECK(w.status == IBV_WC_WR_FLUSH_ERR);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    REQUIRE(ibv_query_qp(a, &q, IBV_QP_STATE, &qi) == 0);
    CHECK(q.qp_state == IBV_QPS_ERR);
    CHECK(a->state == IBV_QPS_ERR);  // ibv_query_qp refreshes it, as libibverbs does
    CHECK(ibv_destroy_qp(a) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("ibv_create_cq_ex: the wc_flags rxe accepts, and each ibv_wc_read_* over RC and UD", "[fidelity]") {
    Device d;
    // rxe's provider (rdma-core 44) accepts exactly these; rnicd adds the completion timestamp.
    const uint64_t rxe_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                               IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                               IBV_WC_EX_WITH_DLID_PATH_BITS;
    for (uint64_t flag : {uint64_t{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK}, uint64_t{IBV_WC_EX_WITH_CVLAN},
                          uint64_t{IBV_WC_EX_WITH_FLOW_TAG}, uint64_t{IBV_WC_EX_WITH_TM_INFO}}) {
        ibv_cq_init_attr_ex bad{};
        bad.cqe = 4;
        bad.wc_flags = rxe_flags | flag;
        errno = 0;
        CHECK(ibv_create_cq_ex(d.ctx, &bad) == nullptr);
        CHECK(errno == EOPNOTSUPP);
    }
    ibv_cq_init_attr_ex cattr{};
    cattr.cqe = 64;
    cattr.wc_flags = rxe_flags;
    ibv_cq_ex* cqx = ibv_create_cq_ex(d.ctx, &cattr);
    REQUIRE(cqx != nullptr);
    ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
    const uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                         IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                         IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    ibv_qp* a = make_qp(d, cq, IBV_QPT_RC, ops);
    ibv_qp* b = make_qp(d, cq, IBV_QPT_RC, ops);
    connect(d, a, b, IBV_QPT_RC);
    Buffer src(d.pd, 8192), dst(d.pd, 8192);
    src.fill(11);
    for (uint64_t i = 0; i < 4; ++i) REQUIRE(try_recv(b, dst, 100 + i, 1024 * i, 1024) == 0);

    ibv_qp_ex* x = ibv_qp_to_qp_ex(a);
    uint64_t counter = 40;
    std::memcpy(dst.bytes.data() + 8000, &counter, 8);
    ibv_wr_start(x);
    x->wr_flags = IBV_SEND_SIGNALED;
    x->wr_id = 1;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(0), 100);
    x->wr_id = 2;
    ibv_wr_send_imm(x, htobe32(0xa1b2c3d4));
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(100), 200);
    x->wr_id = 3;
    ibv_wr_rdma_write_imm(x, dst.mr->rkey, dst.addr(5000), htobe32(0x01020304));
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(300), 300);
    x->wr_id = 4;
    ibv_wr_rdma_write(x, dst.mr->rkey, dst.addr(6000));
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(600), 400);
    x->wr_id = 5;
    ibv_wr_rdma_read(x, dst.mr->rkey, dst.addr(6000));
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(4096), 400);
    x->wr_id = 6;
    ibv_wr_atomic_fetch_add(x, dst.mr->rkey, dst.addr(8000), 2);
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(7000), 8);
    x->wr_id = 7;
    ibv_wr_atomic_cmp_swp(x, dst.mr->rkey, dst.addr(8000), 42, 99);
    ibv_wr_set_sge(x, src.mr->lkey, src.addr(7008), 8);
    REQUIRE(ibv_wr_complete(x) == 0);

    auto wc = wait_ex(cqx, 10);
    for (const ExWc& w : wc)
        UNSCOPED_INFO("wr_id " << w.wr_id << " opcode " << w.opcode << " status " << w.status << " qp " << w.qp_num);
    REQUIRE(wc.size() == 10);
    std::vector<ExWc> sends, recvs;
    for (const ExWc& w : wc) {
        CHECK(w.status == IBV_WC_SUCCESS);
        CHECK(w.vendor_err == 0);
        CHECK(w.slid == 0);  // RoCE: no LIDs, as rxe reports
        CHECK(w.sl == 0);
        CHECK(w.dlid_path_bits == 0);
        (w.qp_num == a->qp_num ? sends : recvs).push_back(w);
    }
    REQUIRE(sends.size() == 7);
    REQUIRE(recvs.size() == 3);
    const ibv_wc_opcode send_opcodes[] = {IBV_WC_SEND,       IBV_WC_SEND,      IBV_WC_RDMA_WRITE,  IBV_WC_RDMA_WRITE,
                                          IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP};
    for (size_t i = 0; i < sends.size(); ++i) {
        CHECK(sends[i].wr_id == i + 1);
        CHECK(sends[i].opcode == send_opcodes[i]);
    }
    CHECK(sends[4].byte_len == 400);  // READ: the bytes read
    // Receives, in order: SEND, SEND_WITH_IMM, RECV_RDMA_WITH_IMM.
    CHECK(recvs[0].wr_id == 100);
    CHECK(recvs[0].opcode == IBV_WC_RECV);
    CHECK(recvs[0].byte_len == 100);
    CHECK(recvs[0].wc_flags == 0);
    CHECK(recvs[0].src_qp == a->qp_num);
    CHECK(recvs[1].wr_id == 101);
    CHECK(recvs[1].opcode == IBV_WC_RECV);
    CHECK(recvs[1].byte_len == 200);
    CHECK(recvs[1].wc_flags == IBV_WC_WITH_IMM);
    CHECK(recvs[1].imm == htobe32(0xa1b2c3d4));
    CHECK(recvs[2].wr_id == 102);
    CHECK(recvs[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(recvs[2].byte_len == 300);
    CHECK(recvs[2].wc_flags == IBV_WC_WITH_IMM);
    CHECK(recvs[2].imm == htobe32(0x01020304));
    for (const ExWc& r : recvs) CHECK(r.qp_num == b->qp_num);
    // The data each carried.
    CHECK(std::memcmp(dst.bytes.data(), src.bytes.data(), 100) == 0);
    CHECK(std::memcmp(dst.bytes.data() + 1024, src.bytes.data() + 100, 200) == 0);
    CHECK(std::memcmp(dst.bytes.data() + 5000, src.bytes.data() + 300, 300) == 0);
    CHECK(std::memcmp(dst.bytes.data() + 6000, src.bytes.data() + 600, 400) == 0);
    CHECK(std::memcmp(src.bytes.data() + 4096, src.bytes.data() + 600, 400) == 0);  // READ brought it back
    uint64_t fetched = 0, compared = 0;
    std::memcpy(&fetched, src.bytes.data() + 7000, 8);
    std::memcpy(&compared, src.bytes.data() + 7008, 8);
    std::memcpy(&counter, dst.bytes.data() + 8000, 8);
    CHECK(fetched == 40);
    CHECK(compared == 42);
    CHECK(counter == 99);
    CHECK(ibv_destroy_qp(a) == 0);
    CHECK(ibv_destroy_qp(b) == 0);

    // UD: src_qp names the sender, wc_flags carries IBV_WC_GRH, the GRH area precedes the data.
    ibv_qp* u = make_qp(d, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
    ibv_qp* v = make_qp(d, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND);
    connect(d, u, v, IBV_QPT_UD);
    REQUIRE(try_recv(v, dst, 300, 0) == 0);
    ibv_ah_attr ah_attr{};
    ah_attr.is_global = 1;
    ah_attr.grh.dgid = gid0(d.ctx);
    ah_attr.grh.hop_limit = 64;
    ah_attr.port_num = 1;
    ibv_ah* ah = ibv_create_ah(d.pd, &ah_attr);
    REQUIRE(ah != nullptr);
    ibv_qp_ex* ux = ibv_qp_to_qp_ex(u);
    ibv_wr_start(ux);
    ux->wr_id = 30;
    ux->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(ux, htobe32(7));
    ibv_wr_set_ud_addr(ux, ah, v->qp_num, kQkey);
    ibv_wr_set_sge(ux, src.mr->lkey, src.addr(0), 24);
    REQUIRE(ibv_wr_complete(ux) == 0);
    wc = wait_ex(cqx, 2);
    REQUIRE(wc.size() == 2);
    const ExWc& r = wc[0].qp_num == v->qp_num ? wc[0] : wc[1];
    const ExWc& s = wc[0].qp_num == v->qp_num ? wc[1] : wc[0];
    CHECK(s.wr_id == 30);
    CHECK(s.opcode == IBV_WC_SEND);
    CHECK(r.wr_id == 300);
    CHECK(r.opcode == IBV_WC_RECV);
    CHECK(r.byte_len == 24 + 40);  // the GRH area counts, as on every RoCE device
    CHECK(r.src_qp == u->qp_num);
    CHECK(r.wc_flags == (IBV_WC_GRH | IBV_WC_WITH_IMM));
    CHECK(r.imm == htobe32(7));
    CHECK(std::memcmp(dst.bytes.data() + 40, src.bytes.data(), 24) == 0);
    CHECK(ibv_destroy_ah(ah) == 0);
    CHECK(ibv_destroy_qp(u) == 0);
    CHECK(ibv_destroy_qp(v) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("ibv_wr_*: SGE lists, inline data lists, and the send_ops_flags rxe allows per QP type", "[fidelity]") {
    Device d;
    // rxe: UD QPs SEND only, UC no READ/atomics/LOCAL_INV; anything else EOPNOTSUPP.
    ibv_cq* cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    struct Refused {
        ibv_qp_type type;
        uint64_t ops;
    };
    for (const Refused& t : {Refused{IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE}, Refused{IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_READ},
                             Refused{IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ},
                             Refused{IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD},
                             Refused{IBV_QPT_UC, IBV_QP_EX_WITH_LOCAL_INV}}) {
        ibv_qp_init_attr_ex attr{};
        attr.send_cq = cq;
        attr.recv_cq = cq;
        attr.qp_type = t.type;
        attr.cap = {4, 4, 1, 1, 0};
        attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        attr.pd = d.pd;
        attr.send_ops_flags = t.ops | IBV_QP_EX_WITH_SEND;
        errno = 0;
        CHECK(ibv_create_qp_ex(d.ctx, &attr) == nullptr);
        CHECK(errno == EOPNOTSUPP);
    }
    ibv_qp* uc = make_qp(d, cq, IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
                                                IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    ibv_qp* uc_peer = make_qp(d, cq, IBV_QPT_UC);
    connect(d, uc, uc_peer, IBV_QPT_UC);
    Buffer src(d.pd, 8192), dst(d.pd, 8192);
    src.fill(77);
    REQUIRE(try_recv(uc_peer, dst, 50, 0) == 0);
    REQUIRE(try_recv(uc_peer, dst, 51, 0) == 0);

    ibv_qp_ex* x = ibv_qp_to_qp_ex(uc);
    // A gather list of three pieces, out of order in the source: the receiver sees them joined.
    const ibv_sge pieces[3] = {{src.addr(1000), 10, src.mr->lkey},
                               {src.addr(0), 7, src.mr->lkey},
                               {src.addr(3000), 20, src.mr->lkey}};
    char part1[] = "inline ", part2[] = "data ", part3[] = "list";
    const ibv_data_buf bufs[3] = {{part1, 7}, {part2, 5}, {part3, 4}};
    ibv_wr_start(x);
    x->wr_flags = IBV_SEND_SIGNALED;
    x->wr_id = 1;
    ibv_wr_rdma_write(x, dst.mr->rkey, dst.addr(4096));
    ibv_wr_set_sge_list(x, 3, pieces);
    x->wr_id = 2;
    ibv_wr_send(x);
    ibv_wr_set_inline_data_list(x, 3, bufs);
    std::memset(part2, '#', 5);  // copied at the call
    x->wr_id = 3;
    ibv_wr_rdma_write_imm(x, dst.mr->rkey, dst.addr(6000), htobe32(5));
    ibv_wr_set_inline_data_list(x, 2, bufs);  // "inline #####"
    REQUIRE(ibv_wr_complete(x) == 0);
    auto wc = wait_for(cq, 5);
    REQUIRE(wc.size() == 5);
    for (const ibv_wc& w : wc) CHECK(w.status == IBV_WC_SUCCESS);
    std::vector<uint8_t> joined;
    for (const ibv_sge& p : pieces) {
        const uint8_t* from = src.bytes.data() + (p.addr - src.addr());
        joined.insert(joined.end(), from, from + p.length);
    }
    CHECK(std::memcmp(dst.bytes.data() + 4096, joined.data(), joined.size()) == 0);
    CHECK(std::string(reinterpret_cast<char*>(dst.bytes.data()), 16) == "inline data list");
    CHECK(std::string(reinterpret_cast<char*>(dst.bytes.data() + 6000), 12) == "inline #####");

    // Inline beyond the QP's max_inline_data fails the batch; nothing is posted.
    std::vector<char> big(4096, 'z');
    const ibv_data_buf too_much[2] = {{big.data(), 2048}, {big.data(), 2048}};
    ibv_wr_start(x);
    x->wr_id = 9;
    ibv_wr_send(x);
    ibv_wr_set_inline_data_list(x, 2, too_much);
    CHECK(ibv_wr_complete(x) == EINVAL);
    usleep(20000);
    ibv_wc none[2];
    CHECK(ibv_poll_cq(cq, 2, none) == 0);
    CHECK(ibv_destroy_qp(uc) == 0);
    CHECK(ibv_destroy_qp(uc_peer) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("ibv_query_device(_ex) and ibv_query_port in rxe's manner, limits as rnicd enforces them", "[fidelity]") {
    Device d;
    ibv_device_attr a{};
    REQUIRE(ibv_query_device(d.ctx, &a) == 0);
    // rxe: vendor 0xffffff (no OUI), part 0, hw_ver 0, fw_ver "major.minor.sub_minor".
    CHECK(a.vendor_id == 0xffffff);
    CHECK(a.vendor_part_id == 0);
    CHECK(a.hw_ver == 0);
    const std::string fw(a.fw_ver);
    unsigned major = 9, minor = 0, sub = 9;
    char tail = 0;
    CHECK(std::sscanf(fw.c_str(), "%u.%u.%u%c", &major, &minor, &sub, &tail) == 3);
    CHECK(major == 0);
    CHECK(minor >= 3);  // the host-interface ABI version
    CHECK(sub == 0);
    // Exactly what rnicd implements (device_caps.hpp); nothing rxe lacks.
    const unsigned claimed = IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW |
                             IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    CHECK(a.device_cap_flags == claimed);
    CHECK((a.device_cap_flags & ~0x01223c76u) == 0);  // rxe 6.1's flags
    CHECK(a.atomic_cap == IBV_ATOMIC_HCA);
    CHECK(a.sys_image_guid == a.node_guid);
    CHECK(a.phys_port_cnt == 1);
    CHECK(a.max_sge_rd == a.max_sge);
    CHECK(a.max_ee_rd_atom == 0);
    CHECK(a.max_mw == 4096);
    CHECK(a.max_mcast_grp == 0);
    CHECK(a.max_pkeys == 1);
    CHECK(a.local_ca_ack_delay == 15);

    ibv_device_attr_ex x{};
    REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &x) == 0);
    CHECK(std::memcmp(&x.orig_attr, &a, sizeof a) == 0);
    // Beyond 6.1's rxe: IBTA 1.5's FLUSH_GLOBAL (bit 38) and ATOMIC_WRITE (bit 40), and ODP.
    CHECK(x.device_cap_flags_ex == (claimed | (1ull << 38) | (1ull << 40)));
    CHECK(x.odp_caps.general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
    CHECK((x.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE) != 0);
    CHECK(x.tso_caps.max_tso == 0);
    CHECK(x.max_wq_type_rq == 0);

    ibv_port_attr p{};
    REQUIRE(ibv_query_port(d.ctx, 1, &p) == 0);
    CHECK(p.state == IBV_PORT_ACTIVE);
    CHECK(p.port_cap_flags == IBV_PORT_CM_SUP);  // rxe: 0x00010000
    CHECK(p.port_cap_flags2 == 0);
    CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
    CHECK(p.max_mtu == IBV_MTU_4096);
    CHECK(p.active_mtu <= p.max_mtu);
    CHECK(p.max_vl_num == 1);
    CHECK(p.pkey_tbl_len == 1);
    CHECK(p.gid_tbl_len >= 2);
    CHECK(p.lid == 0);
    CHECK(p.sm_lid == 0);
    CHECK(p.phys_state == 5);  // LinkUp
    // ib_get_eth_speed()'s table: 1X or 4X at SDR/DDR/FDR10/EDR.
    CHECK((p.active_width == 1 || p.active_width == 2));
    CHECK((p.active_speed == 1 || p.active_speed == 2 || p.active_speed == 8 || p.active_speed == 32));

    // The limits are the ones create enforces: one past each fails, the limit itself is accepted
    // where it costs little.
    ibv_cq* cq = ibv_create_cq(d.ctx, 8, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    errno = 0;
    CHECK(ibv_create_cq(d.ctx, a.max_cqe + 1, nullptr, nullptr, 0) == nullptr);
    CHECK(errno == EINVAL);
    auto qp_with = [&](ibv_qp_cap cap) {
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap = cap;
        errno = 0;
        ibv_qp* qp = ibv_create_qp(d.pd, &init);
        const int err = qp == nullptr ? errno : 0;
        if (qp != nullptr) ibv_destroy_qp(qp);
        return err;
    };
    CHECK(qp_with({static_cast<uint32_t>(a.max_qp_wr) + 1, 1, 1, 1, 0}) == EINVAL);
    CHECK(qp_with({1, static_cast<uint32_t>(a.max_qp_wr) + 1, 1, 1, 0}) == EINVAL);
    CHECK(qp_with({1, 1, static_cast<uint32_t>(a.max_sge) + 1, 1, 0}) == EINVAL);
    CHECK(qp_with({1, 1, 1, static_cast<uint32_t>(a.max_sge) + 1, 0}) == EINVAL);
    CHECK(qp_with({1, 1, static_cast<uint32_t>(a.max_sge), static_cast<uint32_t>(a.max_sge), 0}) == 0);
    ibv_srq_init_attr sattr{};
    sattr.attr = {1, static_cast<uint32_t>(a.max_srq_sge) + 1, 0};
    errno = 0;
    CHECK(ibv_create_srq(d.pd, &sattr) == nullptr);
    CHECK(errno == EINVAL);
    sattr.attr = {static_cast<uint32_t>(a.max_srq_wr) + 1, 1, 0};
    errno = 0;
    CHECK(ibv_create_srq(d.pd, &sattr) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(ibv_destroy_cq(cq) == 0);
}

namespace {

// `count` signaled RDMA WRITEs of 8 bytes, wr_ids first, first + 1, ...
void post_writes(ibv_qp* qp, Buffer& src, Buffer& dst, uint64_t first, int count) {
    for (int i = 0; i < count; ++i) {
        ibv_sge sge{src.addr(8 * (first + i) % 4096), 8, src.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = first + i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = dst.addr(8 * (first + i) % 4096);
        wr.wr.rdma.rkey = dst.mr->rkey;
        ibv_send_wr* bad = nullptr;
        REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
    }
}

// Waits (10 s at most) until dst's [offset, offset + bytes) equals src's, then 300 ms for the
// ACKs and completions behind them.
void wait_landed(Buffer& src, Buffer& dst, size_t offset, size_t bytes) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::memcmp(src.bytes.data() + offset, dst.bytes.data() + offset, bytes) != 0 &&
           std::chrono::steady_clock::now() < deadline)
        usleep(1000);
    usleep(300000);
}

}  // namespace

TEST_CASE("ibv_resize_cq: grow and shrink with completions pending, none lost, order kept, rxe's EINVAL",
          "[fidelity]") {
    Device d;
    ibv_comp_channel* channel = ibv_create_comp_channel(d.ctx);
    REQUIRE(channel != nullptr);
    ibv_cq* cq = ibv_create_cq(d.ctx, 8, nullptr, channel, 0);
    REQUIRE(cq != nullptr);
    ibv_cq* peer_cq = ibv_create_cq(d.ctx, 8, nullptr, nullptr, 0);
    REQUIRE(peer_cq != nullptr);
    ibv_qp* a = make_qp(d, cq, IBV_QPT_RC);
    ibv_qp* b = make_qp(d, peer_cq, IBV_QPT_RC);
    connect(d, a, b, IBV_QPT_RC);
    Buffer src(d.pd, 4096), dst(d.pd, 4096);
    src.fill(5);

    CHECK(ibv_resize_cq(cq, 0) == EINVAL);
    ibv_device_attr attr{};
    REQUIRE(ibv_query_device(d.ctx, &attr) == 0);
    CHECK(ibv_resize_cq(cq, attr.max_cqe + 1) == EINVAL);

    // A full CQ (8 completions of 8: more would be an overrun, IBA 11.4.2.1). Their data lands
    // before their ACKs: wait for all of it, then give the ACKs time (the EINVAL below needs
    // all 8 held).
    post_writes(a, src, dst, 0, 8);
    wait_landed(src, dst, 0, 8 * 8);
    CHECK(ibv_resize_cq(cq, 7) == EINVAL);  // below the 8 it holds
    CHECK(cq->cqe == 8);
    REQUIRE(ibv_resize_cq(cq, 8) == 0);     // exactly what it holds
    CHECK(cq->cqe == 8);
    REQUIRE(ibv_resize_cq(cq, 64) == 0);    // grow with all of them pending
    CHECK(cq->cqe == 64);
    // More than the old size on top, then everything in order.
    post_writes(a, src, dst, 8, 24);
    auto wc = wait_for(cq, 32, 20000);
    REQUIRE(wc.size() == 32);
    for (size_t i = 0; i < wc.size(); ++i) {
        CHECK(wc[i].wr_id == i);
        CHECK(wc[i].status == IBV_WC_SUCCESS);
        CHECK(wc[i].opcode == IBV_WC_RDMA_WRITE);
    }
    CHECK(std::memcmp(dst.bytes.data(), src.bytes.data(), 32 * 8) == 0);

    // Shrink with some pending: polled in part before, the rest after, still in order.
    post_writes(a, src, dst, 100, 6);
    wait_landed(src, dst, 100 * 8, 6 * 8);
    ibv_wc two[2];
    REQUIRE(ibv_poll_cq(cq, 2, two) == 2);
    CHECK(two[0].wr_id == 100);
    CHECK(two[1].wr_id == 101);
    CHECK(ibv_resize_cq(cq, 3) == EINVAL);
    REQUIRE(ibv_resize_cq(cq, 4) == 0);
    CHECK(cq->cqe == 4);
    wc = wait_for(cq, 4, 20000);
    REQUIRE(wc.size() == 4);
    for (size_t i = 0; i < wc.size(); ++i) CHECK(wc[i].wr_id == 102 + i);

    // An armed CQ stays armed across a resize: the next completion raises the event.
    REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
    REQUIRE(ibv_resize_cq(cq, 16) == 0);
    post_writes(a, src, dst, 200, 1);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == cq);
    ibv_ack_cq_events(cq, 1);
    wc = wait_for(cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].wr_id == 200);

    CHECK(ibv_destroy_qp(a) == 0);
    CHECK(ibv_destroy_qp(b) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_destroy_cq(peer_cq) == 0);
    CHECK(ibv_destroy_comp_channel(channel) == 0);
}

TEST_CASE("ibv_rereg_mr: rdma-core's argument checks, then the command (keys kept, as mlx5)", "[fidelity]") {
    Device d;
    Buffer buf(d.pd, 4096);
    const ibv_mr before = *buf.mr;
    errno = 0;
    CHECK(ibv_rereg_mr(buf.mr, 1 << 5, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);  // an unknown flag
    errno = 0;
    CHECK(ibv_rereg_mr(buf.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 4096, 0) == IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);  // a translation without an address
    errno = 0;
    CHECK(ibv_rereg_mr(buf.mr, IBV_REREG_MR_CHANGE_PD, d.pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) ==
          IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);  // access bits without CHANGE_ACCESS
    errno = 0;
    CHECK(ibv_rereg_mr(buf.mr, 0, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_CMD);
    CHECK(errno == EINVAL);  // no flag: the kernel's EINVAL (ib_uverbs_rereg_mr)
    CHECK(ibv_rereg_mr(buf.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == 0);
    CHECK(buf.mr->lkey == before.lkey);
    CHECK(buf.mr->rkey == before.rkey);
    CHECK(buf.mr->addr == before.addr);
    CHECK(buf.mr->pd == before.pd);
}
