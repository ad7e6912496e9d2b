// A hostile client of on-demand regions (run by check_odp_hostile.py, as root): ODP regions over
// memory registered with a userfaultfd this process never serves, so every page fault on it
// waits forever. On rnic1 a peer's RDMA WRITE lands there; on rnic0 a SEND gathers its payload
// from there. The daemons' copies block in their ODP workers, not on their poll threads: each
// QP must end in error within the time bound (the WRITE's requester sees a remote access error,
// the SEND a local protection error), while the checker runs ibv_rc_pingpong and rnicctl on the
// same daemons. Then the process holds (its stuck workers alive) until the file named by
// $ODP_HOSTILE_HOLD is gone, so the checker can see them reclaimed when it exits.
#define CATCH_CONFIG_MAIN
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "rc_bring_up.hpp"
#include "two_devices.hpp"

using namespace rnic::test;

namespace {

constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Anonymous pages whose missing-page faults go to a userfaultfd nobody reads.
struct NeverServed {
    int uffd = -1;
    Pages pages{64 * 1024};
    NeverServed() {
        uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        REQUIRE(uffd >= 0);
        uffdio_api api{};
        api.api = UFFD_API;
        REQUIRE(ioctl(uffd, UFFDIO_API, &api) == 0);
        uffdio_register reg{};
        reg.range.start = pages.addr();
        reg.range.len = pages.size;
        reg.mode = UFFDIO_REGISTER_MODE_MISSING;
        REQUIRE(ioctl(uffd, UFFDIO_REGISTER, &reg) == 0);
    }
};

struct Pair {
    ibv_cq* cq_a;
    ibv_cq* cq_b;
    ibv_qp* qp_a;
    ibv_qp* qp_b;
    Pair(Device& a, Device& b) {
        cq_a = ibv_create_cq(a.ctx, 16, nullptr, nullptr, 0);
        cq_b = ibv_create_cq(b.ctx, 16, nullptr, nullptr, 0);
        REQUIRE((cq_a && cq_b));
        ibv_qp_init_attr init{};
        init.qp_type = IBV_QPT_RC;
        init.cap = {8, 8, 1, 1, 0};
        init.send_cq = init.recv_cq = cq_a;
        qp_a = ibv_create_qp(a.pd, &init);
        init.send_cq = init.recv_cq = cq_b;
        qp_b = ibv_create_qp(b.pd, &init);
        REQUIRE((qp_a && qp_b));
        bring_up_rc(qp_a, qp_b->qp_num, gid0(b.ctx), kRemoteAll, 100);
        bring_up_rc(qp_b, qp_a->qp_num, gid0(a.ctx), kRemoteAll, 100);
    }
};

}  // namespace

TEST_CASE("a client whose ODP pages never fault in stalls only itself", "[odp][hostile]") {
    // A kernel without userfaultfd, or one that refuses it here (seccomp): nothing to test.
    const int probe = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
    if (probe < 0) {
        std::printf("NO-UFFD: userfaultfd unavailable (%s)\n", std::strerror(errno));
        return;
    }
    close(probe);
    // Left for the exit to reclaim (no munmap of the trap, no deregistration): the daemons must
    // release what a vanished client leaves, stuck workers included.
    Device& d0 = *new Device(0);
    Device& d1 = *new Device(1);
    NeverServed& trap = *new NeverServed;
    Pages& plain = *new Pages(64 * 1024);
    ibv_mr* plain0 = ibv_reg_mr(d0.pd, plain.p, plain.size, kRemoteAll);
    REQUIRE(plain0 != nullptr);
    // rnic1's worker: a WRITE from rnic0 into the trap.
    ibv_mr* trap1 = ibv_reg_mr(d1.pd, trap.pages.p, trap.pages.size, kRemoteAll | IBV_ACCESS_ON_DEMAND);
    REQUIRE(trap1 != nullptr);
    // rnic0's worker: a SEND gathering from the trap.
    ibv_mr* trap0 = ibv_reg_mr(d0.pd, trap.pages.p, trap.pages.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
    REQUIRE(trap0 != nullptr);
    Pair& w = *new Pair(d0, d1);
    Pair& s = *new Pair(d0, d1);

    ibv_sge sge{plain.addr(), 4096, plain0->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = trap.pages.addr(8192);
    wr.wr.rdma.rkey = trap1->rkey;
    REQUIRE(ibv_post_send(w.qp_a, &wr, &bad) == 0);

    ibv_recv_wr rwr{};
    ibv_recv_wr* rbad = nullptr;
    ibv_sge rsge{plain.addr(32768), 4096, plain0->lkey};
    rwr.wr_id = 3;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    // The receiver is on rnic1 with ordinary memory: register some there.
    ibv_mr* plain1 = ibv_reg_mr(d1.pd, plain.p + 32768, 32768, kRemoteAll);
    REQUIRE(plain1 != nullptr);
    rsge.lkey = plain1->lkey;
    REQUIRE(ibv_post_recv(s.qp_b, &rwr, &rbad) == 0);
    ibv_sge gsge{trap.pages.addr(100), 2000, trap0->lkey};
    wr = {};
    wr.wr_id = 2;
    wr.sg_list = &gsge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(ibv_post_send(s.qp_a, &wr, &bad) == 0);
    const auto posted = std::chrono::steady_clock::now();
    std::printf("STALLED\n");
    std::fflush(stdout);

    // Within the daemons' bound (2 s by default) plus slack, both end in error.
    auto wc_w = wait_for(w.cq_a, 1, 15);
    REQUIRE(wc_w.size() == 1);
    CHECK(wc_w[0].wr_id == 1);
    CHECK(wc_w[0].status == IBV_WC_REM_ACCESS_ERR);
    auto wc_s = wait_for(s.cq_a, 1, 15);
    REQUIRE(wc_s.size() == 1);
    CHECK(wc_s[0].wr_id == 2);
    CHECK(wc_s[0].status == IBV_WC_LOC_PROT_ERR);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count();
    std::printf("ERRORS after %.2f s: WRITE %s, SEND %s\n", took, ibv_wc_status_str(wc_w[0].status),
                ibv_wc_status_str(wc_s[0].status));
    CHECK(took < 10.0);
    std::fflush(stdout);

    if (const char* hold = std::getenv("ODP_HOSTILE_HOLD")) {
        std::printf("HOLDING\n");
        std::fflush(stdout);
        for (int i = 0; i < 600 && access(hold, F_OK) == 0; ++i) usleep(100'000);
    }
}
