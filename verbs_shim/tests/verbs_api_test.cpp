// The drop-in libibverbs.so.1 through rdma-core's own verbs.h, against a real rnicd (started by
// check_verbs_api.py on the test bed; $RNIC_RUN_DIR names its socket directory, $RNIC_TEST_IP
// its address). Two QPs of the one daemon talk to each other (rnicd loops frames for its own
// address back into the engine), so every operation crosses the real engine and rings.
#define CATCH_CONFIG_MAIN
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

// rdma-core exports it (IBVERBS_1.0) but declares it only in its provider header, driver.h.
extern "C" int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
}

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
    Buffer(ibv_pd* pd, size_t size,
           int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC)
        : bytes(size) {
        mr = ibv_reg_mr(pd, bytes.data(), size, access);
        REQUIRE(mr != nullptr);
    }
    ~Buffer() { ibv_dereg_mr(mr); }
    uint64_t addr(size_t offset = 0) { return reinterpret_cast<uintptr_t>(bytes.data() + offset); }
};

// Polls until `want` completions arrived or 5 s passed.
std::vector<ibv_wc> wait_for(ibv_cq* cq, size_t want) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc[8];
        const int n = ibv_poll_cq(cq, 8, wc);
        REQUIRE(n >= 0);
        out.insert(out.end(), wc, wc + n);
        if (n == 0) usleep(50);
    }
    return out;
}

ibv_gid gid0(ibv_context* ctx) {
    ibv_gid g{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &g) == 0);
    return g;
}

// Two QPs of one type on one device, connected to each other through GID 0.
// The Q_Key of every UD QP the pair brings up, and so of every UD send to them.
constexpr uint32_t kUdQkey = 0x11111111;

struct Pair {
    Device& d;
    ibv_cq* cq;
    ibv_qp* a = nullptr;
    ibv_qp* b = nullptr;
    Pair(Device& dev, ibv_qp_type type, bool extended = false, uint64_t send_ops = 0) : d(dev) {
        cq = ibv_create_cq(d.ctx, 256, nullptr, nullptr, 0);
        REQUIRE(cq != nullptr);
        a = make(type, extended, send_ops);
        b = make(type, extended, send_ops);
        bring_up(a, b->qp_num, type);
        bring_up(b, a->qp_num, type);
    }
    ~Pair() {
        ibv_destroy_qp(a);
        ibv_destroy_qp(b);
        ibv_destroy_cq(cq);
    }
    ibv_qp* make(ibv_qp_type type, bool extended, uint64_t send_ops, ibv_srq* srq = nullptr) {
        ibv_qp_init_attr_ex attr{};
        attr.send_cq = cq;
        attr.recv_cq = cq;
        attr.srq = srq;
        attr.qp_type = type;
        attr.cap = {64, 64, 4, 4, 64};
        attr.comp_mask = IBV_QP_INIT_ATTR_PD | (extended ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
        attr.pd = d.pd;
        attr.send_ops_flags = send_ops;
        ibv_qp* qp = ibv_create_qp_ex(d.ctx, &attr);
        REQUIRE(qp != nullptr);
        CHECK(attr.cap.max_inline_data >= 64);  // the granted caps come back
        return qp;
    }
    void bring_up(ibv_qp* qp, uint32_t remote, ibv_qp_type type) {
        ibv_qp_attr at{};
        at.qp_state = IBV_QPS_INIT;
        at.pkey_index = 0;
        at.port_num = 1;
        int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (type == IBV_QPT_UD) {
            at.qkey = kUdQkey;
            mask |= IBV_QP_QKEY;
        } else {
            at.qp_access_flags =
                IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
            mask |= IBV_QP_ACCESS_FLAGS;
        }
        REQUIRE(ibv_modify_qp(qp, &at, mask) == 0);
        CHECK(qp->state == IBV_QPS_INIT);
        at = {};
        at.qp_state = IBV_QPS_RTR;
        mask = IBV_QP_STATE;
        if (type != IBV_QPT_UD) {
            at.path_mtu = IBV_MTU_1024;
            at.dest_qp_num = remote;
            at.rq_psn = 100;
            at.ah_attr.is_global = 1;
            at.ah_attr.grh.dgid = gid0(d.ctx);
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
        at = {};
        at.qp_state = IBV_QPS_RTS;
        at.sq_psn = 100;
        mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (type == IBV_QPT_RC) {
            at.timeout = 14;
            at.retry_cnt = 7;
            at.rnr_retry = 7;
            at.max_rd_atomic = 4;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        REQUIRE(ibv_modify_qp(qp, &at, mask) == 0);
        CHECK(qp->state == IBV_QPS_RTS);
    }
};

// One signaled RDMA WRITE or READ of `sge` against [remote, remote + sge.length) under `rkey`,
// posted on `qp` and waited for: its completion (status IBV_WC_GENERAL_ERR if none came).
ibv_wc rdma(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode opcode, ibv_sge sge, uint64_t remote, uint32_t rkey, uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
    const auto wc = wait_for(cq, 1);
    if (wc.empty()) {
        ibv_wc none{};
        none.status = IBV_WC_GENERAL_ERR;
        return none;
    }
    return wc[0];
}

// One signaled UD SEND of `sge` through `ah` to `remote_qpn`.
void post_ud_send(ibv_qp* qp, ibv_sge sge, ibv_ah* ah, uint32_t remote_qpn, uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = kUdQkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
}

void post_recv(ibv_qp* qp, Buffer& buf, size_t offset, uint32_t length, uint64_t wr_id) {
    ibv_sge sge{buf.addr(offset), length, buf.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(qp, &wr, &bad) == 0);
}

}  // namespace

TEST_CASE("devices, attributes, GIDs and P_Keys as rdma-core reports them", "[api]") {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE(list != nullptr);
    REQUIRE(n == 1);
    CHECK(std::string(ibv_get_device_name(list[0])) == "rnic0");
    CHECK(list[0]->transport_type == IBV_TRANSPORT_IB);
    CHECK(list[0]->node_type == IBV_NODE_CA);
    CHECK(ibv_get_device_guid(list[0]) != 0);
    CHECK(list[1] == nullptr);
    ibv_free_device_list(list);

    Device d;
    ibv_device_attr attr{};
    REQUIRE(ibv_query_device(d.ctx, &attr) == 0);
    CHECK(attr.phys_port_cnt == 1);
    CHECK(attr.max_qp > 0);
    CHECK(attr.max_sge >= 4);
    CHECK(attr.atomic_cap == IBV_ATOMIC_HCA);
    CHECK(attr.node_guid == ibv_get_device_guid(d.ctx->device));
    ibv_device_attr_ex ex{};
    REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &ex) == 0);
    CHECK(ex.orig_attr.max_qp == attr.max_qp);
    // On-demand paging, explicit and implicit (docs/host_interface.md "On-demand regions").
    CHECK(ex.odp_caps.general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));

    ibv_port_attr port{};
    REQUIRE(ibv_query_port(d.ctx, 1, &port) == 0);
    CHECK(port.state == IBV_PORT_ACTIVE);
    CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
    CHECK(port.lid == 0);
    CHECK(port.gid_tbl_len >= 1);
    CHECK((port.active_mtu == IBV_MTU_1024 || port.active_mtu == IBV_MTU_4096));
    CHECK(ibv_query_port(d.ctx, 2, &port) == EINVAL);

    // GID 0 is the RoCE v2 GID ::ffff:<IPv4> of the port.
    const ibv_gid g = gid0(d.ctx);
    uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    REQUIRE(inet_pton(AF_INET, env("RNIC_TEST_IP").c_str(), mapped + 12) == 1);
    CHECK(std::memcmp(g.raw, mapped, 16) == 0);
    ibv_gid_entry entry{};
    REQUIRE(ibv_query_gid_ex(d.ctx, 1, 0, &entry, 0) == 0);
    CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V2);
    CHECK(std::memcmp(entry.gid.raw, mapped, 16) == 0);
    ibv_gid none{};
    CHECK(ibv_query_gid(d.ctx, 1, port.gid_tbl_len, &none) == -1);
    CHECK(ibv_query_gid_ex(d.ctx, 1, static_cast<uint32_t>(port.gid_tbl_len), &entry, 0) == EINVAL);
    CHECK(ibv_query_gid_ex(d.ctx, 1, 0, &entry, 1) == EINVAL);

    __be16 pkey = 0;
    REQUIRE(ibv_query_pkey(d.ctx, 1, 0, &pkey) == 0);
    CHECK(ntohs(pkey) == 0xffff);
    CHECK(ibv_query_pkey(d.ctx, 1, 1, &pkey) == -1);
    CHECK(ibv_get_pkey_index(d.ctx, 1, htons(0xffff)) == 0);

    char board[64] = {};
    CHECK(ibv_read_sysfs_file(d.ctx->device->ibdev_path, "board_id", board, sizeof board) > 0);
    CHECK(std::string(board) == "RNIC_SW_ROCEV2");
    CHECK(d.ctx->async_fd >= 0);
    CHECK(d.ctx->num_comp_vectors == 1);
}

TEST_CASE("bad arguments and absent features return rdma-core's errno", "[api]") {
    Device d;
    errno = 0;
    CHECK(ibv_create_cq(d.ctx, 0, nullptr, nullptr, 0) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(ibv_create_cq(d.ctx, 16, nullptr, nullptr, 1) == nullptr);  // one completion vector
    CHECK(errno == EINVAL);
    ibv_cq* cq = ibv_create_cq(d.ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    CHECK(cq->cqe >= 16);

    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap = {4, 4, 1, 1, 0};
    init.qp_type = IBV_QPT_RAW_PACKET;
    CHECK(ibv_create_qp(d.pd, &init) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    init.qp_type = IBV_QPT_RC;
    init.send_cq = nullptr;
    CHECK(ibv_create_qp(d.pd, &init) == nullptr);
    CHECK(errno == EINVAL);
    init.send_cq = cq;
    init.cap.max_send_wr = 1u << 30;  // beyond max_qp_wr
    CHECK(ibv_create_qp(d.pd, &init) == nullptr);
    CHECK(errno == EINVAL);
    init.cap.max_send_wr = 4;

    ibv_qp_init_attr_ex ex{};
    ex.send_cq = cq;
    ex.recv_cq = cq;
    ex.qp_type = IBV_QPT_RC;
    ex.cap = {4, 4, 1, 1, 0};
    ex.pd = d.pd;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.send_ops_flags = IBV_QP_EX_WITH_TSO;
    CHECK(ibv_create_qp_ex(d.ctx, &ex) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
    CHECK(ibv_create_qp_ex(d.ctx, &ex) == nullptr);
    CHECK(errno == EOPNOTSUPP);

    // A QP that skips INIT: the state machine's EINVAL.
    ibv_qp* qp = ibv_create_qp(d.pd, &init);
    REQUIRE(qp != nullptr);
    CHECK(ibv_qp_to_qp_ex(qp) == nullptr);  // not created with send_ops_flags
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == EINVAL);
    CHECK(qp->state == IBV_QPS_RESET);
    CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_ALT_PATH) == EOPNOTSUPP);

    // Memory: unreadable pages, and a PD still in use.
    void* none = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(none != MAP_FAILED);
    CHECK(ibv_reg_mr(d.pd, none, 4096, int{IBV_ACCESS_LOCAL_WRITE}) == nullptr);
    CHECK(errno == EFAULT);
    munmap(none, 4096);
    {
        Buffer b(d.pd, 4096);
        CHECK(ibv_dealloc_pd(d.pd) == EBUSY);
        CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == 0);
    }

    // Memory windows are offered (verbs_mw_test.cpp); a type that does not exist is EINVAL.
    CHECK(ibv_alloc_mw(d.pd, static_cast<ibv_mw_type>(9)) == nullptr);
    CHECK(errno == EINVAL);
    // Features rnicd does not offer answer EOPNOTSUPP rather than crash.
    ibv_xrcd_init_attr xattr{};
    CHECK(ibv_open_xrcd(d.ctx, &xattr) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_gid mgid{};
    CHECK(ibv_attach_mcast(qp, &mgid, 0) == EOPNOTSUPP);
    CHECK(ibv_resize_cq(cq, 0) == EINVAL);  // resizing works (verbs_fidelity_test); a size of 0 is EINVAL
    ibv_cq_init_attr_ex cqx{};
    cqx.cqe = 16;
    cqx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;  // no wall clock on the device
    CHECK(ibv_create_cq_ex(d.ctx, &cqx) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_flow_attr flow{};
    CHECK(ibv_create_flow(qp, &flow) == nullptr);
    ibv_wq_init_attr wq{};
    CHECK(ibv_create_wq(d.ctx, &wq) == nullptr);
    CHECK(errno == EOPNOTSUPP);

    CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("RC through ibv_post_send: WRITE, WRITE_WITH_IMM, SEND, READ and both atomics", "[api]") {
    Device d;
    Pair p(d, IBV_QPT_RC);
    Buffer src(d.pd, 8192), dst(d.pd, 8192);
    for (size_t i = 0; i < 4096; ++i) src.bytes[i] = static_cast<uint8_t>(i * 7 + 1);

    ibv_sge sge{src.addr(), 4096, src.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = dst.addr();
    wr.wr.rdma.rkey = dst.mr->rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    auto wc = wait_for(p.cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
    CHECK(wc[0].wr_id == 1);
    CHECK(wc[0].qp_num == p.a->qp_num);
    CHECK(std::memcmp(src.bytes.data(), dst.bytes.data(), 4096) == 0);

    // WRITE_WITH_IMM consumes a receive on B and carries the immediate.
    post_recv(p.b, dst, 4096, 16, 77);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(0xfeedbeef);
    sge.length = 100;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wc = wait_for(p.cq, 2);
    REQUIRE(wc.size() == 2);
    for (const ibv_wc& w : wc) {
        CHECK(w.status == IBV_WC_SUCCESS);
        if (w.wr_id == 77) {
            CHECK(w.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
            CHECK((w.wc_flags & IBV_WC_WITH_IMM) != 0);
            CHECK(ntohl(w.imm_data) == 0xfeedbeef);
            CHECK(w.qp_num == p.b->qp_num);
        }
    }

    // SEND of 3000 bytes with the payload inline is refused (inline cap 64); not inline it works.
    post_recv(p.b, dst, 0, 4096, 78);
    wr.wr_id = 3;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    sge.length = 3000;
    CHECK(ibv_post_send(p.a, &wr, &bad) == EINVAL);
    CHECK(bad == &wr);
    wr.send_flags = IBV_SEND_SIGNALED;
    std::memset(dst.bytes.data(), 0, 4096);
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wc = wait_for(p.cq, 2);
    REQUIRE(wc.size() == 2);
    for (const ibv_wc& w : wc) {
        CHECK(w.status == IBV_WC_SUCCESS);
        if (w.wr_id == 78) CHECK(w.byte_len == 3000);
    }
    CHECK(std::memcmp(src.bytes.data(), dst.bytes.data(), 3000) == 0);

    // READ back into the second half of the source buffer.
    wr.wr_id = 4;
    wr.opcode = IBV_WR_RDMA_READ;
    sge = {src.addr(4096), 2048, src.mr->lkey};
    wr.wr.rdma.remote_addr = dst.addr();
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wc = wait_for(p.cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].opcode == IBV_WC_RDMA_READ);
    CHECK(std::memcmp(src.bytes.data() + 4096, dst.bytes.data(), 2048) == 0);

    // Atomics on an 8-byte word of B: fetch-and-add then compare-and-swap.
    uint64_t word = 40;
    std::memcpy(dst.bytes.data() + 8000, &word, 8);
    sge = {src.addr(8000), 8, src.mr->lkey};
    wr.wr_id = 5;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.wr.atomic.remote_addr = dst.addr(8000);
    wr.wr.atomic.rkey = dst.mr->rkey;
    wr.wr.atomic.compare_add = 2;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wc = wait_for(p.cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].opcode == IBV_WC_FETCH_ADD);
    uint64_t old = 0;
    std::memcpy(&old, src.bytes.data() + 8000, 8);
    CHECK(old == 40);
    wr.wr_id = 6;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.compare_add = 42;
    wr.wr.atomic.swap = 7;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wc = wait_for(p.cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].opcode == IBV_WC_COMP_SWAP);
    std::memcpy(&word, dst.bytes.data() + 8000, 8);
    CHECK(word == 7);

    // Errors on the post path: too many SGEs, a full queue.
    ibv_sge many[8]{};
    wr.sg_list = many;
    wr.num_sge = 8;
    wr.opcode = IBV_WR_SEND;
    CHECK(ibv_post_send(p.a, &wr, &bad) == EINVAL);
    sge = {src.addr(), 8, src.mr->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = dst.addr();
    wr.wr.rdma.rkey = dst.mr->rkey;
    wr.send_flags = 0;  // unsignaled: only the last one completes, retiring all
    std::vector<ibv_send_wr> chain(80, wr);
    for (size_t i = 0; i + 1 < chain.size(); ++i) chain[i].next = &chain[i + 1];
    chain.back().next = nullptr;
    CHECK(ibv_post_send(p.a, chain.data(), &bad) == ENOMEM);
    CHECK(bad == &chain[64]);  // 64 slots granted
}

TEST_CASE("MRs named by an iova other than their address: WRITE, READ, atomics, bounds", "[api]") {
    Device d;
    // Three pages and a bit at malloc's in-page offset: accesses cross MTT pages.
    constexpr size_t kLen = 3 * 4096 + 100;
    std::vector<uint8_t> local(kLen), remote(kLen, 0);
    for (size_t i = 0; i < kLen; ++i) local[i] = static_cast<uint8_t>(i * 13 + 5);
    const auto local_addr = reinterpret_cast<uintptr_t>(local.data());
    const auto remote_addr = reinterpret_cast<uintptr_t>(remote.data());
    const int access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

    // Linux's uverbs, under every rdma-core provider, refuses an iova whose offset in its page
    // differs from the buffer's (EINVAL): a program relying on it would fail on real devices.
    const uint64_t remote_iova = remote_addr + 0x10000000;
    errno = 0;
    CHECK(ibv_reg_mr_iova2(d.pd, remote.data(), kLen, remote_iova + 0x123, static_cast<unsigned>(access)) == nullptr);
    CHECK(errno == EINVAL);

    ibv_mr* rmr = ibv_reg_mr_iova2(d.pd, remote.data(), kLen, remote_iova, static_cast<unsigned>(access));
    REQUIRE(rmr != nullptr);
    CHECK(rmr->addr == remote.data());  // rdma-core keeps the address here, not the iova
    CHECK(rmr->length == kLen);
    // The local MR through ibv_reg_mr_iova itself: the parentheses keep verbs.h's macro from
    // routing the call to ibv_reg_mr_iova2.
    const uint64_t local_iova = 0x5000'0000'0000 + (local_addr & 4095);
    ibv_mr* lmr = (ibv_reg_mr_iova)(d.pd, local.data(), kLen, local_iova, access);
    REQUIRE(lmr != nullptr);
    CHECK(lmr->addr == local.data());

    {
        Pair p(d, IBV_QPT_RC);
        // WRITE from local iova + 50 to remote iova + 100: both SGE and RETH name iovas.
        const uint32_t n = kLen - 200;
        ibv_wc wc =
            rdma(p.a, p.cq, IBV_WR_RDMA_WRITE, {local_iova + 50, n, lmr->lkey}, remote_iova + 100, rmr->rkey, 1);
        CHECK(wc.status == IBV_WC_SUCCESS);
        CHECK(wc.opcode == IBV_WC_RDMA_WRITE);
        CHECK(std::memcmp(remote.data() + 100, local.data() + 50, n) == 0);
        CHECK(std::all_of(remote.begin(), remote.begin() + 100, [](uint8_t b) { return b == 0; }));
        CHECK(std::all_of(remote.begin() + 100 + n, remote.end(), [](uint8_t b) { return b == 0; }));

        // READ 5000 bytes from remote iova + 4000 into local iova + 7000.
        for (size_t i = 0; i < kLen; ++i) remote[i] = static_cast<uint8_t>(i * 7 + 3);
        std::vector<uint8_t> before = local;
        wc = rdma(p.a, p.cq, IBV_WR_RDMA_READ, {local_iova + 7000, 5000, lmr->lkey}, remote_iova + 4000, rmr->rkey, 2);
        CHECK(wc.status == IBV_WC_SUCCESS);
        CHECK(wc.opcode == IBV_WC_RDMA_READ);
        CHECK(std::memcmp(local.data() + 7000, remote.data() + 4000, 5000) == 0);
        CHECK(std::memcmp(local.data(), before.data(), 7000) == 0);
        CHECK(std::memcmp(local.data() + 12000, before.data() + 12000, kLen - 12000) == 0);

        // Fetch-and-add on an 8-byte word named by its iova (same offset in the page as the
        // address, so the word is aligned for the host too).
        const uint64_t word_iova = (remote_iova + 8192) & ~uint64_t{7};
        const size_t word_at = word_iova - remote_iova;
        uint64_t word = 1000;
        std::memcpy(remote.data() + word_at, &word, 8);
        ibv_sge sge{local_iova + 64, 8, lmr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = 3;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.atomic.remote_addr = word_iova;
        wr.wr.atomic.rkey = rmr->rkey;
        wr.wr.atomic.compare_add = 24;
        ibv_send_wr* bad = nullptr;
        REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
        const auto wcs = wait_for(p.cq, 1);
        REQUIRE(wcs.size() == 1);
        CHECK(wcs[0].status == IBV_WC_SUCCESS);
        std::memcpy(&word, remote.data() + word_at, 8);
        CHECK(word == 1024);
        std::memcpy(&word, local.data() + 64, 8);
        CHECK(word == 1000);
    }

    // Outside [iova, iova + length) is a remote access error, and an error moves both QPs of a
    // pair to the error state, so each case gets its own pair.
    const std::vector<uint8_t> snapshot = remote;
    {
        Pair p(d, IBV_QPT_RC);  // 16 bytes from 8 before the end: straddles it
        const ibv_wc wc =
            rdma(p.a, p.cq, IBV_WR_RDMA_WRITE, {local_iova, 16, lmr->lkey}, remote_iova + kLen - 8, rmr->rkey, 4);
        CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
        CHECK(wc.wr_id == 4);
        CHECK(remote == snapshot);  // not even the in-bounds half landed
    }
    {
        Pair p(d, IBV_QPT_RC);  // the buffer's address is below its iova: not inside the MR
        const ibv_wc wc = rdma(p.a, p.cq, IBV_WR_RDMA_READ, {local_iova, 64, lmr->lkey}, remote_addr, rmr->rkey, 5);
        CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    }
    {
        Pair p(d, IBV_QPT_RC);  // one byte past the end
        const ibv_wc wc =
            rdma(p.a, p.cq, IBV_WR_RDMA_READ, {local_iova, 1, lmr->lkey}, remote_iova + kLen, rmr->rkey, 6);
        CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    }
    {
        // Local SGEs are in the lkey's iova space too: the buffer's address is outside it.
        Pair p(d, IBV_QPT_RC);
        const ibv_wc wc = rdma(p.a, p.cq, IBV_WR_RDMA_WRITE, {local_addr, 64, lmr->lkey}, remote_iova, rmr->rkey, 7);
        CHECK(wc.status == IBV_WC_LOC_PROT_ERR);
        CHECK(remote == snapshot);
    }
    CHECK(ibv_dereg_mr(lmr) == 0);
    CHECK(ibv_dereg_mr(rmr) == 0);
}

TEST_CASE("the work-request API (ibv_wr_*) and extended CQ polling", "[api]") {
    Device d;
    const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                         IBV_QP_EX_WITH_RDMA_READ;
    Pair p(d, IBV_QPT_RC, true, ops);
    ibv_qp_ex* qpx = ibv_qp_to_qp_ex(p.a);
    REQUIRE(qpx != nullptr);
    CHECK(reinterpret_cast<void*>(qpx) == reinterpret_cast<void*>(p.a));
    Buffer src(d.pd, 4096), dst(d.pd, 4096);
    for (size_t i = 0; i < 4096; ++i) src.bytes[i] = static_cast<uint8_t>(255 - i);
    post_recv(p.b, dst, 2048, 64, 90);

    char inline_text[] = "carried inside the WQE";
    ibv_wr_start(qpx);
    qpx->wr_id = 10;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, dst.mr->rkey, dst.addr());
    ibv_wr_set_sge(qpx, src.mr->lkey, src.addr(), 1024);
    qpx->wr_id = 11;
    ibv_wr_send(qpx);
    ibv_wr_set_inline_data(qpx, inline_text, sizeof inline_text);
    std::memset(inline_text, 'x', sizeof inline_text - 1);  // copied at the call, not at complete
    REQUIRE(ibv_wr_complete(qpx) == 0);
    auto wc = wait_for(p.cq, 3);
    REQUIRE(wc.size() == 3);
    for (const ibv_wc& w : wc) CHECK(w.status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(src.bytes.data(), dst.bytes.data(), 1024) == 0);
    CHECK(std::string(reinterpret_cast<char*>(dst.bytes.data() + 2048)) == "carried inside the WQE");

    // An opcode the QP was not created for fails the whole batch: nothing is posted.
    ibv_wr_start(qpx);
    qpx->wr_id = 12;
    ibv_wr_rdma_write(qpx, dst.mr->rkey, dst.addr());
    ibv_wr_set_sge(qpx, src.mr->lkey, src.addr(), 8);
    ibv_wr_atomic_cmp_swp(qpx, dst.mr->rkey, dst.addr(), 0, 1);
    ibv_wr_set_sge(qpx, src.mr->lkey, src.addr(), 8);
    CHECK(ibv_wr_complete(qpx) == EINVAL);
    ibv_wc none[4];
    usleep(20000);
    CHECK(ibv_poll_cq(p.cq, 4, none) == 0);

    // Aborting discards; a later batch still works.
    ibv_wr_start(qpx);
    ibv_wr_send(qpx);
    ibv_wr_abort(qpx);

    // Fetch-and-add through the builder, polled with the extended CQ API on a second CQ.
    ibv_cq_init_attr_ex cattr{};
    cattr.cqe = 16;
    cattr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    ibv_cq_ex* cqx = ibv_create_cq_ex(d.ctx, &cattr);
    REQUIRE(cqx != nullptr);
    ibv_qp_init_attr_ex qattr{};
    qattr.send_cq = ibv_cq_ex_to_cq(cqx);
    qattr.recv_cq = ibv_cq_ex_to_cq(cqx);
    qattr.qp_type = IBV_QPT_RC;
    qattr.cap = {8, 8, 1, 1, 0};
    qattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    qattr.pd = d.pd;
    qattr.send_ops_flags = ops;
    ibv_qp* c = ibv_create_qp_ex(d.ctx, &qattr);
    REQUIRE(c != nullptr);
    ibv_qp* c_peer = p.make(IBV_QPT_RC, false, 0);
    p.bring_up(c, c_peer->qp_num, IBV_QPT_RC);
    p.bring_up(c_peer, c->qp_num, IBV_QPT_RC);
    uint64_t counter = 5;
    std::memcpy(dst.bytes.data() + 4000, &counter, 8);
    ibv_qp_ex* cx = ibv_qp_to_qp_ex(c);
    // The device clock is CLOCK_MONOTONIC in ns (1 GHz): the completion falls between these.
    ibv_device_attr_ex dx{};
    REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &dx) == 0);
    CHECK(dx.hca_core_clock == 1'000'000);
    CHECK(dx.completion_timestamp_mask == ~uint64_t{0});
    ibv_values_ex before{};
    before.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    REQUIRE(ibv_query_rt_values_ex(d.ctx, &before) == 0);
    CHECK(before.comp_mask == IBV_VALUES_MASK_RAW_CLOCK);
    const uint64_t t0 = uint64_t(before.raw_clock.tv_sec) * 1'000'000'000 + uint64_t(before.raw_clock.tv_nsec);
    ibv_wr_start(cx);
    cx->wr_id = 20;
    cx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_fetch_add(cx, dst.mr->rkey, dst.addr(4000), 10);
    ibv_wr_set_sge(cx, src.mr->lkey, src.addr(4000), 8);
    REQUIRE(ibv_wr_complete(cx) == 0);
    ibv_poll_cq_attr pattr{};
    int rc = ENOENT;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((rc = ibv_start_poll(cqx, &pattr)) == ENOENT && std::chrono::steady_clock::now() < deadline)
        usleep(50);
    REQUIRE(rc == 0);
    CHECK(cqx->status == IBV_WC_SUCCESS);
    CHECK(cqx->wr_id == 20);
    CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_FETCH_ADD);
    CHECK(ibv_wc_read_qp_num(cqx) == c->qp_num);
    timespec after{};
    clock_gettime(CLOCK_MONOTONIC, &after);
    const uint64_t ts = ibv_wc_read_completion_ts(cqx);
    CHECK(ts > t0);
    CHECK(ts <= uint64_t(after.tv_sec) * 1'000'000'000 + uint64_t(after.tv_nsec));
    CHECK(ibv_next_poll(cqx) == ENOENT);
    ibv_end_poll(cqx);
    std::memcpy(&counter, dst.bytes.data() + 4000, 8);
    CHECK(counter == 15);
    CHECK(ibv_destroy_qp(c) == 0);
    CHECK(ibv_destroy_qp(c_peer) == 0);
    CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0);
}

TEST_CASE("completion channels: notify, event with the CQ's context, ack, destroy", "[api]") {
    Device d;
    ibv_comp_channel* ch = ibv_create_comp_channel(d.ctx);
    REQUIRE(ch != nullptr);
    int tag = 0;
    ibv_cq* cq = ibv_create_cq(d.ctx, 32, &tag, ch, 0);
    REQUIRE(cq != nullptr);
    CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap = {8, 8, 1, 1, 0};
    init.qp_type = IBV_QPT_RC;
    Buffer buf(d.pd, 4096);
    Pair p(d, IBV_QPT_RC);
    ibv_sge sge{buf.addr(), 64, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = buf.addr(2048);
    wr.wr.rdma.rkey = buf.mr->rkey;
    ibv_send_wr* bad = nullptr;
    // A QP completing on the channel's CQ, with a peer of its own on the pair's CQ.
    ibv_qp* a = ibv_create_qp(d.pd, &init);
    REQUIRE(a != nullptr);
    ibv_qp* a_peer = p.make(IBV_QPT_RC, false, 0);
    p.bring_up(a, a_peer->qp_num, IBV_QPT_RC);
    p.bring_up(a_peer, a->qp_num, IBV_QPT_RC);
    REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
    REQUIRE(ibv_post_send(a, &wr, &bad) == 0);
    pollfd pfd{ch->fd, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 5000) == 1);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == cq);
    CHECK(ev_ctx == &tag);
    auto wc = wait_for(cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    ibv_ack_cq_events(cq, 1);
    CHECK(cq->comp_events_completed == 1);
    CHECK(ibv_destroy_qp(a) == 0);
    CHECK(ibv_destroy_qp(a_peer) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_destroy_comp_channel(ch) == 0);
}

TEST_CASE("UD: the GRH in front of the payload and a reply through the AH from the completion", "[api]") {
    Device d;
    Pair p(d, IBV_QPT_UD);
    Buffer buf(d.pd, 8192);
    const uint32_t payload = 512;
    post_recv(p.b, buf, 4096, 40 + payload, 5);
    for (uint32_t i = 0; i < payload; ++i) buf.bytes[i] = static_cast<uint8_t>(i ^ 0x5a);
    ibv_ah_attr ah_attr{};
    ah_attr.is_global = 1;
    ah_attr.grh.dgid = gid0(d.ctx);
    ah_attr.grh.hop_limit = 64;
    ah_attr.port_num = 1;
    ibv_ah* ah = ibv_create_ah(d.pd, &ah_attr);
    REQUIRE(ah != nullptr);
    post_ud_send(p.a, {buf.addr(), payload, buf.mr->lkey}, ah, p.b->qp_num, 1);
    auto wc = wait_for(p.cq, 2);
    REQUIRE(wc.size() == 2);
    const ibv_wc* recv = wc[0].wr_id == 5 ? &wc[0] : &wc[1];
    CHECK(recv->status == IBV_WC_SUCCESS);
    CHECK(recv->byte_len == 40 + payload);
    CHECK((recv->wc_flags & IBV_WC_GRH) != 0);
    CHECK(recv->src_qp == p.a->qp_num);
    CHECK(std::memcmp(buf.bytes.data() + 4096 + 40, buf.bytes.data(), payload) == 0);

    ibv_ah_attr back{};
    REQUIRE(ibv_init_ah_from_wc(d.ctx, 1, const_cast<ibv_wc*>(recv),
                                reinterpret_cast<ibv_grh*>(buf.bytes.data() + 4096), &back) == 0);
    CHECK(back.is_global == 1);
    CHECK(back.grh.sgid_index == 0);
    const ibv_gid g = gid0(d.ctx);
    CHECK(std::memcmp(back.grh.dgid.raw, g.raw, 16) == 0);
    ibv_ah* reply =
        ibv_create_ah_from_wc(d.pd, const_cast<ibv_wc*>(recv), reinterpret_cast<ibv_grh*>(buf.bytes.data() + 4096), 1);
    REQUIRE(reply != nullptr);

    // B answers through that AH to the QPN the completion named, as a UD server does; A's
    // receive must hold the answer and name B as its source.
    const uint32_t answer = 300;
    for (uint32_t i = 0; i < answer; ++i) buf.bytes[1024 + i] = static_cast<uint8_t>(0xc3 - i);
    post_recv(p.a, buf, 6144, 40 + answer, 6);
    post_ud_send(p.b, {buf.addr(1024), answer, buf.mr->lkey}, reply, recv->src_qp, 7);
    const auto answered = wait_for(p.cq, 2);
    REQUIRE(answered.size() == 2);
    const ibv_wc& sent = answered[0].wr_id == 7 ? answered[0] : answered[1];
    const ibv_wc& got = answered[0].wr_id == 6 ? answered[0] : answered[1];
    CHECK(sent.wr_id == 7);
    CHECK(sent.status == IBV_WC_SUCCESS);
    CHECK(got.wr_id == 6);
    CHECK(got.status == IBV_WC_SUCCESS);
    CHECK(got.opcode == IBV_WC_RECV);
    CHECK(got.qp_num == p.a->qp_num);
    CHECK(got.src_qp == p.b->qp_num);
    CHECK(got.byte_len == 40 + answer);
    CHECK((got.wc_flags & IBV_WC_GRH) != 0);
    CHECK(std::memcmp(buf.bytes.data() + 6144 + 40, buf.bytes.data() + 1024, answer) == 0);
    ibv_wc no_grh = *recv;
    no_grh.wc_flags = 0;
    CHECK(ibv_init_ah_from_wc(d.ctx, 1, &no_grh, nullptr, &back) == -1);
    CHECK(ibv_destroy_ah(reply) == 0);
    CHECK(ibv_destroy_ah(ah) == 0);
}

TEST_CASE("SRQ: receives shared by two QPs, query and the limit event", "[api]") {
    Device d;
    ibv_srq_init_attr sattr{};
    sattr.attr.max_wr = 16;
    sattr.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(d.pd, &sattr);
    REQUIRE(srq != nullptr);
    CHECK(sattr.attr.max_wr >= 16);
    Buffer buf(d.pd, 8192);
    for (int i = 0; i < 4; ++i) {
        ibv_sge sge{buf.addr(4096 + i * 256), 256, buf.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 100 + i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        REQUIRE(ibv_post_srq_recv(srq, &wr, &bad) == 0);
    }
    ibv_srq_attr q{};
    REQUIRE(ibv_query_srq(srq, &q) == 0);
    CHECK(q.max_wr >= 16);
    q.srq_limit = 3;
    REQUIRE(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT) == 0);

    // Two receiving QPs share the SRQ; one sender talks to each.
    Pair p(d, IBV_QPT_RC);
    ibv_qp* receivers[2];
    ibv_qp* senders[2];
    for (int i = 0; i < 2; ++i) {
        receivers[i] = p.make(IBV_QPT_RC, false, 0, srq);
        senders[i] = p.make(IBV_QPT_RC, false, 0);
    }
    ibv_recv_wr rwr{};
    ibv_recv_wr* rbad = nullptr;
    CHECK(ibv_post_recv(receivers[0], &rwr, &rbad) == EINVAL);  // a QP with an SRQ has no RQ
    for (int i = 0; i < 2; ++i) {
        p.bring_up(receivers[i], senders[i]->qp_num, IBV_QPT_RC);
        p.bring_up(senders[i], receivers[i]->qp_num, IBV_QPT_RC);
    }
    for (int i = 0; i < 4; ++i) {
        buf.bytes[i * 16] = static_cast<uint8_t>(0xa0 + i);
        ibv_sge sge{buf.addr(i * 16), 16, buf.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        REQUIRE(ibv_post_send(senders[i % 2], &wr, &bad) == 0);
        REQUIRE(wait_for(p.cq, 2).size() == 2);  // the send and the receive it consumed
    }
    // The SRQ fell below its limit of 3: one IBV_EVENT_SRQ_LIMIT_REACHED for it.
    pollfd pfd{d.ctx->async_fd, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 5000) == 1);
    ibv_async_event ev{};
    REQUIRE(ibv_get_async_event(d.ctx, &ev) == 0);
    CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED);
    CHECK(ev.element.srq == srq);
    ibv_ack_async_event(&ev);
    CHECK(srq->events_completed == 1);
    std::vector<uint8_t> firsts;
    for (int i = 0; i < 4; ++i) firsts.push_back(buf.bytes[4096 + i * 256]);
    std::sort(firsts.begin(), firsts.end());
    CHECK(firsts == std::vector<uint8_t>{0xa0, 0xa1, 0xa2, 0xa3});
    for (ibv_qp* qp : {receivers[0], receivers[1], senders[0], senders[1]}) CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_destroy_srq(srq) == 0);
}

TEST_CASE("a vanished daemon: error completions, DEVICE_FATAL, EIO, never a hang", "[death]") {
    Device d;
    Pair p(d, IBV_QPT_RC);
    Buffer buf(d.pd, 4096);
    post_recv(p.b, buf, 0, 64, 1);
    post_recv(p.b, buf, 64, 64, 2);

    // SIGKILL the daemon this test's harness started (its PID file is in the test bed).
    std::ifstream pidfile(env("RNIC_TEST_DAEMON_PIDFILE"));
    pid_t pid = 0;
    REQUIRE(pidfile >> pid);
    REQUIRE(pid > 1);
    REQUIRE(kill(pid, SIGKILL) == 0);

    // The receives posted before the daemon died complete as flushed.
    auto wc = wait_for(p.cq, 2);
    REQUIRE(wc.size() == 2);
    for (const ibv_wc& w : wc) CHECK(w.status == IBV_WC_WR_FLUSH_ERR);

    ibv_async_event ev{};
    pollfd pfd{d.ctx->async_fd, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 5000) == 1);
    REQUIRE(ibv_get_async_event(d.ctx, &ev) == 0);
    CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL);
    ibv_ack_async_event(&ev);

    ibv_sge sge{buf.addr(), 8, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    CHECK(ibv_post_send(p.a, &wr, &bad) == EIO);
    CHECK(ibv_alloc_pd(d.ctx) == nullptr);
    CHECK(errno == EIO);
    ibv_port_attr port{};
    CHECK(ibv_query_port(d.ctx, 1, &port) == EIO);
    // Destroying still succeeds locally, so the application can clean up (the fixtures do).
}
