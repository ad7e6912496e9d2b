// IBTA 1.5 verbs through our libibverbs between two real rnicd (check_ibta15_verbs.py brings up
// the bed with both daemons in one socket directory, so this one process sees rnic0 and rnic1):
// IBV_WR_ATOMIC_WRITE by ibv_post_send and ibv_wr_atomic_write, IBV_WR_FLUSH by rnic_wr_flush
// (rnic/verbs_flush.h, the pointer rdma-core >= 45's ibv_wr_flush reads), the device caps, and
// the errors rxe gives. Every value is checked in the target's memory.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "rc_bring_up.hpp"
#include "two_devices.hpp"
#include "rnic/verbs_flush.h"

namespace {

using rnic::test::Device;
using rnic::test::gid0;
using rnic::test::wait_for;

constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC | RNIC_ACCESS_FLUSH_GLOBAL;

struct Buffer {
    std::vector<uint8_t> bytes;
    ibv_mr* mr = nullptr;
    Buffer(ibv_pd* pd, size_t size, int access = kRemoteAll) : bytes(size) {
        mr = ibv_reg_mr(pd, bytes.data(), size, access);
        REQUIRE(mr != nullptr);
    }
    ~Buffer() { ibv_dereg_mr(mr); }
    uint64_t addr(size_t offset = 0) { return reinterpret_cast<uintptr_t>(bytes.data() + offset); }
    uint64_t word(size_t offset) {
        uint64_t v;
        std::memcpy(&v, bytes.data() + offset, 8);
        return v;
    }
};

// An RC QP on each daemon, connected through the veth: `a` on rnic0 sends to `b` on rnic1.
struct Link {
    Device& da;
    Device& db;
    ibv_cq* cqa = nullptr;
    ibv_cq* cqb = nullptr;
    ibv_qp* a = nullptr;
    ibv_qp* b = nullptr;
    Link(Device& x, Device& y, int b_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                              IBV_ACCESS_REMOTE_READ | RNIC_ACCESS_FLUSH_GLOBAL)
        : da(x), db(y) {
        cqa = ibv_create_cq(da.ctx, 1024, nullptr, nullptr, 0);
        cqb = ibv_create_cq(db.ctx, 1024, nullptr, nullptr, 0);
        REQUIRE((cqa != nullptr && cqb != nullptr));
        a = make(da, cqa, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE | RNIC_QP_EX_WITH_FLUSH);
        b = make(db, cqb, IBV_QP_EX_WITH_RDMA_WRITE);
        bring_up(a, b->qp_num, gid0(db.ctx), kRemoteAll);
        bring_up(b, a->qp_num, gid0(da.ctx), b_access);
    }
    ~Link() {
        ibv_destroy_qp(a);
        ibv_destroy_qp(b);
        ibv_destroy_cq(cqa);
        ibv_destroy_cq(cqb);
    }
    static ibv_qp* make(Device& d, ibv_cq* cq, uint64_t send_ops) {
        ibv_qp_init_attr_ex attr{};
        attr.send_cq = cq;
        attr.recv_cq = cq;
        attr.qp_type = IBV_QPT_RC;
        attr.cap = {512, 16, 2, 2, 64};
        attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        attr.pd = d.pd;
        attr.send_ops_flags = send_ops;
        ibv_qp* qp = ibv_create_qp_ex(d.ctx, &attr);
        REQUIRE(qp != nullptr);
        return qp;
    }
    static void bring_up(ibv_qp* qp, uint32_t remote, ibv_gid dgid, int access) {
        rnic::test::bring_up_rc(qp, remote, dgid, access, 100);
    }
    ibv_qp_ex* ax() { return ibv_qp_to_qp_ex(a); }
};

ibv_wc one(ibv_cq* cq) {
    const auto wc = wait_for(cq, 1);
    if (wc.empty()) {
        ibv_wc none{};
        none.status = IBV_WC_GENERAL_ERR;
        return none;
    }
    return wc[0];
}

ibv_wc atomic_write_now(Link& l, uint64_t remote, uint32_t rkey, uint64_t value) {
    ibv_qp_ex* x = l.ax();
    ibv_wr_start(x);
    x->wr_id = 7;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, rkey, remote, &value);
    REQUIRE(ibv_wr_complete(x) == 0);
    return one(l.cqa);
}

ibv_wc flush_now(Link& l, uint64_t remote, uint32_t rkey, size_t len, uint8_t type = RNIC_FLUSH_GLOBAL,
                 uint8_t level = RNIC_FLUSH_RANGE) {
    ibv_qp_ex* x = l.ax();
    ibv_wr_start(x);
    x->wr_id = 9;
    x->wr_flags = IBV_SEND_SIGNALED;
    rnic_wr_flush(x, rkey, remote, len, type, level);
    REQUIRE(ibv_wr_complete(x) == 0);
    return one(l.cqa);
}

}  // namespace

TEST_CASE("device caps: ATOMIC_WRITE and FLUSH_GLOBAL, not FLUSH_PERSISTENT", "[ibta15]") {
    Device d(0);
    ibv_device_attr_ex attr{};
    REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &attr) == 0);
    CHECK((attr.device_cap_flags_ex & RNIC_DEVICE_ATOMIC_WRITE) != 0);
    CHECK((attr.device_cap_flags_ex & RNIC_DEVICE_FLUSH_GLOBAL) != 0);
    CHECK((attr.device_cap_flags_ex & RNIC_DEVICE_FLUSH_PERSISTENT) == 0);
    std::vector<uint8_t> buf(4096);
    errno = 0;
    CHECK(ibv_reg_mr(d.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | RNIC_ACCESS_FLUSH_PERSISTENT) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_mr* mr = ibv_reg_mr(d.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | RNIC_ACCESS_FLUSH_GLOBAL);
    CHECK(mr != nullptr);
    if (mr != nullptr) ibv_dereg_mr(mr);
}

TEST_CASE("ATOMIC_WRITE between two rnicd: by ibv_wr_atomic_write and ibv_post_send", "[ibta15]") {
    Device d0(0), d1(1);
    Link l(d0, d1);
    Buffer src(d0.pd, 4096), dst(d1.pd, 4096);

    auto wc = atomic_write_now(l, dst.addr(64), dst.mr->rkey, 0x0123456789ABCDEFull);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_ATOMIC_WRITE);
    CHECK(dst.word(64) == 0x0123456789ABCDEFull);

    const uint64_t v = 0xFEEDFACECAFEBEEFull;
    std::memcpy(src.bytes.data() + 16, &v, 8);
    ibv_sge sge{src.addr(16), 8, src.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 8;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = dst.addr(128);
    wr.wr.rdma.rkey = dst.mr->rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(l.a, &wr, &bad) == 0);
    wc = one(l.cqa);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_ATOMIC_WRITE);
    CHECK(dst.word(128) == v);
    sge.length = 4;  // not 8 bytes: refused at post
    CHECK(ibv_post_send(l.a, &wr, &bad) == EINVAL);
    CHECK(bad == &wr);
}

TEST_CASE("ATOMIC_WRITE lands as one word: a reader never sees a torn value", "[ibta15]") {
    Device d0(0), d1(1);
    Link l(d0, d1);
    Buffer dst(d1.pd, 4096);
    auto* word = reinterpret_cast<uint64_t*>(dst.bytes.data() + 256);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> torn{0}, reads{0};
    std::thread reader([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            const uint64_t v = std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire);
            // Every value written has eight equal bytes.
            if (v != (v & 0xFF) * 0x0101010101010101ull) torn.fetch_add(1);
            reads.fetch_add(1, std::memory_order_relaxed);
        }
    });
    constexpr int kWrites = 2000;
    ibv_qp_ex* x = l.ax();
    int done = 0;
    for (int i = 0; i < kWrites; i += 100) {
        ibv_wr_start(x);
        for (int j = i; j < i + 100; ++j) {
            x->wr_id = static_cast<uint64_t>(j);
            x->wr_flags = j + 1 == i + 100 ? IBV_SEND_SIGNALED : 0;
            const uint64_t v = static_cast<uint64_t>(j & 0xFF) * 0x0101010101010101ull;
            ibv_wr_atomic_write(x, dst.mr->rkey, dst.addr(256), &v);
        }
        REQUIRE(ibv_wr_complete(x) == 0);
        const auto wc = wait_for(l.cqa, 1);
        REQUIRE(wc.size() == 1);
        REQUIRE(wc[0].status == IBV_WC_SUCCESS);
        ++done;
    }
    stop = true;
    reader.join();
    CHECK(done == kWrites / 100);
    CHECK(torn.load() == 0);
    CHECK(reads.load() > 0);
    CHECK(dst.word(256) == static_cast<uint64_t>((kWrites - 1) & 0xFF) * 0x0101010101010101ull);
}

TEST_CASE("ATOMIC_WRITE errors are NAKed as rxe does, and the daemons stay up", "[ibta15]") {
    Device d0(0), d1(1);
    SECTION("misaligned: remote invalid request") {
        Link l(d0, d1);
        Buffer dst(d1.pd, 4096);
        CHECK(atomic_write_now(l, dst.addr(65), dst.mr->rkey, ~0ull).status == IBV_WC_REM_INV_REQ_ERR);
        for (uint8_t byte : dst.bytes) REQUIRE(byte == 0);
    }
    SECTION("region without REMOTE_WRITE: remote access error") {
        Link l(d0, d1);
        Buffer dst(d1.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        CHECK(atomic_write_now(l, dst.addr(64), dst.mr->rkey, ~0ull).status == IBV_WC_REM_ACCESS_ERR);
        for (uint8_t byte : dst.bytes) REQUIRE(byte == 0);
    }
    SECTION("QP without REMOTE_WRITE: remote invalid request") {
        Link l(d0, d1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        Buffer dst(d1.pd, 4096);
        CHECK(atomic_write_now(l, dst.addr(64), dst.mr->rkey, ~0ull).status == IBV_WC_REM_INV_REQ_ERR);
    }
    // Afterwards a fresh pair works: nothing above hurt either daemon.
    Link l(d0, d1);
    Buffer dst(d1.pd, 4096);
    CHECK(atomic_write_now(l, dst.addr(8), dst.mr->rkey, 42).status == IBV_WC_SUCCESS);
    CHECK(dst.word(8) == 42);
}

TEST_CASE("FLUSH between two rnicd: after the WRITEs before it, and its errors", "[ibta15]") {
    Device d0(0), d1(1);
    {
        Link l(d0, d1);
        Buffer src(d0.pd, 64 * 1024), dst(d1.pd, 64 * 1024);
        for (size_t i = 0; i < src.bytes.size(); ++i) src.bytes[i] = static_cast<uint8_t>(i * 7 + 3);
        ibv_qp_ex* x = l.ax();
        ibv_wr_start(x);
        for (int i = 0; i < 16; ++i) {
            x->wr_id = static_cast<uint64_t>(i);
            x->wr_flags = 0;
            ibv_wr_rdma_write(x, dst.mr->rkey, dst.addr(4096 * i));
            ibv_wr_set_sge(x, src.mr->lkey, src.addr(4096 * i), 4096);
        }
        x->wr_id = 100;
        x->wr_flags = IBV_SEND_SIGNALED;
        rnic_wr_flush(x, dst.mr->rkey, dst.addr(), dst.bytes.size(), RNIC_FLUSH_GLOBAL, RNIC_FLUSH_RANGE);
        REQUIRE(ibv_wr_complete(x) == 0);
        const ibv_wc wc = one(l.cqa);
        CHECK(wc.status == IBV_WC_SUCCESS);
        CHECK(wc.wr_id == 100);
        CHECK(wc.opcode == RNIC_WC_FLUSH);
        // The FLUSH completed, so every WRITE before it is in the target's memory.
        CHECK(std::memcmp(src.bytes.data(), dst.bytes.data(), src.bytes.size()) == 0);
        CHECK(flush_now(l, 0, dst.mr->rkey, 0, RNIC_FLUSH_GLOBAL, RNIC_FLUSH_MR).status == IBV_WC_SUCCESS);
    }
    SECTION("bad rkey") {
        Link l(d0, d1);
        Buffer dst(d1.pd, 4096);
        CHECK(flush_now(l, dst.addr(), dst.mr->rkey + 0x100, 64).status == IBV_WC_REM_ACCESS_ERR);
    }
    SECTION("region without FLUSH_GLOBAL") {
        Link l(d0, d1);
        Buffer dst(d1.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        CHECK(flush_now(l, dst.addr(), dst.mr->rkey, 64).status == IBV_WC_REM_ACCESS_ERR);
    }
    SECTION("range past the region") {
        Link l(d0, d1);
        Buffer dst(d1.pd, 4096);
        CHECK(flush_now(l, dst.addr(4000), dst.mr->rkey, 200).status == IBV_WC_REM_ACCESS_ERR);
    }
    SECTION("QP without FLUSH_GLOBAL") {
        Link l(d0, d1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        Buffer dst(d1.pd, 4096);
        CHECK(flush_now(l, dst.addr(), dst.mr->rkey, 64).status == IBV_WC_REM_INV_REQ_ERR);
    }
    SECTION("a QP created without the FLUSH send op refuses it") {
        ibv_cq* cq = ibv_create_cq(d0.ctx, 16, nullptr, nullptr, 0);
        ibv_qp* qp = Link::make(d0, cq, IBV_QP_EX_WITH_RDMA_WRITE);
        ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
        ibv_wr_start(x);
        rnic_wr_flush(x, 1, 0, 8, RNIC_FLUSH_GLOBAL, RNIC_FLUSH_RANGE);  // not among its send ops
        CHECK(ibv_wr_complete(x) == EINVAL);
        ibv_destroy_qp(qp);
        ibv_destroy_cq(cq);
    }
}
