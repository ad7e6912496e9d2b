// RC, UD and atomics between two rnicd on the test bed through the client library, data checked
// byte for byte. The driver (check_host_integration.py) brings the bed up and runs the tags.
#include <arpa/inet.h>

#include <catch2/catch.hpp>

#include <cstring>

#include "bed.hpp"

using namespace rnic::itest;

namespace {

constexpr size_t kMiB = 1 << 20;

const Cqe& only(const std::vector<Cqe>& v) {
    REQUIRE(v.size() == 1);
    return v[0];
}

void expect_success(const std::vector<Cqe>& v, size_t n) {
    REQUIRE(v.size() == n);
    for (const Cqe& c : v) {
        INFO("wr_id " << c.wr_id << " status " << c.status << " opcode " << c.opcode);
        CHECK(c.status == IBV_WC_SUCCESS);
    }
}

}  // namespace

TEST_CASE("RC SEND, WRITE, WRITE_WITH_IMM and READ from 1 B to 1 MiB, data checked", "[rc]") {
    const auto env = bed_env();
    const ibv_mtu mtu = GENERATE(IBV_MTU_1024, IBV_MTU_4096);
    auto a = open_side(env.at("sock_a"), 4 * kMiB);
    auto b = open_side(env.at("sock_b"), 4 * kMiB);
    QpOptions o;
    o.mtu = mtu;
    const QpPair p = connect_pair(*a, *b, o);
    uint8_t* src = a->buf->data;               // A: [0, 1 MiB) source
    uint8_t* a_sink = a->buf->data + 2 * kMiB; // A: READ lands here
    uint8_t* dst = b->buf->data;               // B: [0, 1 MiB) target
    const uint64_t dst_addr = reinterpret_cast<uintptr_t>(dst);

    uint32_t seed = 1;
    for (const uint32_t size : {1u, 63u, 1024u, 4097u, 65536u, 1u << 20}) {
        INFO("mtu " << (128 << mtu) << " size " << size);
        // SEND -> RECV
        fill_pattern(src, size, seed++);
        std::memset(dst, 0, size);
        REQUIRE(post_recv(*b, p.b, 7, dst, size) == 0);
        REQUIRE(post_send(*a, p.a, IBV_WR_SEND, 1, src, size) == 0);
        const Cqe send = only(wait_completions(*a, 1));
        const Cqe recv = only(wait_completions(*b, 1));
        CHECK(send.status == IBV_WC_SUCCESS);
        CHECK(send.opcode == IBV_WC_SEND);
        CHECK(send.wr_id == 1);
        CHECK(recv.status == IBV_WC_SUCCESS);
        CHECK(recv.opcode == IBV_WC_RECV);
        CHECK(recv.wr_id == 7);
        CHECK(recv.byte_len == size);
        CHECK(std::memcmp(src, dst, size) == 0);

        // RDMA WRITE
        fill_pattern(src, size, seed++);
        REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE, 2, src, size, dst_addr, b->mr->rkey) == 0);
        const Cqe write = only(wait_completions(*a, 1));
        CHECK(write.status == IBV_WC_SUCCESS);
        CHECK(write.opcode == IBV_WC_RDMA_WRITE);
        CHECK(std::memcmp(src, dst, size) == 0);

        // RDMA WRITE with immediate: consumes a RECV, which carries the immediate
        fill_pattern(src, size, seed++);
        REQUIRE(post_recv(*b, p.b, 8, nullptr, 0) == 0);
        REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE_WITH_IMM, 3, src, size, dst_addr, b->mr->rkey, htonl(0xC0FFEE)) ==
                0);
        CHECK(only(wait_completions(*a, 1)).status == IBV_WC_SUCCESS);
        const Cqe imm = only(wait_completions(*b, 1));
        CHECK(imm.status == IBV_WC_SUCCESS);
        CHECK(imm.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
        CHECK((imm.wc_flags & IBV_WC_WITH_IMM) != 0);
        CHECK(imm.imm_data == htonl(0xC0FFEE));
        CHECK(imm.byte_len == size);
        CHECK(std::memcmp(src, dst, size) == 0);

        // RDMA READ back what B holds
        std::memset(a_sink, 0, size);
        REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_READ, 4, a_sink, size, dst_addr, b->mr->rkey) == 0);
        const Cqe read = only(wait_completions(*a, 1));
        CHECK(read.status == IBV_WC_SUCCESS);
        CHECK(read.opcode == IBV_WC_RDMA_READ);
        CHECK(read.byte_len == size);
        CHECK(std::memcmp(a_sink, dst, size) == 0);
    }
}

TEST_CASE("RC atomics: compare-and-swap and fetch-and-add, each applied once", "[rc]") {
    const auto env = bed_env();
    auto a = open_side(env.at("sock_a"), 64 * 1024);
    auto b = open_side(env.at("sock_b"), 64 * 1024);
    const QpPair p = connect_pair(*a, *b, QpOptions{});
    auto* word = reinterpret_cast<uint64_t*>(b->buf->data + 4096);
    *word = 0x1000;
    const uint64_t word_addr = reinterpret_cast<uintptr_t>(word);
    auto* old = reinterpret_cast<uint64_t*>(a->buf->data);

    for (int i = 0; i < 100; ++i) {
        REQUIRE(post_send(*a, p.a, IBV_WR_ATOMIC_FETCH_AND_ADD, i, a->buf->data + 8 * i, 8, word_addr, b->mr->rkey,
                          0, 3) == 0);
    }
    expect_success(wait_completions(*a, 100), 100);
    CHECK(*word == 0x1000 + 300);
    for (int i = 0; i < 100; ++i) CHECK(old[i] == 0x1000 + 3u * i);

    // A CAS that matches swaps; one that does not leaves the word and returns it.
    REQUIRE(post_send(*a, p.a, IBV_WR_ATOMIC_CMP_AND_SWP, 200, a->buf->data, 8, word_addr, b->mr->rkey, 0,
                      0x1000 + 300, 0xABCDEF) == 0);
    const Cqe cas = only(wait_completions(*a, 1));
    CHECK(cas.status == IBV_WC_SUCCESS);
    CHECK(cas.opcode == IBV_WC_COMP_SWAP);
    CHECK(old[0] == 0x1000 + 300);
    CHECK(*word == 0xABCDEF);
    REQUIRE(post_send(*a, p.a, IBV_WR_ATOMIC_CMP_AND_SWP, 201, a->buf->data, 8, word_addr, b->mr->rkey, 0, 1, 2) == 0);
    CHECK(only(wait_completions(*a, 1)).status == IBV_WC_SUCCESS);
    CHECK(old[0] == 0xABCDEF);
    CHECK(*word == 0xABCDEF);
}

TEST_CASE("UD SEND up to the MTU, GRH in front of the data", "[ud]") {
    const auto env = bed_env();
    auto a = open_side(env.at("sock_a"), 64 * 1024);
    auto b = open_side(env.at("sock_b"), 64 * 1024);
    QpOptions o;
    o.type = IBV_QPT_UD;
    auto* qa = create_qp(*a, o);
    auto* qb = create_qp(*b, o);
    bring_up(*a, qa, 0, {}, o);
    bring_up(*b, qb, 0, {}, o);
    auto ah = a->conn->create_ah(a->pd, b->self_av);
    INFO("create_ah errno " << ah.error());
    REQUIRE(ah.ok());
    const auto port = b->conn->query_port(1);
    REQUIRE(port.ok());
    const uint32_t mtu_bytes = 128u << port->active_mtu;

    uint32_t seed = 99;
    for (const uint32_t size : {1u, 100u, 1024u, mtu_bytes}) {
        INFO("size " << size);
        uint8_t* src = a->buf->data;
        uint8_t* dst = b->buf->data;
        fill_pattern(src, size, seed++);
        std::memset(dst, 0, 40 + size);
        REQUIRE(post_recv(*b, qb, 5, dst, 40 + size) == 0);
        rnic::host::abi::Sge sge{reinterpret_cast<uintptr_t>(src), size, a->mr->lkey};
        rnic::host::client::SendWr wr{};
        wr.wr_id = 9;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.ah = *ah;
        wr.remote_qpn = qb->qpn;
        wr.remote_qkey = o.qkey;
        const rnic::host::client::SendWr* bad = nullptr;
        REQUIRE(a->conn->post_send(qa, &wr, &bad) == 0);
        CHECK(only(wait_completions(*a, 1)).status == IBV_WC_SUCCESS);
        const Cqe recv = only(wait_completions(*b, 1));
        CHECK(recv.status == IBV_WC_SUCCESS);
        CHECK(recv.byte_len == 40 + size);
        CHECK(recv.src_qp == qa->qpn);
        CHECK((recv.wc_flags & IBV_WC_GRH) != 0);
        CHECK(std::memcmp(src, dst + 40, size) == 0);
    }
    REQUIRE(a->conn->destroy_ah(*ah) == 0);
}
