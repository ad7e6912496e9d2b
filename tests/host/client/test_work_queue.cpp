// WQE encoding, slot retirement and flushing against rings in plain memory.
#include <infiniband/verbs.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rnic/host/client/verbs_values.hpp"
#include "rnic/host/client/work_queue.hpp"

using namespace rnic::host;
using namespace rnic::host::client;

// The client's copy of rdma-core's values must be rdma-core's.
static_assert(verbs::kQptRc == IBV_QPT_RC && verbs::kQptUc == IBV_QPT_UC && verbs::kQptUd == IBV_QPT_UD);
static_assert(verbs::kQpsReset == IBV_QPS_RESET && verbs::kQpsErr == IBV_QPS_ERR && verbs::kQpState == IBV_QP_STATE);
static_assert(verbs::kWrRdmaWrite == IBV_WR_RDMA_WRITE && verbs::kWrRdmaWriteWithImm == IBV_WR_RDMA_WRITE_WITH_IMM &&
              verbs::kWrSend == IBV_WR_SEND && verbs::kWrSendWithImm == IBV_WR_SEND_WITH_IMM &&
              verbs::kWrRdmaRead == IBV_WR_RDMA_READ && verbs::kWrAtomicCmpAndSwp == IBV_WR_ATOMIC_CMP_AND_SWP &&
              verbs::kWrAtomicFetchAndAdd == IBV_WR_ATOMIC_FETCH_AND_ADD && verbs::kWrLocalInv == IBV_WR_LOCAL_INV &&
              verbs::kWrSendWithInv == IBV_WR_SEND_WITH_INV);
static_assert(verbs::kSendSignaled == IBV_SEND_SIGNALED && verbs::kSendInline == IBV_SEND_INLINE);
static_assert(verbs::kWcSuccess == IBV_WC_SUCCESS && verbs::kWcWrFlushErr == IBV_WC_WR_FLUSH_ERR);
static_assert(verbs::kWcSend == IBV_WC_SEND && verbs::kWcRdmaWrite == IBV_WC_RDMA_WRITE &&
              verbs::kWcRdmaRead == IBV_WC_RDMA_READ && verbs::kWcCompSwap == IBV_WC_COMP_SWAP &&
              verbs::kWcFetchAdd == IBV_WC_FETCH_ADD && verbs::kWcLocalInv == IBV_WC_LOCAL_INV &&
              verbs::kWcRecv == IBV_WC_RECV);
static_assert(verbs::kEventCqErr == IBV_EVENT_CQ_ERR && verbs::kEventQpFatal == IBV_EVENT_QP_FATAL &&
              verbs::kEventDeviceFatal == IBV_EVENT_DEVICE_FATAL && verbs::kEventSrqErr == IBV_EVENT_SRQ_ERR &&
              verbs::kEventSrqLimitReached == IBV_EVENT_SRQ_LIMIT_REACHED &&
              verbs::kEventQpLastWqeReached == IBV_EVENT_QP_LAST_WQE_REACHED &&
              verbs::kEventSqDrained == IBV_EVENT_SQ_DRAINED && verbs::kPortActive == IBV_PORT_ACTIVE);
static_assert(abi::kGidTypeRoceV2 == IBV_GID_TYPE_ROCE_V2);

namespace {

struct TestRing {
    void* mem;
    explicit TestRing(uint32_t size, uint32_t stride) {
        const size_t bytes = (abi::ring_bytes(size, stride) + 63) / 64 * 64;
        mem = std::aligned_alloc(64, bytes);
        std::memset(mem, 0, bytes);
        auto* h = static_cast<abi::RingHeader*>(mem);
        h->size = size;
        h->entry_size = stride;
        h->entries_offset = sizeof(abi::RingHeader);
    }
    ~TestRing() { std::free(mem); }
};

void setup(WorkQueue& q, const TestRing& r, uint32_t size, uint32_t stride, uint32_t max_wr, uint32_t max_sge,
           uint32_t max_inline) {
    q.ring = abi::RingView(r.mem, size, stride);
    q.max_wr = max_wr;
    q.max_sge = max_sge;
    q.max_inline = max_inline;
}

abi::SendWqe wqe_at(const WorkQueue& q, uint32_t i) {
    abi::SendWqe w;
    std::memcpy(&w, q.ring.entry(i), sizeof w);
    return w;
}

SendWr send(uint64_t id, uint8_t op, const abi::Sge* sges, uint32_t n, uint32_t flags = 0) {
    SendWr w{};
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = sges;
    w.num_sge = n;
    w.send_flags = flags;
    return w;
}

}  // namespace

TEST_CASE("send strides fit the header and the larger of the SGEs and the inline data") {
    STATIC_REQUIRE(abi::send_stride(1, 0) == 128);
    STATIC_REQUIRE(abi::send_stride(2, 0) == 128);
    STATIC_REQUIRE(abi::send_stride(3, 0) == 128);
    STATIC_REQUIRE(abi::send_stride(4, 0) == 256);
    STATIC_REQUIRE(abi::send_stride(1, 200) == 512);
    STATIC_REQUIRE(abi::recv_stride(1) == 32);
    STATIC_REQUIRE(abi::recv_stride(2) == 64);
    STATIC_REQUIRE(abi::recv_stride(4) == 128);
}

TEST_CASE("a send WQE carries the SGEs and the request's fields - slots follow the stride") {
    const uint32_t stride = abi::send_stride(2, 0);
    TestRing r(4, stride);
    WorkQueue sq;
    setup(sq, r, 4, stride, 4, 2, 0);
    const abi::Sge sges[2] = {{0x1000, 10, 7}, {0x2000, 20, 8}};
    SendWr w = send(55, verbs::kWrRdmaWrite, sges, 2, verbs::kSendSignaled);
    w.remote_addr = 0xABCD;
    w.rkey = 0x99;
    REQUIRE(encode_send(sq, verbs::kQptRc, w, 0) == 0);
    REQUIRE(encode_send(sq, verbs::kQptRc, send(56, verbs::kWrSend, sges, 1), 0) == 0);
    REQUIRE(sq.produced == 2);
    const abi::SendWqe a = wqe_at(sq, 0);
    REQUIRE(a.wr_id == 55);
    REQUIRE(a.opcode == verbs::kWrRdmaWrite);
    REQUIRE(a.num_sge == 2);
    REQUIRE(a.remote_addr == 0xABCD);
    REQUIRE(a.rkey == 0x99);
    REQUIRE(a.send_flags == verbs::kSendSignaled);
    abi::Sge got[2];
    std::memcpy(got, static_cast<uint8_t*>(sq.ring.entry(0)) + abi::kSendWqeHeader, sizeof got);
    REQUIRE(got[1].addr == 0x2000);
    REQUIRE(got[1].lkey == 8);
    REQUIRE(static_cast<uint8_t*>(sq.ring.entry(1)) - static_cast<uint8_t*>(sq.ring.entry(0)) == stride);
    REQUIRE(wqe_at(sq, 1).wr_id == 56);
    // Not published: that is the caller's doorbell.
    REQUIRE(sq.ring.header().producer.load() == 0);
}

TEST_CASE("IBV_SEND_INLINE gathers the bytes into the WQE") {
    const uint32_t stride = abi::send_stride(2, 64);
    TestRing r(4, stride);
    WorkQueue sq;
    setup(sq, r, 4, stride, 4, 2, 64);
    const char a[] = "hello ";
    const char b[] = "world";
    const abi::Sge sges[2] = {{reinterpret_cast<uintptr_t>(a), 6, 0}, {reinterpret_cast<uintptr_t>(b), 5, 0}};
    REQUIRE(encode_send(sq, verbs::kQptRc, send(1, verbs::kWrSend, sges, 2, verbs::kSendInline), 0) == 0);
    const abi::SendWqe w = wqe_at(sq, 0);
    REQUIRE(w.inline_length == 11);
    REQUIRE(w.num_sge == 0);
    REQUIRE(std::memcmp(static_cast<uint8_t*>(sq.ring.entry(0)) + abi::kSendWqeHeader, "hello world", 11) == 0);

    std::vector<char> big(65, 'x');
    const abi::Sge one{reinterpret_cast<uintptr_t>(big.data()), 65, 0};
    REQUIRE(encode_send(sq, verbs::kQptRc, send(2, verbs::kWrSend, &one, 1, verbs::kSendInline), 0) == EINVAL);
    const abi::Sge eight{reinterpret_cast<uintptr_t>(big.data()), 8, 0};
    REQUIRE(encode_send(sq, verbs::kQptRc, send(3, verbs::kWrRdmaRead, &eight, 1, verbs::kSendInline), 0) == EINVAL);
    REQUIRE(sq.produced == 1);
}

TEST_CASE("send WRs are checked as rdma-core providers check them") {
    const uint32_t stride = abi::send_stride(2, 0);
    TestRing r(4, stride);
    WorkQueue sq;
    setup(sq, r, 4, stride, 4, 2, 0);
    const abi::Sge sges[3] = {{0x1000, 8, 1}, {0x2000, 8, 1}, {0x3000, 8, 1}};
    REQUIRE(encode_send(sq, verbs::kQptRc, send(1, verbs::kWrSend, sges, 3), 0) == EINVAL);       // num_sge
    REQUIRE(encode_send(sq, verbs::kQptUd, send(1, verbs::kWrRdmaWrite, sges, 1), 5) == EINVAL);  // UD: sends only
    REQUIRE(encode_send(sq, verbs::kQptUc, send(1, verbs::kWrRdmaRead, sges, 1), 0) == EINVAL);   // UC: no READ
    REQUIRE(encode_send(sq, verbs::kQptUd, send(1, verbs::kWrSend, sges, 1), 0) == EINVAL);       // UD: no AH
    REQUIRE(encode_send(sq, verbs::kQptRc, send(1, 200, sges, 1), 0) == EINVAL);                  // unknown opcode
    SendWr cas = send(1, verbs::kWrAtomicCmpAndSwp, sges, 1);
    cas.remote_addr = 0x1004;  // not 8-aligned
    REQUIRE(encode_send(sq, verbs::kQptRc, cas, 0) == EINVAL);
    cas.remote_addr = 0x1008;
    REQUIRE(encode_send(sq, verbs::kQptRc, cas, 0) == 0);
    SendWr ud = send(2, verbs::kWrSendWithImm, sges, 1);
    ud.remote_qpn = 0x42;
    ud.remote_qkey = 0x1111;
    REQUIRE(encode_send(sq, verbs::kQptUd, ud, 9) == 0);
    REQUIRE(wqe_at(sq, 1).ah == 9);
    REQUIRE(wqe_at(sq, 1).remote_qpn == 0x42);
    REQUIRE(sq.produced == 2);
}

TEST_CASE("the SQ holds max_wr WQEs until completions retire them - a send CQE retires the unsignaled before it") {
    const uint32_t stride = abi::send_stride(1, 0);
    TestRing r(8, stride);  // the ring is larger than max_wr: the cap is what counts
    WorkQueue sq;
    setup(sq, r, 8, stride, 5, 1, 0);
    const abi::Sge sge{0x1000, 4, 1};
    for (uint64_t i = 0; i < 5; ++i) REQUIRE(encode_send(sq, verbs::kQptRc, send(i, verbs::kWrSend, &sge, 1), 0) == 0);
    REQUIRE(encode_send(sq, verbs::kQptRc, send(5, verbs::kWrSend, &sge, 1), 0) == ENOMEM);
    // The daemon consuming the WQEs frees nothing: the slots stay readable until completed.
    sq.ring.header().consumer.store(5);
    REQUIRE(encode_send(sq, verbs::kQptRc, send(5, verbs::kWrSend, &sge, 1), 0) == ENOMEM);
    retire(sq, 2);  // signaled WQE 2 completes: 0, 1 (unsignaled) and 2 are free
    REQUIRE(sq.retired.load() == 3);
    for (uint64_t i = 5; i < 8; ++i) REQUIRE(encode_send(sq, verbs::kQptRc, send(i, verbs::kWrSend, &sge, 1), 0) == 0);
    REQUIRE(encode_send(sq, verbs::kQptRc, send(8, verbs::kWrSend, &sge, 1), 0) == ENOMEM);
    retire(sq, 1);    // stale (already retired): ignored
    retire(sq, 100);  // never posted: ignored
    REQUIRE(sq.retired.load() == 3);
    retire(sq, 7);
    REQUIRE(sq.retired.load() == 8);
    REQUIRE(encode_send(sq, verbs::kQptRc, send(8, verbs::kWrSend, &sge, 1), 0) == 0);
    REQUIRE(wqe_at(sq, 8).wr_id == 8);  // index 8 wrapped to slot 0
}

TEST_CASE("the ring indices wrap around 2^32") {
    const uint32_t stride = abi::recv_stride(1);
    TestRing r(4, stride);
    WorkQueue rq;
    setup(rq, r, 4, stride, 4, 1, 0);
    rq.produced = 0xFFFFFFFE;
    rq.retired.store(0xFFFFFFFE);
    const abi::Sge sge{0x1000, 4, 1};
    for (uint64_t i = 0; i < 4; ++i) REQUIRE(encode_recv(rq, RecvWr{i, nullptr, &sge, 1}, false) == 0);
    REQUIRE(encode_recv(rq, RecvWr{9, nullptr, &sge, 1}, false) == ENOMEM);
    retire(rq, 0);  // index 0 is the third WQE (after ...FE and ...FF)
    REQUIRE(rq.retired.load() == 1);
    REQUIRE(encode_recv(rq, RecvWr{9, nullptr, &sge, 1}, false) == 0);
}

TEST_CASE("receive WQEs, and SRQ slots freed by the daemon's consumer index") {
    const uint32_t stride = abi::recv_stride(2);
    TestRing r(4, stride);
    WorkQueue srq;
    setup(srq, r, 4, stride, 3, 2, 0);
    const abi::Sge sges[3] = {{0x1000, 4, 1}, {0x2000, 4, 2}, {0x3000, 4, 3}};
    REQUIRE(encode_recv(srq, RecvWr{1, nullptr, sges, 3}, true) == EINVAL);
    for (uint64_t i = 0; i < 3; ++i) REQUIRE(encode_recv(srq, RecvWr{i, nullptr, sges, 2}, true) == 0);
    REQUIRE(encode_recv(srq, RecvWr{3, nullptr, sges, 2}, true) == ENOMEM);
    srq.ring.header().consumer.store(1);
    REQUIRE(encode_recv(srq, RecvWr{3, nullptr, sges, 2}, true) == 0);
    srq.ring.header().consumer.store(1000);  // a lying consumer makes the queue look full
    REQUIRE(encode_recv(srq, RecvWr{4, nullptr, sges, 2}, true) == ENOMEM);
    abi::RecvWqe w;
    std::memcpy(&w, srq.ring.entry(3), sizeof w);
    REQUIRE(w.wr_id == 3);
    REQUIRE(w.num_sge == 2);
    abi::Sge g;
    std::memcpy(&g, static_cast<uint8_t*>(srq.ring.entry(3)) + sizeof w + sizeof g, sizeof g);
    REQUIRE(g.lkey == 2);
}

TEST_CASE("flushing completes every posted WQE not yet retired, in order, with the WQE's opcode") {
    const uint32_t stride = abi::send_stride(1, 0);
    TestRing r(8, stride);
    WorkQueue sq;
    setup(sq, r, 8, stride, 8, 1, 0);
    const abi::Sge sge{0x1000, 8, 1};
    const uint8_t ops[5] = {verbs::kWrSend, verbs::kWrRdmaWrite, verbs::kWrRdmaRead, verbs::kWrAtomicFetchAndAdd,
                            verbs::kWrSendWithImm};
    for (uint64_t i = 0; i < 5; ++i) REQUIRE(encode_send(sq, verbs::kQptRc, send(100 + i, ops[i], &sge, 1), 0) == 0);
    retire(sq, 0);
    abi::Cqe out[8];
    REQUIRE(flush(sq, true, 0x11, out, 2) == 2);  // a short poll: the rest stays for the next one
    REQUIRE(out[0].wr_id == 101);
    REQUIRE(out[0].status == verbs::kWcWrFlushErr);
    REQUIRE(out[0].opcode == verbs::kWcRdmaWrite);
    REQUIRE(out[0].qp_num == 0x11);
    REQUIRE(out[1].opcode == verbs::kWcRdmaRead);
    REQUIRE(flush(sq, true, 0x11, out, 8) == 2);
    REQUIRE(out[0].wr_id == 103);
    REQUIRE(out[0].opcode == verbs::kWcFetchAdd);
    REQUIRE(out[1].opcode == verbs::kWcSend);
    REQUIRE(flush(sq, true, 0x11, out, 8) == 0);

    TestRing rr(4, abi::recv_stride(1));
    WorkQueue rq;
    setup(rq, rr, 4, abi::recv_stride(1), 4, 1, 0);
    REQUIRE(encode_recv(rq, RecvWr{7, nullptr, &sge, 1}, false) == 0);
    REQUIRE(flush(rq, false, 0x11, out, 8) == 1);
    REQUIRE(out[0].wr_id == 7);
    REQUIRE(out[0].opcode == verbs::kWcRecv);
}
