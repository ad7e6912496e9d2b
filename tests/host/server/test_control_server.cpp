// The control protocol: Hello, strict message checks, per-session handles, reclaiming on
// disconnect, Stats and SetLogLevel, and the socket file's life.
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "peer_credentials.hpp"
#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

uint32_t alloc_pd(Rig& rig, RawClient& c) {
    Reply r = rig.call(c, Op::AllocPd, nullptr, 0);
    REQUIRE(r.header.status == 0);
    return r.as<abi::HandleReply>().handle;
}

void expect_closed_with(Rig& rig, RawClient& c, const Reply& r, int status) {
    REQUIRE_FALSE(r.eof);
    CHECK(r.header.status == status);
    CHECK(r.body.empty());
    Reply next = rig.wait_reply(c);
    CHECK(next.eof);
}

}  // namespace

TEST_CASE("Hello returns the device, the status page, the kick eventfd and the async ring and socket") {
    Rig rig;
    REQUIRE(std::filesystem::exists(rig.host->socket_path()));
    RawClient c(rig.host->socket_path());
    Reply r = rig.hello(c);
    REQUIRE(r.header.status == 0);
    REQUIRE(r.body.size() == sizeof(abi::HelloReply));
    REQUIRE(r.fds.size() == 5);
    const auto hello = std::make_unique<abi::HelloReply>(r.as<abi::HelloReply>());
    CHECK(std::string(hello->device_name) == "rnictest");
    // GID 0 the IPv4-mapped address, then link-local and fd77::1, every one RoCE v2.
    const auto gids = port::gid_table(port::test::kSelf);
    REQUIRE(hello->gid_count == 3);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(std::memcmp(hello->gids[i], gids[i].raw.data(), 16) == 0);
        CHECK(hello->gid_types[i] == abi::kGidTypeRoceV2);
    }
    CHECK(gids[0] == wire::Gid::from_ipv4(port::test::kSelf.ipv4));
    CHECK(std::memcmp(hello->mac, port::test::kSelf.mac.data(), 6) == 0);
    CHECK(hello->port.state == 4);
    CHECK(hello->port.link_layer == 2);
    // 10 Gb/s Ethernet as Linux reports it for RoCE: 1X at FDR10 (ib_get_eth_speed).
    CHECK(hello->port.active_width == 1);
    CHECK(hello->port.active_speed == 8);
    CHECK(hello->device.max_qp > 0);
    CHECK(abi::is_power_of_two(hello->async_ring_size));

    // The status page maps read-only and counts loop turns.
    Mapping status(r.fds[0], hello->status_page_size, false);
    const auto* page = reinterpret_cast<const abi::StatusPage*>(status.data);
    const uint64_t before = page->loop_turns.load();
    rig.turn();
    CHECK(page->loop_turns.load() == before + 1);
    CHECK(page->sleeping.load() == 0);
    CHECK(page->shutting_down.load() == 0);
    // Every session maps the same page: no client may write it, whatever it tries.
    errno = 0;
    CHECK(mmap(nullptr, hello->status_page_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0], 0) == MAP_FAILED);
    CHECK(errno == EPERM);
    const uint8_t one = 1;
    CHECK(pwrite(r.fds[0], &one, 1, 0) == -1);
    CHECK(errno == EPERM);
    // The async ring's header is initialised by the daemon.
    Mapping async(r.fds[2], abi::ring_bytes(hello->async_ring_size, sizeof(abi::AsyncEventEntry)));
    const auto* h = reinterpret_cast<const abi::RingHeader*>(async.data);
    CHECK(h->size == hello->async_ring_size);
    CHECK(h->entry_size == sizeof(abi::AsyncEventEntry));
    CHECK(h->entries_offset == sizeof(abi::RingHeader));
    // The notification descriptors are the daemon's own: the session's kick eventfd, and the
    // async socket with its peer (the daemon's end) for the client's own wake-ups.
    char link[64] = {};
    REQUIRE(readlink(("/proc/self/fd/" + std::to_string(r.fds[1])).c_str(), link, sizeof link - 1) > 0);
    CHECK(std::string(link) == "anon_inode:[eventfd]");
    for (int i : {3, 4}) {
        int type = 0;
        socklen_t len = sizeof type;
        REQUIRE(getsockopt(r.fds[i], SOL_SOCKET, SO_TYPE, &type, &len) == 0);
        CHECK(type == SOCK_STREAM);
    }
    // The client's end blocks (an application that polls it blocks in ibv_get_async_event unless
    // it set O_NONBLOCK itself); the daemon's end does not.
    CHECK((fcntl(r.fds[3], F_GETFL) & O_NONBLOCK) == 0);
    CHECK((fcntl(r.fds[4], F_GETFL) & O_NONBLOCK) != 0);
    const char byte = 1;
    REQUIRE(send(r.fds[4], &byte, 1, MSG_DONTWAIT) == 1);
    char got = 0;
    CHECK(recv(r.fds[3], &got, 1, MSG_DONTWAIT) == 1);
    CHECK(rig.host->session_count() == 1);
}

TEST_CASE("malformed messages are answered with an errno and the connection is closed") {
    Rig rig;
    SECTION("bad magic") {
        RawClient c(rig.host->socket_path());
        abi::MessageHeader h{0x12345678, abi::kAbiVersion, uint16_t(Op::AllocPd), 1, sizeof(abi::MessageHeader), 0, 0};
        c.send_raw(&h, sizeof h);
        expect_closed_with(rig, c, rig.wait_reply(c), EPROTO);
    }
    SECTION("wrong ABI version") {
        RawClient c(rig.host->socket_path());
        abi::MessageHeader h{abi::kMagic, 99, uint16_t(Op::AllocPd), 1, sizeof(abi::MessageHeader), 0, 0};
        c.send_raw(&h, sizeof h);
        expect_closed_with(rig, c, rig.wait_reply(c), EPROTO);
    }
    SECTION("shorter than a header") {
        RawClient c(rig.host->socket_path());
        const uint8_t junk[10] = {};
        c.send_raw(junk, sizeof junk);
        expect_closed_with(rig, c, rig.wait_reply(c), EPROTO);
    }
    SECTION("length field disagrees with the message") {
        RawClient c(rig.host->socket_path());
        abi::MessageHeader h{abi::kMagic, abi::kAbiVersion, uint16_t(Op::AllocPd), 1, 1000, 0, 0};
        c.send_raw(&h, sizeof h);
        expect_closed_with(rig, c, rig.wait_reply(c), EPROTO);
    }
    SECTION("unknown op") {
        RawClient c(rig.host->socket_path());
        REQUIRE(rig.hello(c).header.status == 0);
        c.send(static_cast<Op>(99), nullptr, 0);
        expect_closed_with(rig, c, rig.wait_reply(c), EINVAL);
    }
    SECTION("a body of the wrong size") {
        RawClient c(rig.host->socket_path());
        REQUIRE(rig.hello(c).header.status == 0);
        const uint32_t extra = 7;
        expect_closed_with(rig, c, rig.call(c, Op::AllocPd, extra), EINVAL);
    }
    SECTION("an op before Hello") {
        RawClient c(rig.host->socket_path());
        expect_closed_with(rig, c, rig.call(c, Op::AllocPd, nullptr, 0), EPROTO);
    }
    SECTION("Hello with a descriptor (ABI 2 sent its async eventfd; the daemon makes its own now)") {
        RawClient c(rig.host->socket_path());
        const int efd = eventfd(0, EFD_CLOEXEC);
        abi::HelloRequest req{1, 0};
        Reply r = rig.call(c, Op::Hello, req, {efd});
        close(efd);
        expect_closed_with(rig, c, r, EINVAL);
    }
    SECTION("RegMr whose run count does not match its length") {
        RawClient c(rig.host->socket_path());
        REQUIRE(rig.hello(c).header.status == 0);
        abi::RegMrRequest req{};
        req.pd = alloc_pd(rig, c);
        req.length = 4096;
        req.run_count = 3;  // none follow
        expect_closed_with(rig, c, rig.call(c, Op::RegMr, req), EINVAL);
    }
    // The daemon keeps serving others.
    RawClient other(rig.host->socket_path());
    CHECK(rig.hello(other).header.status == 0);
    CHECK(rig.host->session_count() == 1);
}

TEST_CASE("another session's handles are EINVAL, as if they did not exist") {
    Rig rig;
    RawClient a(rig.host->socket_path());
    RawClient b(rig.host->socket_path());
    REQUIRE(rig.hello(a).header.status == 0);
    REQUIRE(rig.hello(b).header.status == 0);
    const uint32_t pd = alloc_pd(rig, a);
    Reply cq = rig.call(a, Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
    REQUIRE(cq.header.status == 0);
    const uint32_t cq_handle = cq.as<abi::CreateCqReply>().handle;
    abi::CreateQpRequest qreq{};
    qreq.qp_type = 2;
    qreq.pd = pd;
    qreq.send_cq = qreq.recv_cq = cq_handle;
    qreq.cap = {4, 4, 1, 1, 0};
    Reply qp = rig.call(a, Op::CreateQp, qreq);
    REQUIRE(qp.header.status == 0);
    const uint32_t qpn = qp.as<abi::CreateQpReply>().qpn;

    CHECK(rig.call(b, Op::DeallocPd, abi::HandleRequest{pd, 0}).header.status == EINVAL);
    CHECK(rig.call(b, Op::DestroyCq, abi::HandleRequest{cq_handle, 0}).header.status == EINVAL);
    CHECK(rig.call(b, Op::CreateQp, qreq).header.status == EINVAL);  // a's PD and CQ
    abi::ModifyQpRequest m{};
    m.qpn = qpn;
    m.attr_mask = 1;
    m.attr.qp_state = 6;
    CHECK(rig.call(b, Op::ModifyQp, m).header.status == EINVAL);
    CHECK(rig.call(b, Op::QueryQp, abi::QueryQpRequest{qpn, 0}).header.status == EINVAL);
    CHECK(rig.call(b, Op::DestroyQp, abi::HandleRequest{qpn, 0}).header.status == EINVAL);
    Reply channel = rig.call(a, Op::CreateCompChannel, nullptr, 0);
    REQUIRE(channel.header.status == 0);
    const uint32_t channel_handle = channel.as<abi::HandleReply>().handle;
    CHECK(rig.call(b, Op::DestroyCompChannel, abi::HandleRequest{channel_handle, 0}).header.status == EINVAL);
    // An ordinary error does not close the session, and the owner still may.
    CHECK(rig.call(b, Op::QueryPort, nullptr, 0).header.status == 0);
    CHECK(rig.call(a, Op::QueryQp, abi::QueryQpRequest{qpn, 0}).header.status == 0);
    CHECK(rig.call(a, Op::DestroyCq, abi::HandleRequest{cq_handle, 0}).header.status == EBUSY);
    CHECK(rig.call(a, Op::DestroyQp, abi::HandleRequest{qpn, 0}).header.status == 0);
    CHECK(rig.call(a, Op::DestroyCq, abi::HandleRequest{cq_handle, 0}).header.status == 0);
    CHECK(rig.call(a, Op::DeallocPd, abi::HandleRequest{pd, 0}).header.status == 0);
}

TEST_CASE("a disconnect reclaims everything the session owned") {
    Rig rig;
    auto c = std::make_unique<RawClient>(rig.host->socket_path());
    REQUIRE(rig.hello(*c).header.status == 0);
    const uint32_t pd = alloc_pd(rig, *c);
    SharedBuffer buf(3 * 4096);
    REQUIRE(rig.call(*c, Op::ShareSegment, abi::ShareSegmentRequest{1, 0, buf.size}, {buf.fd}).header.status == 0);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    mr.req = {pd,  1, reinterpret_cast<uint64_t>(buf.data) + 100, 5000, reinterpret_cast<uint64_t>(buf.data) + 100,
              100, 1};
    mr.run = {1, 0, 0, 8192};
    Reply reg = rig.call(*c, Op::RegMr, mr);
    REQUIRE(reg.header.status == 0);
    CHECK(rig.call(*c, Op::ReleaseSegment, abi::HandleRequest{1, 0}).header.status == 0);  // the MR keeps it
    Reply ch = rig.call(*c, Op::CreateCompChannel, nullptr, 0);
    REQUIRE(ch.header.status == 0);
    Reply cq = rig.call(*c, Op::CreateCq, abi::CreateCqRequest{16, ch.as<abi::HandleReply>().handle, 0, 0});
    REQUIRE(cq.header.status == 0);
    const uint32_t cqh = cq.as<abi::CreateCqReply>().handle;
    Reply srq = rig.call(*c, Op::CreateSrq, abi::CreateSrqRequest{pd, 16, 1, 0});
    REQUIRE(srq.header.status == 0);
    abi::CreateQpRequest q{};
    q.qp_type = 2;
    q.pd = pd;
    q.send_cq = q.recv_cq = cqh;
    q.srq = srq.as<abi::CreateSrqReply>().handle;
    q.cap = {8, 0, 1, 0, 0};
    REQUIRE(rig.call(*c, Op::CreateQp, q).header.status == 0);
    q.qp_type = 4;
    q.srq = 0;
    q.cap = {8, 8, 1, 1, 0};
    REQUIRE(rig.call(*c, Op::CreateQp, q).header.status == 0);
    abi::CreateAhRequest ah{};
    ah.pd = pd;
    std::memcpy(ah.av.dgid, wire::Gid::from_ipv4(port::test::kSelf.ipv4).raw.data(), 16);
    REQUIRE(rig.call(*c, Op::CreateAh, ah).header.status == 0);

    CHECK(rig.engine.qp_count() == 2);
    const auto before = nlohmann::json::parse(rig.host->stats_json());
    REQUIRE(before["sessions"].size() == 1);
    CHECK(before["sessions"][0]["qps"] == 2);
    CHECK(before["sessions"][0]["mrs"] == 1);
    CHECK(before["sessions"][0]["segments"] == 1);  // released, but its MR keeps it mapped
    CHECK(before["sessions"][0]["channels"] == 1);
    CHECK(before["qps"].size() == 2);
    const nlohmann::json held = {{"sessions", 1}, {"pds", 1},      {"mrs", 1},       {"cqs", 1},
                                 {"qps", 2},      {"srqs", 1},     {"ahs", 1},       {"channels", 1},
                                 {"segments", 1}, {"cm_ids", 0},   {"cm_channels", 0}};
    CHECK(before["objects"] == held);

    c->close_now();
    for (int i = 0; i < 50 && rig.host->session_count() > 0; ++i) rig.turn();
    CHECK(rig.host->session_count() == 0);
    CHECK(rig.engine.qp_count() == 0);
    CHECK(rig.engine.cq_count() == 0);
    CHECK(rig.engine.srq_count() == 0);
    CHECK(rig.engine.ah_count() == 0);
    CHECK(rig.engine.pd_count() == 0);
    const auto after = nlohmann::json::parse(rig.host->stats_json());
    CHECK(after["sessions"].empty());
    CHECK(after["qps"].empty());
    CHECK(after["counters"]["host_sessions_closed"] == 1);
    for (const auto& [name, count] : after["objects"].items()) {
        INFO(name);
        CHECK(count == 0);
    }
    CHECK(after["objects"].size() == held.size());
}

namespace {

size_t open_descriptors() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

}  // namespace

TEST_CASE("the daemon holds no descriptor per ring or segment: its open files do not grow with the objects") {
    // Every ring memfd goes to the client and every segment is mapped, and then the descriptor is
    // closed (the mapping keeps the memory): with one per QP, RLIMIT_NOFILE's usual 1024 stopped
    // rnicd at ~1,000 of its 16,384 QPs.
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const uint32_t pd = alloc_pd(rig, c);
    constexpr uint32_t kEach = 32;
    std::vector<std::unique_ptr<SharedBuffer>> buffers;
    for (uint32_t i = 0; i < kEach; ++i) buffers.push_back(std::make_unique<SharedBuffer>(4096));
    const size_t before = open_descriptors();
    for (uint32_t i = 0; i < kEach; ++i) {
        const SharedBuffer& b = *buffers[i];
        REQUIRE(rig.call(c, Op::ShareSegment, abi::ShareSegmentRequest{i + 1, 0, b.size}, {b.fd}).header.status == 0);
        struct {
            abi::RegMrRequest req;
            abi::SegmentRun run;
        } mr{};
        mr.req = {pd, 1, reinterpret_cast<uint64_t>(b.data), 4096, reinterpret_cast<uint64_t>(b.data), 0, 1};
        mr.run = {i + 1, 0, 0, 4096};
        REQUIRE(rig.call(c, Op::RegMr, mr).header.status == 0);
        Reply cq = rig.call(c, Op::CreateCq, abi::CreateCqRequest{16, 0, 0, 0});
        REQUIRE(cq.header.status == 0);
        abi::CreateQpRequest q{};
        q.qp_type = 2;
        q.pd = pd;
        q.send_cq = q.recv_cq = cq.as<abi::CreateCqReply>().handle;
        q.cap = {8, 8, 1, 1, 0};
        REQUIRE(rig.call(c, Op::CreateQp, q).header.status == 0);
        Reply srq = rig.call(c, Op::CreateSrq, abi::CreateSrqRequest{pd, 16, 1, 0});
        REQUIRE(srq.header.status == 0);
    }  // each Reply closes the test's copy of the ring fd it carried
    CHECK(rig.engine.qp_count() == kEach);
    CHECK(open_descriptors() <= before + 2);
}

TEST_CASE("RegMr: any iova at the buffer's offset in its page, EINVAL for another offset (as uverbs)") {
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const uint32_t pd = alloc_pd(rig, c);
    SharedBuffer buf(2 * 4096);
    REQUIRE(rig.call(c, Op::ShareSegment, abi::ShareSegmentRequest{1, 0, buf.size}, {buf.fd}).header.status == 0);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    const uint64_t addr = reinterpret_cast<uint64_t>(buf.data) + 100;
    mr.req = {pd, 1, addr, 5000, 0x7000'0000'0000 + 100, 100, 1};
    mr.run = {1, 0, 0, 8192};
    CHECK(rig.call(c, Op::RegMr, mr).header.status == 0);
    mr.req.iova = 0x7000'0000'0000 + 101;
    Reply r = rig.call(c, Op::RegMr, mr);
    CHECK(r.header.status == EINVAL);
    CHECK(r.body.empty());
    // A refused registration is an answer, not a protocol error: the session goes on.
    mr.req.iova = addr;
    CHECK(rig.call(c, Op::RegMr, mr).header.status == 0);
    const auto stats = nlohmann::json::parse(rig.host->stats_json());
    REQUIRE(stats["sessions"].size() == 1);
    CHECK(stats["sessions"][0]["mrs"] == 2);
}

TEST_CASE("Stats is JSON in rnicctl's schema, SetLogLevel takes spdlog's names only") {
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    Reply r = rig.call(c, Op::Stats, abi::StatsRequest{0, 0});
    REQUIRE(r.header.status == 0);
    const auto j = nlohmann::json::parse(std::string(r.body.begin(), r.body.end()));
    CHECK(j["device"]["name"] == "rnictest");
    CHECK(j["device"]["ipv4"] == "10.77.0.1/24");
    CHECK(j["device"]["mac"] == "02:00:00:00:00:01");
    CHECK(j["device"]["port_state"] == "ACTIVE");
    CHECK(j["device"]["active_mtu"] == 4096);
    CHECK(j["device"]["gids"][0]["gid"] == "::ffff:10.77.0.1");
    CHECK(j["device"]["gids"][0]["type"] == "RoCE v2");
    CHECK(j["device"]["gids"][1]["gid"] == "fe80::ff:fe00:1");
    CHECK(j["device"]["gids"][2]["gid"] == "fd77::1");
    CHECK(j["device"]["gids"][2]["type"] == "RoCE v2");
    CHECK(j["device"]["ipv6"] == nlohmann::json::array({"fe80::ff:fe00:1/64", "fd77::1/64"}));
    CHECK(j["counters"].contains("nd_solicitations_sent"));
    CHECK(j["counters"].contains("icmp6_echo_requests"));
    CHECK(j["counters"].contains("rx_icrc_errors"));
    CHECK(j["counters"].contains("retransmits"));
    CHECK(j["counters"].contains("arp_requests_sent"));
    CHECK(j["counters"].contains("icmp_echo_requests"));
    CHECK(j["caches"].contains("mtt_cache_misses"));
    REQUIRE(j["sessions"].size() == 1);
    CHECK(j["sessions"][0]["pid"] == static_cast<uint32_t>(getpid()));
    CHECK(j["log_level"].is_string());

    const auto old_level = spdlog::get_level();
    abi::SetLogLevelRequest bad{};
    std::strcpy(bad.level, "loud");
    CHECK(rig.call(c, Op::SetLogLevel, bad).header.status == EINVAL);
    abi::SetLogLevelRequest good{};
    std::strcpy(good.level, "debug");
    CHECK(rig.call(c, Op::SetLogLevel, good).header.status == 0);
    CHECK(spdlog::get_level() == spdlog::level::debug);
    spdlog::set_level(old_level);
}

TEST_CASE("Stats gives the QP list in pages that fit a message, whatever the number of QPs") {
    // One document with every QP outgrew a message at ~60 QPs: every Stats request, rnicctl's
    // included, was answered {"error":"statistics too large"} from then on.
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const uint32_t pd = alloc_pd(rig, c);
    Reply cq = rig.call(c, Op::CreateCq, abi::CreateCqRequest{16, 0, 0, 0});
    REQUIRE(cq.header.status == 0);
    abi::CreateQpRequest q{};
    q.qp_type = 2;
    q.pd = pd;
    q.send_cq = q.recv_cq = cq.as<abi::CreateCqReply>().handle;
    q.cap = {1, 1, 1, 1, 0};
    std::vector<uint32_t> created;
    for (int i = 0; i < 300; ++i) {
        Reply r = rig.call(c, Op::CreateQp, q);
        REQUIRE(r.header.status == 0);
        created.push_back(r.as<abi::CreateQpReply>().qpn);
    }
    std::sort(created.begin(), created.end());
    auto stats = [&](uint32_t what, uint32_t first) {
        Reply r = rig.call(c, Op::Stats, abi::StatsRequest{what, first});
        REQUIRE(r.header.status == 0);
        CHECK(r.body.size() + sizeof(abi::MessageHeader) <= abi::kMaxMessage);
        return nlohmann::json::parse(std::string(r.body.begin(), r.body.end()));
    };

    const auto all = stats(0, 0);  // what an older client asks: the device and the first page
    CHECK(all["device"]["name"] == "rnictest");
    CHECK(all["objects"]["qps"] == 300);
    REQUIRE(all["qps"].size() > 10);
    CHECK(all["qps"].size() < 300);
    CHECK(all["next_qpn"] == created[all["qps"].size()]);

    const auto device = stats(abi::kStatsDevice, 0);
    CHECK(device.contains("counters"));
    CHECK_FALSE(device.contains("qps"));

    std::vector<uint32_t> listed;
    uint32_t first = 0;
    int pages = 0;
    for (; pages < 300; ++pages) {
        const auto page = stats(abi::kStatsQps, first);
        CHECK_FALSE(page.contains("device"));
        for (const auto& e : page["qps"]) {
            listed.push_back(e["qpn"].get<uint32_t>());
            CHECK(e["state"] == "RESET");
        }
        if (!page.contains("next_qpn")) break;
        first = page["next_qpn"].get<uint32_t>();
    }
    CHECK(pages >= 3);
    CHECK(listed == created);  // every QP once, in QPN order

    const auto one = stats(abi::kStatsQps, created[123]);  // how `rnicctl stat qp N` asks
    REQUIRE_FALSE(one["qps"].empty());
    CHECK(one["qps"][0]["qpn"] == created[123]);
    CHECK(rig.call(c, Op::Stats, abi::StatsRequest{8, 0}).header.status == EINVAL);
    CHECK(rig.call(c, Op::Stats, abi::StatsRequest{abi::kStatsCmIds, 0}).header.status == 0);
}

TEST_CASE("the socket file: a live daemon is not replaced, a stale file is") {
    Rig rig;
    boost::asio::io_context io2;
    server::ServerConfig sc;
    sc.name = "rnictest";
    sc.run_dir = rig.dir + "/run";
    {
        server::HostService second(io2, rig.engine, sc, {});
        CHECK_THROWS_WITH(second.start(), Catch::Contains("another rnicd"));
    }
    CHECK(std::filesystem::exists(rig.host->socket_path()));
    // A socket nobody listens on any more (a crashed daemon) is removed and replaced.
    sc.name = "stale";
    const std::string stale = sc.run_dir + "/stale.sock";
    {
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::memcpy(sa.sun_path, stale.c_str(), stale.size());
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        close(fd);
    }
    {
        server::HostService third(io2, rig.engine, sc, {});
        third.start();
        RawClient c(stale);
        CHECK(c.fd() >= 0);
    }
    CHECK_FALSE(std::filesystem::exists(stale));
}

TEST_CASE("a peer whose credentials cannot be read gets EACCES on Hello, never uid 0's rights") {
    Rig rig;
    test::fail_next_peercred = ENOBUFS;
    RawClient c(rig.host->socket_path());
    expect_closed_with(rig, c, rig.hello(c), EACCES);
    CHECK(test::fail_next_peercred == 0);  // the daemon did ask
    CHECK(rig.host->session_count() == 0);
    const auto j = nlohmann::json::parse(rig.host->stats_json());
    CHECK(j["counters"]["host_sessions_refused"] == 1);
    // The next peer, whose credentials read, is served.
    RawClient d(rig.host->socket_path());
    CHECK(rig.hello(d).header.status == 0);
}
