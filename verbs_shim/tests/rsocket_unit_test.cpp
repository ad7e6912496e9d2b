// rsockets without rnicd: our encoding of the protocol against rdma-core's own bytes (rxe's
// capture of `rstream -S 4000 -C 5`, parsed with our wire library: the connection data in the
// REQ and REP, every RDMA WRITE's immediate, address and key, the credits' SGEs), and the
// calls' answers where no daemon is needed (unknown sockets, unsupported types, no device,
// rpoll/rselect over ordinary descriptors). Linked with the library's own objects;
// $RNIC_RUN_DIR is an empty directory, so no daemon of this machine is seen.
#define CATCH_CONFIG_RUNNER
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "pcap_file.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/gsi_frame.hpp"
#include "rnic/wire/opcode.hpp"
#include "rnic/wire/parser.hpp"
#include "rnic/wire/rdma_cm_header.hpp"
#include "rsocket.hpp"

using namespace rnic::rdmacm::rsock;
namespace wire = rnic::wire;

namespace {

// One RDMA WRITE message as the capture shows it: the RETH of its first packet, the immediate
// of its last, the payload of all.
struct Write {
    uint32_t src_ip = 0;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;
    bool has_imm = false;
    uint32_t imm = 0;
    std::vector<uint8_t> payload;
};

struct Golden {
    std::vector<uint8_t> req_data;  // the REQ's private data after the rdma_cm header
    std::vector<uint8_t> rep_data;
    uint32_t client_ip = 0;
    uint32_t server_ip = 0;
    std::vector<Write> writes;  // in capture order of their last packets
};

Golden load_golden() {
    Golden g;
    std::map<uint32_t, Write> open;  // per sender
    for (const auto& f :
         rnic::tools::read_all_frames(std::string(RNIC_GOLDEN_DIR) + "/rxe_write_imm_rstream_mtu1024_s4000.pcap")) {
        const auto frame = wire::parse_frame(f.bytes);
        REQUIRE(frame);
        const uint32_t src = frame->ipv4.src;
        if (frame->bth.dest_qp == wire::kGsiQpn) {
            const auto mad = wire::gsi_mad(*frame);
            REQUIRE(mad);
            const auto msg = wire::decode_cm(*mad);
            REQUIRE(msg);
            if (const auto* req = std::get_if<wire::CmReq>(&*msg)) {
                const auto user = wire::rdma_cm_user_data(req->private_data);
                g.req_data.assign(user.begin(), user.end());
                g.client_ip = src;
            } else if (const auto* rep = std::get_if<wire::CmRep>(&*msg)) {
                g.rep_data.assign(rep->private_data.begin(), rep->private_data.end());
                g.server_ip = src;
            }
            continue;
        }
        const uint8_t op = frame->bth.opcode;
        if (op == wire::op::kRcWriteFirst || op == wire::op::kRcWriteOnly || op == wire::op::kRcWriteOnlyImm) {
            REQUIRE(frame->ext.reth);
            Write w;
            w.src_ip = src;
            w.va = frame->ext.reth->va;
            w.rkey = frame->ext.reth->rkey;
            w.length = frame->ext.reth->dma_length;
            open[src] = w;
        }
        if (op >= wire::op::kRcWriteFirst && op <= wire::op::kRcWriteOnlyImm) {
            Write& w = open.at(src);
            w.payload.insert(w.payload.end(), frame->payload.begin(), frame->payload.end());
            if (frame->ext.immdt) {
                w.has_imm = true;
                w.imm = frame->ext.immdt->value;
            }
            if (op == wire::op::kRcWriteLast || op == wire::op::kRcWriteLastImm || op == wire::op::kRcWriteOnly ||
                op == wire::op::kRcWriteOnlyImm) {
                g.writes.push_back(w);
                open.erase(src);
            }
        }
    }
    return g;
}

WireSge sge_in_host_order(const std::vector<uint8_t>& bytes) {
    WireSge s{};
    REQUIRE(bytes.size() == sizeof s);
    std::memcpy(&s, bytes.data(), sizeof s);
    return s;
}

struct Failure {
    long ret;
    int error;
    bool operator==(const Failure&) const = default;
};

template <typename F>
Failure failure(F f) {
    errno = 0;
    const long ret = static_cast<long>(f());
    return Failure{ret, errno};
}

}  // namespace

TEST_CASE("immediates: op in the top three bits, its argument below") {
    CHECK(make_imm(Op::Sgl, 0 + 384) == 0x80000180u);
    CHECK(make_imm(Op::Data, 16) == 0x00000010u);
    CHECK(make_imm(Op::Data, 2048) == 0x00000800u);
    CHECK(make_imm(Op::Ctrl, static_cast<uint32_t>(Ctrl::Disconnect)) == 0xE0000000u);
    CHECK(make_imm(Op::Ctrl, static_cast<uint32_t>(Ctrl::Shutdown)) == 0xE0000002u);
    CHECK(make_imm(Op::IomapSgl, 3) == 0xC0000003u);
    CHECK(imm_op(0x80000180u) == Op::Sgl);
    CHECK(imm_arg(0x80000180u) == 384);
    CHECK(imm_op(0xE0000001u) == Op::Ctrl);
    CHECK(imm_arg(0xFFFFFFFFu) == 0x1FFFFFFFu);
    // The credit's sequence number is sent unwrapped (rseq_no + rq_size) and read as 16 bits.
    CHECK(imm_arg(make_imm(Op::Sgl, 65500u + 384u)) == 65884u);
    CHECK(static_cast<uint16_t>(imm_arg(make_imm(Op::Sgl, 65500u + 384u))) == 348);
}

TEST_CASE("sequence numbers compare across the 16-bit wrap") {
    CHECK(seq_reached(192, 192));
    CHECK(seq_reached(193, 192));
    CHECK_FALSE(seq_reached(191, 192));
    CHECK(seq_reached(5, 65530));
    CHECK_FALSE(seq_reached(65530, 5));
}

TEST_CASE("iomap sizes: rdma-core's one-byte scale") {
    CHECK(value_to_scale(0, 8) == 0);
    CHECK(value_to_scale(128, 8) == 128);
    CHECK(value_to_scale(129, 8) == 128);
    CHECK(scale_to_value(value_to_scale(129, 8), 8) == 128);  // rounds down to what the scale holds
    CHECK(value_to_scale(1024, 8) == (128 | 4));
    CHECK(scale_to_value(128 | 4, 8) == 1024);
    CHECK(scale_to_value(value_to_scale(5000, 8), 8) == 4864);
}

TEST_CASE("connection data: the golden REQ and REP decode and encode back to their bytes") {
    const Golden g = load_golden();
    REQUIRE(g.req_data.size() >= kConnDataSize);
    REQUIRE(g.rep_data.size() >= kConnDataSize);
    const auto rep = decode_conn_data(g.rep_data);
    REQUIRE(rep);
    CHECK(rep->version == kConnVersion);
    CHECK(rep->flags == kConnFlagIomap);  // little-endian host, iomaps supported
    CHECK(rep->credits == 384);           // rdma-core's default receive queue
    CHECK(rep->target_iomap_size == 0);
    CHECK(rep->target_sgl.addr == 0x7fb6fc003000u);
    CHECK(rep->target_sgl.key == 0x395u);
    CHECK(rep->target_sgl.length == kTargetSgeCount);
    CHECK(rep->data_buf.addr == 0x7fb703173000u);
    CHECK(rep->data_buf.key == 0x460u);
    CHECK(rep->data_buf.length == 0x80000u);  // half of rstream's 1 MiB ring (SO_RCVBUF 512 KiB)
    const auto req = decode_conn_data(g.req_data);
    REQUIRE(req);
    CHECK(req->version == kConnVersion);
    CHECK(req->credits == 384);
    CHECK(req->target_sgl.length == kTargetSgeCount);
    CHECK(req->data_buf.length == 0x80000u);
    const auto rep_bytes = encode_conn_data(*rep);
    CHECK(std::equal(rep_bytes.begin(), rep_bytes.end(), g.rep_data.begin()));
    const auto req_bytes = encode_conn_data(*req);
    CHECK(std::equal(req_bytes.begin(), req_bytes.end(), g.req_data.begin()));
    // The rest of the private data is zeros.
    CHECK(std::all_of(g.rep_data.begin() + kConnDataSize, g.rep_data.end(), [](uint8_t b) { return b == 0; }));
    CHECK_FALSE(decode_conn_data(std::span(g.rep_data).first(kConnDataSize - 1)));
}

TEST_CASE("writes in the golden capture follow the protocol as we implement it") {
    const Golden g = load_golden();
    const ConnData client = *decode_conn_data(g.req_data);
    const ConnData server = *decode_conn_data(g.rep_data);
    std::map<uint32_t, std::vector<Write>> by_sender;
    for (const Write& w : g.writes) by_sender[w.src_ip].push_back(w);
    REQUIRE(by_sender.size() == 2);
    for (const auto& [src, writes] : by_sender) {
        INFO("sender " << std::hex << src);
        const bool from_client = src == g.client_ip;
        const ConnData& mine = from_client ? client : server;
        const ConnData& peer = from_client ? server : client;
        REQUIRE(writes.size() >= 3);
        // First: the second half of the sender's ring, written into entry 1 of the peer's
        // target list, with receive credits up to rseq_no 0 + 384.
        const Write& credits = writes.front();
        CHECK(credits.has_imm);
        CHECK(imm_op(credits.imm) == Op::Sgl);
        CHECK(imm_arg(credits.imm) == 0u + mine.credits);
        CHECK(credits.va == peer.target_sgl.addr + sizeof(WireSge) * 1);
        CHECK(credits.rkey == peer.target_sgl.key);
        const WireSge half = sge_in_host_order(credits.payload);  // both hosts little-endian
        CHECK(half.addr == mine.data_buf.addr + mine.data_buf.length);
        CHECK(half.key == mine.data_buf.key);
        CHECK(half.length == mine.data_buf.length);
        // Then the data: each message's immediate is DATA with its length, placed back to back
        // from the start of the first half of the peer's ring, with that half's key.
        uint64_t next = peer.data_buf.addr;
        uint64_t total = 0;
        size_t i = 1;
        for (; i < writes.size() && imm_op(writes[i].imm) == Op::Data; ++i) {
            const Write& w = writes[i];
            CHECK(w.has_imm);
            CHECK(imm_arg(w.imm) == w.length);
            CHECK(w.payload.size() == w.length);
            CHECK(w.va == next);
            CHECK(w.rkey == peer.data_buf.key);
            CHECK(w.length <= kMaxTransfer);
            next += w.length;
            total += w.length;
        }
        CHECK(total == 16 + 5 * 4000);  // the sync message, then five 4000-byte transfers
        // rsend's chunks: 2048 first, then what is left of the 4000.
        CHECK(writes[2].length == kOlapStartSize);
        CHECK(writes[3].length == 4000 - kOlapStartSize);
        // Last: DISCONNECT, a WRITE WITH IMMEDIATE of nothing.
        REQUIRE(i == writes.size() - 1);
        CHECK(writes.back().length == 0);
        CHECK(writes.back().imm == make_imm(Op::Ctrl, static_cast<uint32_t>(Ctrl::Disconnect)));
    }
}

TEST_CASE("every call on an unknown socket fails with EBADF") {
    const int bad = 1000;  // no rsocket has this number
    char buf[8] = {};
    sockaddr_in sin{};
    socklen_t len = sizeof sin;
    int value = 1;
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    CHECK(failure([&] { return rbind(bad, reinterpret_cast<sockaddr*>(&sin), sizeof sin); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rlisten(bad, 1); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return raccept(bad, nullptr, nullptr); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rconnect(bad, reinterpret_cast<sockaddr*>(&sin), sizeof sin); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rshutdown(bad, SHUT_RDWR); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rclose(bad); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rrecv(bad, buf, sizeof buf, 0); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rsend(bad, buf, sizeof buf, 0); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rread(bad, buf, sizeof buf); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rwrite(bad, buf, sizeof buf); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rreadv(bad, &iov, 1); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rwritev(bad, &iov, 1); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rrecvmsg(bad, &msg, 0); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rsendmsg(bad, &msg, 0); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rrecvfrom(bad, buf, sizeof buf, 0, nullptr, nullptr); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rsendto(bad, buf, sizeof buf, 0, nullptr, 0); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rgetpeername(bad, reinterpret_cast<sockaddr*>(&sin), &len); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rgetsockname(bad, reinterpret_cast<sockaddr*>(&sin), &len); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rsetsockopt(bad, SOL_SOCKET, SO_KEEPALIVE, &value, sizeof value); }) ==
          Failure{-1, EBADF});
    socklen_t vlen = sizeof value;
    CHECK(failure([&] { return rgetsockopt(bad, SOL_SOCKET, SO_ERROR, &value, &vlen); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return rfcntl(bad, F_GETFL); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return riomap(bad, buf, sizeof buf, PROT_WRITE, 0, -1); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return riounmap(bad, buf, sizeof buf); }) == Failure{-1, EBADF});
    CHECK(failure([&] { return static_cast<long>(riowrite(bad, buf, sizeof buf, 0, 0)); }) == Failure{-1, EBADF});
}

TEST_CASE("unsupported domains, types and protocols are ENOTSUP, and without a device ENODEV") {
    CHECK(failure([] { return rsocket(AF_UNIX, SOCK_STREAM, 0); }) == Failure{-1, ENOTSUP});
    CHECK(failure([] { return rsocket(AF_INET, SOCK_SEQPACKET, 0); }) == Failure{-1, ENOTSUP});
    CHECK(failure([] { return rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP); }) == Failure{-1, ENOTSUP});
    // Datagram rsockets need the RDMA address to be a kernel interface's (their UDP side channel).
    CHECK(failure([] { return rsocket(AF_INET, SOCK_DGRAM, 0); }) == Failure{-1, ENOTSUP});
    CHECK(failure([] { return rsocket(AF_INET, SOCK_STREAM, 0); }) == Failure{-1, ENODEV});
    CHECK(failure([] { return rsocket(AF_INET6, SOCK_STREAM, IPPROTO_TCP); }) == Failure{-1, ENODEV});
}

TEST_CASE("rpoll and rselect over ordinary descriptors behave as poll and select") {
    int p[2];
    REQUIRE(pipe(p) == 0);
    pollfd fds[2] = {{p[0], POLLIN, 0}, {-1, POLLIN, 0}};
    CHECK(rpoll(fds, 2, 0) == 0);
    const auto start = std::chrono::steady_clock::now();
    CHECK(rpoll(fds, 2, 60) == 0);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(60));
    REQUIRE(write(p[1], "x", 1) == 1);
    CHECK(rpoll(fds, 2, -1) == 1);
    CHECK(fds[0].revents == POLLIN);
    CHECK(fds[1].revents == 0);
    pollfd out{p[1], POLLOUT, 0};
    CHECK(rpoll(&out, 1, 0) == 1);
    CHECK(out.revents == POLLOUT);

    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(p[0], &r);
    FD_SET(p[1], &w);
    timeval tv{0, 0};
    CHECK(rselect(std::max(p[0], p[1]) + 1, &r, &w, nullptr, &tv) == 2);
    CHECK(FD_ISSET(p[0], &r));
    CHECK(FD_ISSET(p[1], &w));
    char c = 0;
    REQUIRE(read(p[0], &c, 1) == 1);
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    tv = {0, 20000};
    CHECK(rselect(p[0] + 1, &r, nullptr, nullptr, &tv) == 0);
    CHECK_FALSE(FD_ISSET(p[0], &r));
    CHECK(failure([] { return rpoll(nullptr, 1, 0); }) == Failure{-1, EFAULT});
    CHECK(failure([] { return rselect(-1, nullptr, nullptr, nullptr, nullptr); }) == Failure{-1, EINVAL});
    close(p[0]);
    close(p[1]);
}

int main(int argc, char** argv) {
    char dir[] = "/tmp/rsocket-unit-XXXXXX";
    if (mkdtemp(dir) == nullptr) return 1;
    setenv("RNIC_RUN_DIR", dir, 1);
    const int rc = Catch::Session().run(argc, argv);
    rmdir(dir);
    return rc;
}
