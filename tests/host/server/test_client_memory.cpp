// What a client can do to the memory it shares with the daemon: shrink a registered segment under
// the engine, resize or reseal a ring, write the status page. None of it may kill or stall rnicd
// (here the test process itself: a SIGBUS in the daemon's code ends the test run).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "client_session.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

constexpr uint32_t kPage = 4096;
constexpr uint8_t kWrSend = 2, kWrWrite = 0, kWrRead = 4;
constexpr uint32_t kSignaled = 2;
constexpr uint8_t kWcSuccess = 0, kWcLocProtErr = 4, kWcRemAccessErr = 10;

// The application's buffer behind a victim MR, in one of the ways it can reach the daemon.
enum class Backing { UnsealableMemfd, SharedFile };

struct VictimBuffer {
    VictimBuffer(Backing backing, const std::string& dir, size_t pages) : size(pages * kPage) {
        if (backing == Backing::UnsealableMemfd) {
            fd = memfd_create("victim", MFD_CLOEXEC);  // an older client, or a raw one
        } else {
            // A MAP_SHARED file, which the client library shares through /proc/self/map_files:
            // the daemon gets the file itself and cannot seal it.
            const std::string path = dir + "/victim";
            fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        }
        REQUIRE(fd >= 0);
        REQUIRE(ftruncate(fd, static_cast<off_t>(size)) == 0);
        void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(p != MAP_FAILED);
        data = static_cast<uint8_t*>(p);
    }
    ~VictimBuffer() {
        munmap(data, size);
        close(fd);
    }
    int fd = -1;
    size_t size = 0;
    uint8_t* data = nullptr;
};

nlohmann::json stats(Rig& rig) {
    return nlohmann::json::parse(rig.host->stats_json());
}

abi::SendWqe wqe(uint64_t wr_id, uint8_t opcode, uint64_t remote = 0, uint32_t rkey = 0) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = kSignaled;
    w.remote_addr = remote;
    w.rkey = rkey;
    return w;
}

struct Pair {
    ClientQp a, b;
};

Pair connected_pair(ClientSession& s) {
    Pair p{s.create_qp(), s.create_qp()};
    s.connect(p.a.qpn, p.b.qpn, kOwnGid);
    s.connect(p.b.qpn, p.a.qpn, kOwnGid);
    return p;
}

// CQEs of the session's CQ by wr_id, polled as needed (the QPs share the CQ).
struct Completions {
    ClientSession& s;
    std::map<uint64_t, abi::Cqe> got;
    abi::Cqe of(uint64_t wr_id) {
        for (int round = 0; round < 20 && !got.count(wr_id); ++round)
            for (const abi::Cqe& c : s.wait_cqes(1)) got.emplace(c.wr_id, c);
        if (!got.count(wr_id)) FAIL("no completion for wr_id " << wr_id);
        return got.at(wr_id);
    }
};

}  // namespace

TEST_CASE("a registered segment shrunk by its client: WRITE and READ into the lost pages fail, rnicd goes on") {
    const Backing backing = GENERATE(Backing::UnsealableMemfd, Backing::SharedFile);
    INFO((backing == Backing::UnsealableMemfd ? "a memfd without MFD_ALLOW_SEALING" : "a MAP_SHARED file"));
    Rig rig;
    ClientSession s(rig);
    VictimBuffer victim(backing, rig.dir, 4);
    const MrKeys v = s.register_file(victim.fd, victim.size, 8, victim.data);
    const auto before = stats(rig);
    CHECK(before["sessions"][0]["segments"] == 2);
    CHECK(before["sessions"][0]["segments_unsealed"] == 1);  // the victim; the library-style buffer is sealed

    Pair w = connected_pair(s);
    Pair r = connected_pair(s);
    Pair l = connected_pair(s);
    Pair other = connected_pair(s);
    Completions done{s, {}};
    const auto base = reinterpret_cast<uint64_t>(s.buf.data);
    const auto lost = reinterpret_cast<uint64_t>(victim.data) + 2 * kPage;

    // Before the shrink the victim is ordinary memory.
    std::memcpy(s.buf.data, "before", 6);
    s.post(w.a, wqe(1, kWrWrite, lost, v.rkey), abi::Sge{base, 6, s.lkey});
    CHECK(done.of(1).status == kWcSuccess);
    CHECK(std::memcmp(victim.data + 2 * kPage, "before", 6) == 0);

    REQUIRE(ftruncate(victim.fd, kPage) == 0);

    // Responder side: the WRITE's payload lands in a lost page, the READ's response comes from
    // one. Both are a remote access error NAK to the requester.
    s.post(w.a, wqe(2, kWrWrite, lost, v.rkey), abi::Sge{base, 64, s.lkey});
    CHECK(done.of(2).status == kWcRemAccessErr);
    const uint64_t read_posted = rig.now;
    s.post(r.a, wqe(3, kWrRead, lost + 100, v.rkey), abi::Sge{base + kPage, 2000, s.lkey});
    CHECK(done.of(3).status == kWcRemAccessErr);
    CHECK(rig.now - read_posted < 1'000'000);  // NAKed at once, not after a retransmission timeout
    // Requester side: a SEND gathering from a lost page is a local protection error.
    s.post_recv(l.b, 40, base + 2 * kPage, 64);
    s.post(l.a, wqe(4, kWrSend), abi::Sge{lost, 64, v.lkey});
    CHECK(done.of(4).status == kWcLocProtErr);

    const auto after = stats(rig);
    CHECK(after["counters"]["remote_access_fault"] == 2);
    CHECK(after["counters"]["local_access_fault"] == 1);

    // The page the file kept, and every other QP, work as before.
    s.post(other.a, wqe(5, kWrWrite, reinterpret_cast<uint64_t>(victim.data) + 8, v.rkey), abi::Sge{base, 6, s.lkey});
    CHECK(done.of(5).status == kWcSuccess);
    CHECK(std::memcmp(victim.data + 8, "before", 6) == 0);
    std::memcpy(s.buf.data + 3 * kPage, "still here", 10);
    s.post_recv(other.b, 50, base + 3 * kPage + 100, 64);
    s.post(other.a, wqe(6, kWrSend), abi::Sge{base + 3 * kPage, 10, s.lkey});
    CHECK(done.of(6).status == kWcSuccess);
    CHECK(done.of(50).status == kWcSuccess);
    CHECK(std::memcmp(s.buf.data + 3 * kPage + 100, "still here", 10) == 0);
}

TEST_CASE("a memfd made with MFD_ALLOW_SEALING is sealed against shrinking once shared") {
    Rig rig;
    ClientSession s(rig);
    SharedBuffer sealable(4 * kPage);
    s.register_file(sealable.fd, sealable.size, 8, sealable.data);
    const int seals = fcntl(sealable.fd, F_GET_SEALS);
    CHECK((seals & F_SEAL_SHRINK) != 0);
    CHECK((seals & F_SEAL_SEAL) == 0);  // nothing more than the daemon needs
    CHECK(ftruncate(sealable.fd, kPage) == -1);
    CHECK(errno == EPERM);
    CHECK(ftruncate(sealable.fd, 8 * kPage) == 0);  // growing hurts nobody
    const auto doc = stats(rig);
    CHECK(doc["sessions"][0]["segments"] == 2);
    CHECK(doc["sessions"][0]["segments_unsealed"] == 0);
}

TEST_CASE("ring memfds cannot be resized or resealed by the client") {
    Rig rig;
    ClientSession s(rig);
    Reply cq = rig.call(s.c, Op::CreateCq, abi::CreateCqRequest{16, 0, 0, 0});
    REQUIRE(cq.header.status == 0);
    Reply srq = rig.call(s.c, Op::CreateSrq, abi::CreateSrqRequest{s.pd, 16, 1, 0});
    REQUIRE(srq.header.status == 0);
    abi::CreateQpRequest q{};
    q.qp_type = 2;
    q.pd = s.pd;
    q.send_cq = q.recv_cq = cq.as<abi::CreateCqReply>().handle;
    q.cap = {8, 8, 1, 1, 0};
    Reply qp = rig.call(s.c, Op::CreateQp, q);
    REQUIRE(qp.header.status == 0);
    RawClient other(rig.host->socket_path());
    Reply hello = rig.hello(other);
    REQUIRE(hello.header.status == 0);

    const std::pair<const char*, int> rings[] = {
        {"CQ", cq.fds.at(0)}, {"SRQ", srq.fds.at(0)}, {"QP", qp.fds.at(0)}, {"async", hello.fds.at(2)}};
    for (const auto& [what, fd] : rings) {
        INFO(what << " ring");
        struct stat st {};
        REQUIRE(fstat(fd, &st) == 0);
        CHECK(ftruncate(fd, 0) == -1);
        CHECK(errno == EPERM);
        CHECK(ftruncate(fd, st.st_size + kPage) == -1);
        CHECK(errno == EPERM);
        CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == -1);
        CHECK(errno == EPERM);
        CHECK(fcntl(fd, F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
        // Still the client's to write: the rings are read-write for it.
        void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(p != MAP_FAILED);
        if (p != MAP_FAILED) munmap(p, static_cast<size_t>(st.st_size));
    }
    // And the daemon still serves the rings it made.
    Pair p = connected_pair(s);
    Completions done{s, {}};
    s.post_send(p.a, 9, kWrWrite, reinterpret_cast<uint64_t>(s.buf.data), 8, kSignaled,
                reinterpret_cast<uint64_t>(s.buf.data) + kPage);
    CHECK(done.of(9).status == kWcSuccess);
}

TEST_CASE("the status page cannot be written by a client, however it asks") {
    Rig rig;
    ClientSession s(rig);
    const int fd = s.status_fd;
    const size_t size = kPage;
    CHECK(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    CHECK(errno == EPERM);
    void* ro = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(ro != MAP_FAILED);
    CHECK(mprotect(ro, size, PROT_READ | PROT_WRITE) == -1);
    CHECK(errno == EACCES);
    const uint32_t zero = 0;
    CHECK(pwrite(fd, &zero, sizeof zero, 0) == -1);
    CHECK(errno == EPERM);
    CHECK(ftruncate(fd, 0) == -1);
    CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == -1);
    // A new open file description of the same memfd carries the same seals.
    const int again = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(again >= 0);
    CHECK(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0) == MAP_FAILED);
    CHECK(pwrite(again, &zero, sizeof zero, 0) == -1);
    close(again);

    // The daemon's own mapping still writes it, and the client sees that.
    const auto* page = static_cast<const abi::StatusPage*>(ro);
    REQUIRE(rig.host->begin_nap());
    CHECK(page->sleeping.load() == 1);
    rig.host->cancel_nap();
    CHECK(page->sleeping.load() == 0);
    munmap(ro, size);
}
