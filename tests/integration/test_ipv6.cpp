// RoCEv2 over IPv6 between two rnicd through the client library: QPs whose paths use the IPv6
// GIDs (link-local and the --ip6 address) on both ends, the MAC found by neighbour discovery,
// RC SEND and RDMA WRITE with the data checked. check_host_integration.py verifies the capture.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "bed.hpp"

using namespace rnic::itest;

namespace {
constexpr size_t kMiB = 1 << 20;

std::string gid_text(const uint8_t* gid) {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, gid, buf, sizeof buf);
    return buf;
}
}  // namespace

TEST_CASE("Hello lists the IPv6 GIDs after the IPv4 one, all RoCE v2", "[ipv6]") {
    const auto env = bed_env();
    auto a = open_side(env.at("sock_a"), 4096);
    const auto& hello = a->conn->hello();
    REQUIRE(hello.gid_count == 3);
    CHECK(gid_text(hello.gids[0]) == "::ffff:" + env.at("ip_a"));
    CHECK(gid_text(hello.gids[1]).rfind("fe80::", 0) == 0);
    CHECK(gid_text(hello.gids[2]) == env.at("ip6_a"));
    for (int i = 0; i < 3; ++i) CHECK(hello.gid_types[i] == IBV_GID_TYPE_ROCE_V2);
}

TEST_CASE("RC SEND and RDMA WRITE over IPv6 GIDs on both ends, data checked", "[ipv6]") {
    const auto env = bed_env();
    const uint8_t gid_index = GENERATE(uint8_t{2}, uint8_t{1});
    const ibv_mtu mtu = GENERATE(IBV_MTU_1024, IBV_MTU_4096);
    INFO("gid index " << int{gid_index} << " mtu " << (128 << mtu));
    auto a = open_side(env.at("sock_a"), 2 * kMiB);
    auto b = open_side(env.at("sock_b"), 2 * kMiB);
    QpOptions o;
    o.mtu = mtu;
    o.gid_index = gid_index;
    const QpPair p = connect_pair(*a, *b, o);  // RTR waits for neighbour discovery on first use

    const auto qa = a->conn->query_qp(p.a, IBV_QP_AV);
    REQUIRE(qa.ok());
    CHECK(std::memcmp(qa->attr.ah_attr.dgid, b->conn->hello().gids[gid_index], 16) == 0);
    CHECK(qa->attr.ah_attr.sgid_index == gid_index);
    const auto mac_b = env.at("mac_b");
    char dmac[18];
    const uint8_t* m = qa->attr.ah_attr.dmac;
    std::snprintf(dmac, sizeof dmac, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    CHECK(dmac == mac_b);  // resolved through ND

    uint8_t* src = a->buf->data;
    uint8_t* dst = b->buf->data;
    const uint64_t dst_addr = reinterpret_cast<uintptr_t>(dst);
    uint32_t seed = 600 + gid_index;
    for (const uint32_t size : {1u, 1000u, 4097u, 65536u, 1u << 20}) {
        INFO("size " << size);
        fill_pattern(src, size, seed++);
        std::memset(dst, 0, size);
        REQUIRE(post_recv(*b, p.b, 7, dst, size) == 0);
        REQUIRE(post_send(*a, p.a, IBV_WR_SEND, 1, src, size) == 0);
        const auto send = wait_completions(*a, 1);
        const auto recv = wait_completions(*b, 1);
        REQUIRE(send.size() == 1);
        REQUIRE(recv.size() == 1);
        CHECK(send[0].status == IBV_WC_SUCCESS);
        CHECK(recv[0].status == IBV_WC_SUCCESS);
        CHECK(recv[0].byte_len == size);
        CHECK(std::memcmp(src, dst, size) == 0);

        fill_pattern(src, size, seed++);
        REQUIRE(post_send(*a, p.a, IBV_WR_RDMA_WRITE, 2, src, size, dst_addr, b->mr->rkey) == 0);
        const auto write = wait_completions(*a, 1);
        REQUIRE(write.size() == 1);
        CHECK(write[0].status == IBV_WC_SUCCESS);
        CHECK(write[0].opcode == IBV_WC_RDMA_WRITE);
        CHECK(std::memcmp(src, dst, size) == 0);
    }
    const auto c = counters(*a->conn);
    CHECK(c.at("nd_resolution_failures") == 0);
    CHECK(c.at("nd_resolved") >= 1);  // B's address learnt through ND (asked or told)
    CHECK(c.at("rx_bad_source") == 0);
}
