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
    // An atomic is one packet at any MTU, but the completer handles it on the READ paths,
    // which divide by the path MTU (implied NAKs, where a retry resumes): run both MTUs the
    // other operations run at.
    const ibv_mtu mtu = GENERATE(IBV_MTU_1024, IBV_MTU_4096);
    INFO("mtu " << (128 << mtu));
    auto a = open_side(env.at("sock_a"), 64 * 1024);
    auto b = open_side(env.at("sock_b"), 64 * 1024);
    QpOptions o;
    o.mtu = mtu;
    const QpPair p = connect_pair(*a, *b, o);
    const auto qa = a->conn->query_qp(p.a, IBV_QP_PATH_MTU);
    REQUIRE(qa.ok());
    REQUIRE(qa->attr.path_mtu == static_cast<uint32_t>(mtu));
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
        REQUIRE(post_ud_send(*a, qa, *ah, qb->qpn, o.qkey, 9, src, size) == 0);
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

TEST_CASE("RC with a traffic class in the GRH: the IP header carries it, other QPs keep 0", "[tos]") {
    // DSCP 46 (expedited forwarding) and ECN 0b10 (ECT(0)): both halves of the byte are set, so a
    // daemon that kept only the DSCP or only the ECN bits shows in the capture.
    constexpr uint8_t kTrafficClass = 46 << 2 | 0b10;
    const auto env = bed_env();
    const uint8_t gid_index = GENERATE(uint8_t{0}, uint8_t{2});
    const bool v6 = gid_index != 0;
    INFO("gid index " << int{gid_index});
    auto a = open_side(env.at("sock_a"), 8 * kMiB);
    auto b = open_side(env.at("sock_b"), 8 * kMiB);
    QpOptions o;
    o.mtu = IBV_MTU_4096;
    o.gid_index = gid_index;
    o.traffic_class = kTrafficClass;
    const QpPair marked = connect_pair(*a, *b, o);
    o.traffic_class = 0;
    const QpPair plain = connect_pair(*a, *b, o);

    const auto qa = a->conn->query_qp(marked.a, IBV_QP_AV);
    REQUIRE(qa.ok());
    CHECK(qa->attr.ah_attr.traffic_class == kTrafficClass);

    // Every kind of frame in both directions: SEND, WRITE and READ requests, READ responses,
    // ACKs and an atomic acknowledgement, on the marked pair and on the plain one side by side.
    uint32_t seed = 900 + gid_index;
    int pair_index = 0;
    for (const QpPair* p : {&marked, &plain}) {
        const size_t off = pair_index++ * 4 * kMiB;
        uint8_t* src = a->buf->data + off;
        uint8_t* sink = a->buf->data + off + kMiB;
        uint8_t* dst = b->buf->data + off;
        const uint64_t dst_addr = reinterpret_cast<uintptr_t>(dst);
        constexpr uint32_t size = 65536;
        fill_pattern(src, size, seed++);
        REQUIRE(post_recv(*b, p->b, 1, dst, size) == 0);
        REQUIRE(post_send(*a, p->a, IBV_WR_SEND, 2, src, size) == 0);
        expect_success(wait_completions(*a, 1), 1);
        expect_success(wait_completions(*b, 1), 1);
        CHECK(std::memcmp(src, dst, size) == 0);
        fill_pattern(src, size, seed++);
        REQUIRE(post_send(*a, p->a, IBV_WR_RDMA_WRITE, 3, src, size, dst_addr, b->mr->rkey) == 0);
        REQUIRE(post_send(*a, p->a, IBV_WR_RDMA_READ, 4, sink, size, dst_addr, b->mr->rkey) == 0);
        auto* word = reinterpret_cast<uint64_t*>(dst + 2 * kMiB);
        *word = 40;
        REQUIRE(post_send(*a, p->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, sink + size, 8,
                          reinterpret_cast<uintptr_t>(word), b->mr->rkey, 0, 2) == 0);
        expect_success(wait_completions(*a, 3), 3);
        CHECK(std::memcmp(src, dst, size) == 0);
        CHECK(std::memcmp(src, sink, size) == 0);
        CHECK(*word == 42);
    }

    // The driver finds these flows in both captures by destination address and QP: frames to B
    // are addressed to the B-side QP, frames to A to the A-side one.
    const std::string ip_a = env.at(v6 ? "ip6_a" : "ip_a"), ip_b = env.at(v6 ? "ip6_b" : "ip_b");
    for (const auto& [p, tc] : {std::pair{&marked, kTrafficClass}, std::pair{&plain, uint8_t{0}}}) {
        record_fact(R"({"kind": "tos", "ip_version": )" + std::to_string(v6 ? 6 : 4) + R"(, "tc": )" +
                    std::to_string(tc) + R"(, "flows": [[")" + ip_b + R"(", )" + std::to_string(p->b->qpn) +
                    R"(], [")" + ip_a + R"(", )" + std::to_string(p->a->qpn) + "]]}");
    }
}

TEST_CASE("Active MTU 1024 (1500-byte link): UD up to 1024 bytes, nothing larger, RC paths capped", "[mtu1024]") {
    // Run on a bed brought up with RNIC_TESTBED_MTU=1500; [ud] runs there too and sends its
    // largest message at this MTU.
    const auto env = bed_env();
    auto a = open_side(env.at("sock_a"), 64 * 1024);
    auto b = open_side(env.at("sock_b"), 64 * 1024);
    for (Side* s : {a.get(), b.get()}) {
        const auto port = s->conn->query_port(1);
        REQUIRE(port.ok());
        REQUIRE(port->active_mtu == IBV_MTU_1024);
    }

    // An RC path above the active MTU is refused at RTR, as rdma-core's providers refuse it.
    QpOptions big;
    big.mtu = IBV_MTU_4096;
    auto* q = create_qp(*a, big);
    rnic::host::abi::QpAttr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    REQUIRE(a->conn->modify_qp(q, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_4096;
    attr.dest_qp_num = 1;
    attr.rq_psn = 0;
    attr.ah_attr = peer_av(*b, 0);
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 1;
    CHECK(a->conn->modify_qp(q, attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == EINVAL);
    REQUIRE(a->conn->destroy_qp(q) == 0);

    // RC at 1024 moves data over the 1500-byte link.
    const QpPair p = connect_pair(*a, *b, QpOptions{});
    fill_pattern(a->buf->data, 20000, 5);
    REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE, 1, a->buf->data, 20000, reinterpret_cast<uintptr_t>(b->buf->data),
                      b->mr->rkey) == 0);
    expect_success(wait_completions(*a, 1), 1);
    CHECK(std::memcmp(a->buf->data, b->buf->data, 20000) == 0);

    // UD: 1024 bytes arrive, 1025 are refused locally and never reach the wire.
    QpOptions ud;
    ud.type = IBV_QPT_UD;
    auto* qa = create_qp(*a, ud);
    auto* qb = create_qp(*b, ud);
    bring_up(*a, qa, 0, {}, ud);
    bring_up(*b, qb, 0, {}, ud);
    auto ah = a->conn->create_ah(a->pd, b->self_av);
    REQUIRE(ah.ok());
    const auto send_ud = [&](uint64_t wr_id, uint32_t size) {
        return post_ud_send(*a, qa, *ah, qb->qpn, ud.qkey, wr_id, a->buf->data, size);
    };
    uint8_t* dst = b->buf->data + 32768;
    fill_pattern(a->buf->data, 1025, 6);
    REQUIRE(post_recv(*b, qb, 10, dst, 40 + 2048) == 0);
    REQUIRE(send_ud(11, 1024) == 0);
    const Cqe sent = only(wait_completions(*a, 1));
    CHECK(sent.status == IBV_WC_SUCCESS);
    const Cqe got = only(wait_completions(*b, 1));
    CHECK(got.status == IBV_WC_SUCCESS);
    CHECK(got.byte_len == 40 + 1024);
    CHECK(std::memcmp(a->buf->data, dst + 40, 1024) == 0);

    const auto before = counters(*b->conn);
    REQUIRE(post_recv(*b, qb, 12, dst, 40 + 2048) == 0);
    REQUIRE(send_ud(13, 1025) == 0);
    const Cqe refused = only(wait_completions(*a, 1));
    CHECK(refused.wr_id == 13);
    CHECK(refused.status == IBV_WC_LOC_QP_OP_ERR);
    // Nothing may arrive: the receive stays posted (a bounded look, the send is long over).
    CHECK(wait_completions(*b, 1, std::chrono::milliseconds(200)).empty());
    CHECK(counters(*b->conn).at("rx_frames") == before.at("rx_frames"));
    REQUIRE(a->conn->destroy_ah(*ah) == 0);
}
