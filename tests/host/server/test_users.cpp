// Many users on one device: every uid is served on a socket every user can reach, registered
// memory counts against the client process's RLIMIT_MEMLOCK (ib_umem_get's rule), per-uid caps
// refuse with EAGAIN (the rdma cgroup's rule), and a user sees only their own sessions and QPs.
// Children that setuid() to nobody (65534) are real other users; the interposed SO_PEERCRED
// (peer_credentials.hpp) stands in for another uid where the kernel's checks do not matter.
#include <fcntl.h>
#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "peer_credentials.hpp"
#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;
using nlohmann::json;
using server::Resource;

namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;
constexpr size_t kPage = 4096;

// Runs `child` in a forked process as uid `uid` (gid `gid`, no supplementary groups) with
// RLIMIT_MEMLOCK `memlock` while this process turns the rig's loop. The child reports what went
// wrong on a pipe, one line each; returns those lines ("" when all went as it expected).
std::string as_user(Rig& rig, uid_t uid, gid_t gid, rlim_t memlock, const std::function<void(std::ostream&)>& child) {
    int report[2];
    REQUIRE(pipe(report) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(report[0]);
        std::ostringstream problems;
        const rlimit rl{memlock, memlock};
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0 || setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            problems << "cannot become uid " << uid << ": " << std::strerror(errno) << "\n";
        else
            child(problems);
        const std::string text = problems.str();
        (void)!write(report[1], text.data(), text.size());
        _exit(0);  // no destructor of the parent's objects runs here
    }
    close(report[1]);
    int status = -1;
    for (int i = 0; i < 100000 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
        rig.turn();
        usleep(50);
    }
    std::string text;
    char buf[512];
    for (ssize_t n; (n = read(report[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    close(report[0]);
    REQUIRE(WIFEXITED(status));
    return text;
}

#define EXPECT_RC(out, what, got, want)                                                     \
    do {                                                                                    \
        const int got_ = (got);                                                             \
        if (got_ != (want)) out << what << ": got " << got_ << ", want " << (want) << "\n"; \
    } while (0)

uint32_t handle_of(const std::vector<uint8_t>& body) {
    abi::HandleReply r{};
    std::memcpy(&r, body.data(), std::min(sizeof r, body.size()));
    return r.handle;
}

// RegMr of `length` bytes at `page_offset` in segment 1 (from its start), as the client library
// sends it; the lkey through `lkey`.
int reg_mr(BlockingClient& c, uint32_t pd, uint32_t page_offset, uint64_t length, uint32_t* lkey = nullptr) {
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } m{};
    const uint64_t addr = 0x10000000 + page_offset;
    const uint64_t pages = (page_offset + length + kPage - 1) / kPage;
    m.req = {pd, 1, addr, length, addr, page_offset, 1};
    m.run = {1, 0, 0, pages * kPage};
    std::vector<uint8_t> body;
    const int rc = c.call(Op::RegMr, m, {}, &body);
    if (rc == 0 && lkey && body.size() >= sizeof *lkey) std::memcpy(lkey, body.data(), sizeof *lkey);
    return rc;
}

// A session ready to register: PD and a 32-page segment 1. The PD's handle, 0 on failure.
uint32_t prepare(BlockingClient& c, std::ostream& out) {
    EXPECT_RC(out, "Hello", c.hello(), 0);
    std::vector<uint8_t> body;
    EXPECT_RC(out, "AllocPd", c.call(Op::AllocPd, nullptr, 0, {}, &body), 0);
    const int fd = memfd_create("mr", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 32 * kPage) != 0) out << "memfd\n";
    EXPECT_RC(out, "ShareSegment", c.call(Op::ShareSegment, abi::ShareSegmentRequest{1, 0, 32 * kPage}, {fd}), 0);
    close(fd);
    return body.size() >= sizeof(abi::HandleReply) ? handle_of(body) : 0;
}

json stats_of(BlockingClient& c) {
    std::vector<uint8_t> body;
    if (c.call(Op::Stats, abi::StatsRequest{0, 0}, {}, &body) != 0) return json();
    return json::parse(std::string(body.begin(), body.end()), nullptr, false);
}

json stats_of(Rig& rig, RawClient& c) {
    Reply r = rig.call(c, Op::Stats, abi::StatsRequest{0, 0});
    REQUIRE(r.header.status == 0);
    return json::parse(std::string(r.body.begin(), r.body.end()));
}

uint32_t create(Rig& rig, RawClient& c, Op op, const void* body, size_t length, int want = 0) {
    Reply r = rig.call(c, op, body, length);
    CHECK(r.header.status == want);
    return r.header.status == 0 ? r.as<abi::HandleReply>().handle : 0;
}
template <class T>
uint32_t create(Rig& rig, RawClient& c, Op op, const T& body, int want = 0) {
    return create(rig, c, op, &body, sizeof body, want);
}

uint32_t alloc_pd(Rig& rig, RawClient& c, int want = 0) {
    return create(rig, c, Op::AllocPd, static_cast<const void*>(nullptr), 0, want);
}

abi::CreateQpRequest rc_qp(uint32_t pd, uint32_t cq) {
    abi::CreateQpRequest q{};
    q.qp_type = 2;
    q.pd = pd;
    q.send_cq = q.recv_cq = cq;
    q.cap = {4, 4, 1, 1, 0};
    return q;
}

// Makes the next connection look like `uid`'s and says Hello on it.
std::unique_ptr<RawClient> connect_as(Rig& rig, uint32_t uid, int want = 0) {
    next_peer_uid = uid;
    auto c = std::make_unique<RawClient>(rig.host->socket_path());
    Reply r = rig.hello(*c);
    CHECK(next_peer_uid == kRealPeerUid);  // the daemon asked for this connection
    CHECK(r.header.status == want);
    return c;
}

}  // namespace

TEST_CASE("every uid is served: nobody reaches the socket (0666, run directory 0755 whatever the umask)") {
    const mode_t old_umask = umask(077);
    Rig rig;
    umask(old_umask);
    chmod(rig.dir.c_str(), 0755);  // mkdtemp's, not the service's
    struct stat st {};
    REQUIRE(stat(rig.host->socket_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0666);
    REQUIRE(stat((rig.dir + "/run").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);

    RawClient root(rig.host->socket_path());
    REQUIRE(rig.hello(root).header.status == 0);
    const uint32_t pd = alloc_pd(rig, root);
    const uint32_t cq = create(rig, root, Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
    Reply qp = rig.call(root, Op::CreateQp, rc_qp(pd, cq));
    REQUIRE(qp.header.status == 0);
    const uint32_t root_qpn = qp.as<abi::CreateQpReply>().qpn;

    const std::string path = rig.host->socket_path();
    const std::string problems = as_user(rig, kNobody, kNogroup, 8 << 20, [&](std::ostream& out) {
        BlockingClient c(path);
        EXPECT_RC(out, "connect", c.error(), 0);
        EXPECT_RC(out, "Hello as nobody", c.hello(), 0);
        std::vector<uint8_t> body;
        EXPECT_RC(out, "AllocPd", c.call(Op::AllocPd, nullptr, 0, {}, &body), 0);
        const uint32_t my_pd = handle_of(body);
        EXPECT_RC(out, "CreateCq", c.call(Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0}, {}, &body), 0);
        EXPECT_RC(out, "CreateQp", c.call(Op::CreateQp, rc_qp(my_pd, handle_of(body)), {}, &body), 0);
        abi::CreateQpReply mine{};
        std::memcpy(&mine, body.data(), std::min(sizeof mine, body.size()));
        // root's QP is not nobody's to touch.
        EXPECT_RC(out, "QueryQp of root's QP", c.call(Op::QueryQp, abi::QueryQpRequest{root_qpn, 0}), EINVAL);
        EXPECT_RC(out, "DestroyQp of root's QP", c.call(Op::DestroyQp, abi::HandleRequest{root_qpn, 0}), EINVAL);
        // Stats: only nobody's own session and QP; the device's totals count everyone's.
        const json j = stats_of(c);
        if (j.is_discarded() || !j.contains("sessions")) {
            out << "Stats unreadable\n";
            return;
        }
        if (j["sessions"].size() != 1 || j["sessions"][0]["uid"] != kNobody)
            out << "sessions: " << j["sessions"] << "\n";
        if (j["qps"].size() != 1 || j["qps"][0]["qpn"] != mine.qpn || j["qps"][0]["uid"] != kNobody)
            out << "qps: " << j["qps"] << "\n";
        if (j["objects"]["qps"] != 2 || j["objects"]["sessions"] != 2) out << "objects: " << j["objects"] << "\n";
        if (j["users"].size() != 1 || j["users"][0]["uid"] != kNobody || j["users"][0]["held"]["qps"] != 1)
            out << "users: " << j["users"] << "\n";
        abi::SetLogLevelRequest level{};
        std::strcpy(level.level, "trace");
        EXPECT_RC(out, "SetLogLevel as nobody", c.call(Op::SetLogLevel, level), EPERM);
    });
    CHECK(problems == "");
    CHECK(spdlog::get_level() != spdlog::level::trace);
    for (int i = 0; i < 100 && rig.host->session_count() > 1; ++i) rig.turn();
    const json j = stats_of(rig, root);
    CHECK(j["sessions"].size() == 1);  // nobody's child has exited and its session was reclaimed
    CHECK(j["counters"]["host_sessions_opened"] == 2);
    CHECK(j["counters"]["host_sessions_refused"] == 0);
}

TEST_CASE(
    "a socket mode and group (rnicd --socket-mode 0660 --socket-group): the group's members get in, no one else") {
    Rig rig([](server::ServerConfig& sc) {
        sc.socket_mode = 0660;
        sc.socket_gid = kNogroup;
    });
    chmod(rig.dir.c_str(), 0755);
    struct stat st {};
    REQUIRE(stat(rig.host->socket_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660);
    CHECK(st.st_gid == kNogroup);
    const std::string path = rig.host->socket_path();
    auto try_as = [&](gid_t gid) {
        return as_user(rig, kNobody, gid, 8 << 20, [&](std::ostream& out) {
            BlockingClient c(path);
            if (c.error()) {
                out << "connect: " << std::strerror(c.error());
                return;
            }
            EXPECT_RC(out, "Hello", c.hello(), 0);
        });
    };
    CHECK(try_as(kNogroup) == "");
    CHECK(try_as(kNogroup - 1) == "connect: Permission denied");
}

TEST_CASE("registered memory counts against the client process's RLIMIT_MEMLOCK (ib_umem_get's rule)") {
    Rig rig;
    chmod(rig.dir.c_str(), 0755);
    const std::string path = rig.host->socket_path();
    // nobody, 64 KiB: 16 pages, counted per process across its sessions.
    const std::string problems = as_user(rig, kNobody, kNogroup, 16 * kPage, [&](std::ostream& out) {
        auto a = std::make_unique<BlockingClient>(path);
        const uint32_t pa = prepare(*a, out);
        uint32_t first = 0;
        EXPECT_RC(out, "8 pages", reg_mr(*a, pa, 0, 8 * kPage, &first), 0);
        EXPECT_RC(out, "6 more", reg_mr(*a, pa, 0, 6 * kPage), 0);
        // 2 bytes straddling a page boundary pin both pages: 16, the limit itself.
        EXPECT_RC(out, "2 bytes over a page boundary", reg_mr(*a, pa, 4095, 2), 0);
        EXPECT_RC(out, "1 byte over the limit", reg_mr(*a, pa, 0, 1), ENOMEM);
        // Another session of the same process shares its pinned pages.
        BlockingClient b(path);
        const uint32_t pb = prepare(b, out);
        EXPECT_RC(out, "second session, over the limit", reg_mr(b, pb, 0, kPage), ENOMEM);
        EXPECT_RC(out, "DeregMr", a->call(Op::DeregMr, abi::HandleRequest{first, 0}), 0);
        EXPECT_RC(out, "second session after a DeregMr", reg_mr(b, pb, 0, kPage), 0);
        // The limit is read at each registration, as the kernel reads the caller's.
        rlimit rl{0, 16 * kPage};
        setrlimit(RLIMIT_MEMLOCK, &rl);
        EXPECT_RC(out, "RLIMIT_MEMLOCK 0 (can_do_mlock)", reg_mr(b, pb, 0, kPage), EPERM);
        rl.rlim_cur = 16 * kPage;
        setrlimit(RLIMIT_MEMLOCK, &rl);
        EXPECT_RC(out, "the limit back", reg_mr(b, pb, 0, kPage), 0);
        // a's end releases its MRs (6 + 2 pages): b then holds 2 of the 16.
        a.reset();
        for (int i = 0; i < 1000; ++i) {
            const json j = stats_of(b);
            if (j.contains("sessions") && j["sessions"].size() == 1) break;
            usleep(1000);
        }
        EXPECT_RC(out, "14 pages after the first session ended", reg_mr(b, pb, 0, 14 * kPage), 0);
        EXPECT_RC(out, "and not one more", reg_mr(b, pb, 0, kPage), ENOMEM);
        const json j = stats_of(b);
        if (!j.contains("sessions") || j["sessions"].size() != 1 || j["sessions"][0]["pinned_pages"] != 16)
            out << "Stats: " << j["sessions"] << "\n";
    });
    CHECK(problems == "");
    const json j = json::parse(rig.host->stats_json());
    CHECK(j["counters"]["host_memlock_refusals"] == 4);
    CHECK(j["sessions"].empty());
}

TEST_CASE("queues count against RLIMIT_MEMLOCK too, as mlx5's pinned queue buffers do") {
    Rig rig;
    chmod(rig.dir.c_str(), 0755);
    const std::string path = rig.host->socket_path();
    // nobody, 40 pages: a 32-page MR and small queues fit; big queues (rings and the engine's
    // copies of their WQEs) do not, and what a destroyed queue held is free again.
    const std::string problems = as_user(rig, kNobody, kNogroup, 40 * kPage, [&](std::ostream& out) {
        BlockingClient c(path);
        const uint32_t pd = prepare(c, out);
        EXPECT_RC(out, "a 32-page MR", reg_mr(c, pd, 0, 32 * kPage), 0);
        std::vector<uint8_t> body;
        EXPECT_RC(out, "a small CQ", c.call(Op::CreateCq, abi::CreateCqRequest{16, 0, 0, 0}, {}, &body), 0);
        const uint32_t cq = handle_of(body);
        EXPECT_RC(out, "a small QP", c.call(Op::CreateQp, rc_qp(pd, cq), {}, &body), 0);
        const uint32_t small_qpn = handle_of(body);
        abi::CreateQpRequest big = rc_qp(pd, cq);
        big.cap = {4096, 4096, 16, 16, 0};
        EXPECT_RC(out, "a QP of 4,096 WRs of 16 SGEs", c.call(Op::CreateQp, big), ENOMEM);
        EXPECT_RC(out, "a CQ of 65,536", c.call(Op::CreateCq, abi::CreateCqRequest{65536, 0, 0, 0}), ENOMEM);
        EXPECT_RC(out, "an SRQ of 8,192 WRs of 8 SGEs", c.call(Op::CreateSrq, abi::CreateSrqRequest{pd, 8192, 8, 0}),
                  ENOMEM);
        // The small queues hold at least a page each, so 8 more pages of MR do not fit beside them,
        EXPECT_RC(out, "8 pages of MR beside the queues", reg_mr(c, pd, 0, 8 * kPage), ENOMEM);
        EXPECT_RC(out, "DestroyQp", c.call(Op::DestroyQp, abi::HandleRequest{small_qpn, 0}), 0);
        EXPECT_RC(out, "DestroyCq", c.call(Op::DestroyCq, abi::HandleRequest{cq, 0}), 0);
        // and do once they are gone: 32 + 8 pages, the limit.
        EXPECT_RC(out, "8 pages of MR once they are gone", reg_mr(c, pd, 0, 8 * kPage), 0);
    });
    CHECK(problems == "");
    CHECK(json::parse(rig.host->stats_json())["counters"]["host_memlock_refusals"] == 4);
}

TEST_CASE("CAP_IPC_LOCK lifts RLIMIT_MEMLOCK, as in the kernel") {
    Rig rig;  // this process is root, with CAP_IPC_LOCK
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_MEMLOCK, &old) == 0);
    const rlimit tiny{kPage, old.rlim_max};
    REQUIRE(setrlimit(RLIMIT_MEMLOCK, &tiny) == 0);
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const uint32_t pd = alloc_pd(rig, c);
    SharedBuffer buf(32 * kPage);
    REQUIRE(rig.call(c, Op::ShareSegment, abi::ShareSegmentRequest{1, 0, buf.size}, {buf.fd}).header.status == 0);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    const uint64_t addr = reinterpret_cast<uint64_t>(buf.data);
    mr.req = {pd, 1, addr, buf.size, addr, 0, 1};
    mr.run = {1, 0, 0, buf.size};
    CHECK(rig.call(c, Op::RegMr, mr).header.status == 0);
    setrlimit(RLIMIT_MEMLOCK, &old);
    const json j = stats_of(rig, c);
    CHECK(j["sessions"][0]["pinned_pages"] == 32);
}

TEST_CASE("per-uid caps (--user-limit): EAGAIN past a uid's cap across its sessions, others unaffected") {
    Rig rig([](server::ServerConfig& sc) {
        sc.user_limits_default[Resource::Sessions] = 2;
        sc.user_limits_default[Resource::Pds] = 2;
        sc.user_limits_default[Resource::Cqs] = 2;
        sc.user_limits_default[Resource::Qps] = 2;
        sc.user_limits_default[Resource::Mrs] = 1;
        sc.user_limits_default[Resource::Srqs] = 1;
        sc.user_limits_default[Resource::Ahs] = 1;
        sc.user_limits[0] = server::UserLimits{};  // root: only the device's limits
    });
    auto s1 = connect_as(rig, 1000);
    auto s2 = connect_as(rig, 1000);
    {
        auto s3 = connect_as(rig, 1000, EAGAIN);  // hca_handle: ibv_open_device fails with EAGAIN
        CHECK(rig.wait_reply(*s3).eof);
    }
    auto other = connect_as(rig, 1001);  // another user has caps of its own

    const uint32_t pd = alloc_pd(rig, *s1);
    const uint32_t pd2 = alloc_pd(rig, *s2);  // the uid's second, in another session
    alloc_pd(rig, *s1, EAGAIN);
    alloc_pd(rig, *other);
    const uint32_t cq = create(rig, *s1, Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
    create(rig, *s1, Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
    create(rig, *s1, Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0}, EAGAIN);
    Reply q1 = rig.call(*s1, Op::CreateQp, rc_qp(pd, cq));
    REQUIRE(q1.header.status == 0);
    CHECK(rig.call(*s1, Op::CreateQp, rc_qp(pd, cq)).header.status == 0);
    CHECK(rig.call(*s1, Op::CreateQp, rc_qp(pd, cq)).header.status == EAGAIN);
    CHECK(rig.call(*s1, Op::DestroyQp, abi::HandleRequest{q1.as<abi::CreateQpReply>().qpn, 0}).header.status == 0);
    CHECK(rig.call(*s1, Op::CreateQp, rc_qp(pd, cq)).header.status == 0);  // a destroyed QP no longer counts
    create(rig, *s1, Op::CreateSrq, abi::CreateSrqRequest{pd, 8, 1, 0});
    create(rig, *s1, Op::CreateSrq, abi::CreateSrqRequest{pd, 8, 1, 0}, EAGAIN);
    abi::CreateAhRequest ah{};
    ah.pd = pd;
    std::memcpy(ah.av.dgid, wire::Gid::from_ipv4(port::test::kSelf.ipv4).raw.data(), 16);
    create(rig, *s1, Op::CreateAh, ah);
    create(rig, *s1, Op::CreateAh, ah, EAGAIN);
    SharedBuffer buf(2 * kPage);
    REQUIRE(rig.call(*s1, Op::ShareSegment, abi::ShareSegmentRequest{1, 0, buf.size}, {buf.fd}).header.status == 0);
    struct {
        abi::RegMrRequest req;
        abi::SegmentRun run;
    } mr{};
    const uint64_t addr = reinterpret_cast<uint64_t>(buf.data);
    mr.req = {pd, 1, addr, kPage, addr, 0, 1};
    mr.run = {1, 0, 0, kPage};
    CHECK(rig.call(*s1, Op::RegMr, mr).header.status == 0);
    CHECK(rig.call(*s1, Op::RegMr, mr).header.status == EAGAIN);

    json j = stats_of(rig, *s1);
    REQUIRE(j["users"].size() == 1);  // only its own
    const json held = {{"sessions", 2}, {"pds", 2},  {"mrs", 1}, {"cqs", 2},
                       {"qps", 2},      {"srqs", 1}, {"ahs", 1}, {"cm_ids", 0}};
    CHECK(j["users"][0]["uid"] == 1000);
    CHECK(j["users"][0]["held"] == held);
    CHECK(j["users"][0]["max"]["qps"] == 2);
    CHECK(j["counters"]["host_user_limit_refusals"] == 7);

    // root's own entry: nothing but the device's limits.
    RawClient root(rig.host->socket_path());
    REQUIRE(rig.hello(root).header.status == 0);
    for (int i = 0; i < 3; ++i) alloc_pd(rig, root);
    j = stats_of(rig, root);
    CHECK(j["users"].size() == 3);
    CHECK(j["users"][0]["uid"] == 0);
    CHECK(j["users"][0]["max"]["pds"] == "max");

    // The first session's end gives back everything it held.
    s1.reset();
    for (int i = 0; i < 100 && rig.host->session_count() > 3; ++i) rig.turn();
    j = stats_of(rig, *s2);
    const json left = {{"sessions", 1}, {"pds", 1},  {"mrs", 0}, {"cqs", 0},
                       {"qps", 0},      {"srqs", 0}, {"ahs", 0}, {"cm_ids", 0}};
    CHECK(j["users"][0]["held"] == left);
    auto again = connect_as(rig, 1000);
    alloc_pd(rig, *again);
    CHECK(rig.call(*s2, Op::DeallocPd, abi::HandleRequest{pd2, 0}).header.status == 0);
}

TEST_CASE("Stats: a user sees their own sessions and QPs, root everything, and only root sets the log level") {
    Rig rig;
    RawClient root(rig.host->socket_path());
    REQUIRE(rig.hello(root).header.status == 0);
    auto user = connect_as(rig, 1000);
    uint32_t qpn[2] = {};
    RawClient* clients[2] = {&root, user.get()};
    for (int i = 0; i < 2; ++i) {
        const uint32_t pd = alloc_pd(rig, *clients[i]);
        const uint32_t cq = create(rig, *clients[i], Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
        Reply qp = rig.call(*clients[i], Op::CreateQp, rc_qp(pd, cq));
        REQUIRE(qp.header.status == 0);
        qpn[i] = qp.as<abi::CreateQpReply>().qpn;
    }
    json j = stats_of(rig, *user);
    REQUIRE(j["sessions"].size() == 1);
    CHECK(j["sessions"][0]["uid"] == 1000);
    REQUIRE(j["qps"].size() == 1);
    CHECK(j["qps"][0]["qpn"] == qpn[1]);
    CHECK(j["objects"]["qps"] == 2);  // the device's totals are everyone's
    CHECK(j["objects"]["sessions"] == 2);
    j = stats_of(rig, root);
    CHECK(j["sessions"].size() == 2);
    CHECK(j["qps"].size() == 2);
    CHECK(j["users"].size() == 2);

    const auto old_level = spdlog::get_level();
    abi::SetLogLevelRequest level{};
    std::strcpy(level.level, "trace");
    CHECK(rig.call(*user, Op::SetLogLevel, level).header.status == EPERM);
    CHECK(spdlog::get_level() == old_level);
    CHECK(rig.call(root, Op::SetLogLevel, level).header.status == 0);
    CHECK(spdlog::get_level() == spdlog::level::trace);
    spdlog::set_level(old_level);
}

TEST_CASE("a session whose peer hung up while its reply waited for ARP does not hold the uid's sessions cap") {
    Rig rig([](server::ServerConfig& sc) { sc.user_limits_default[Resource::Sessions] = 1; });
    auto a = connect_as(rig, 1000);
    abi::CreateAhRequest ah{};
    ah.pd = alloc_pd(rig, *a);
    std::memcpy(ah.av.dgid, wire::Gid::from_ipv4(port::test::kPeerIp).raw.data(), 16);
    a->send(Op::CreateAh, &ah, sizeof ah);
    for (int i = 0; i < 5; ++i) rig.turn();
    CHECK_FALSE(a->try_receive());  // waiting for ARP: the daemon does not read a's socket meanwhile
    a->close_now();
    for (int i = 0; i < 5; ++i) rig.turn();
    CHECK(rig.host->session_count() == 1);  // its EOF is still unread
    auto b = connect_as(rig, 1000);         // served: the hung-up session is reclaimed first
    CHECK(rig.host->session_count() == 1);
    const json j = stats_of(rig, *b);
    CHECK(j["users"][0]["held"]["sessions"] == 1);
    CHECK(j["users"][0]["held"]["pds"] == 0);
    CHECK(j["counters"]["host_sessions_refused"] == 0);
}
