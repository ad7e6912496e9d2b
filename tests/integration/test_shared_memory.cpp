// A client that takes away the memory behind its own MRs, against a real rnicd: the memfds the
// client library made cannot shrink any more, and a MAP_SHARED file that can (the daemon maps
// the file itself, through /proc/self/map_files) costs the accesses to its lost pages an error
// completion, not the daemon its life (it used to die of SIGBUS, exit 135).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bed.hpp"

using namespace rnic::itest;
namespace hc = rnic::host::client;

namespace {

constexpr size_t kPage = 4096;

// The descriptors of this process whose target starts with `prefix` (/proc/self/fd).
std::vector<int> fds_named(const std::string& prefix) {
    std::vector<int> out;
    DIR* d = opendir("/proc/self/fd");
    REQUIRE(d != nullptr);
    while (const dirent* e = readdir(d)) {
        char target[256];
        const std::string link = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
        if (n > 0 && std::string(target, static_cast<size_t>(n)).rfind(prefix, 0) == 0)
            out.push_back(std::atoi(e->d_name));
    }
    closedir(d);
    return out;
}

pid_t daemon_pid(hc::Connection& conn) {
    auto text = conn.stats();
    REQUIRE(text.ok());
    return nlohmann::json::parse(*text).at("device").at("pid").get<pid_t>();
}

// A QP of `s` connected to itself (frames loop back inside the daemon).
hc::Qp* self_connected(Side& s) {
    hc::Qp* qp = create_qp(s, QpOptions{});
    bring_up(s, qp, qp->qpn, s.self_av, QpOptions{});
    return qp;
}

// Two QPs of `s` connected to each other, so requester and responder are distinct QPs.
QpPair looped_pair(Side& s) {
    const QpPair p{create_qp(s, QpOptions{}), create_qp(s, QpOptions{})};
    bring_up(s, p.a, p.b->qpn, s.self_av, QpOptions{});
    bring_up(s, p.b, p.a->qpn, s.self_av, QpOptions{});
    return p;
}

}  // namespace

TEST_CASE("A client shrinks the memory behind its MRs: its accesses fail, rnicd and other QPs go on", "[shrink]") {
    const auto env = bed_env();
    auto a = open_side(env.at("sock_a"), 4 * kPage);
    auto b = open_side(env.at("sock_b"), 4 * kPage);
    const pid_t pid = daemon_pid(*a->conn);

    // The library's memfds (the heap buffer open_side registered): sealed by the daemon.
    const std::vector<int> memfds = fds_named("/memfd:rnic-mr");
    REQUIRE(!memfds.empty());
    for (int fd : memfds) {
        INFO("fd " << fd);
        CHECK(ftruncate(fd, 0) == -1);
        CHECK(errno == EPERM);
    }

    // A MAP_SHARED file: the daemon maps the file itself and cannot seal it.
    char path[] = "/tmp/rnic-shrink-XXXXXX";
    const int file = mkstemp(path);
    REQUIRE(file >= 0);
    REQUIRE(ftruncate(file, 4 * kPage) == 0);
    auto* shared = static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0));
    REQUIRE(shared != MAP_FAILED);
    auto mr = a->conn->reg_mr(a->pd, shared, 4 * kPage,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    INFO("reg_mr errno " << mr.error());
    REQUIRE(mr.ok());
    bool found = false;
    for (const SessionObjects& s : sessions(*a->conn))
        if (s.pid == static_cast<uint64_t>(getpid())) {
            found = true;
            CHECK(s.segments_unsealed == 1);
        }
    CHECK(found);

    hc::Qp* self = self_connected(*a);
    const QpPair writer = looped_pair(*a);
    const QpPair reader = looped_pair(*a);
    hc::Qp* other = self_connected(*a);
    const QpPair across = connect_pair(*a, *b, QpOptions{});
    const auto before = counters(*a->conn);
    const auto lost = reinterpret_cast<uintptr_t>(shared + 2 * kPage);

    REQUIRE(ftruncate(file, kPage) == 0);
    // The reproducer: an RDMA WRITE into the lost pages over a QP connected to itself. It
    // completes in error; as its own responder the QP went to the error state on the access
    // error (as rxe's responder does), which may flush the WQE before the NAK completes it.
    REQUIRE(post_send(*a, self, IBV_WR_RDMA_WRITE, 1, a->buf->data, 64, lost, (*mr)->rkey) == 0);
    auto w = wait_completions(*a, 1);
    REQUIRE(w.size() == 1);
    CHECK((w[0].status == IBV_WC_REM_ACCESS_ERR || w[0].status == IBV_WC_WR_FLUSH_ERR));
    // Requester and responder apart: the responder's NAK is what completes the WRITE and READ.
    REQUIRE(post_send(*a, writer.a, IBV_WR_RDMA_WRITE, 2, a->buf->data, 64, lost, (*mr)->rkey) == 0);
    w = wait_completions(*a, 1);
    REQUIRE(w.size() == 1);
    CHECK(w[0].wr_id == 2);
    CHECK(w[0].status == IBV_WC_REM_ACCESS_ERR);
    REQUIRE(post_send(*a, reader.a, IBV_WR_RDMA_READ, 3, a->buf->data, 2000, lost + 100, (*mr)->rkey) == 0);
    w = wait_completions(*a, 1);
    REQUIRE(w.size() == 1);
    CHECK(w[0].wr_id == 3);
    CHECK(w[0].status == IBV_WC_REM_ACCESS_ERR);

    // rnicd is the same process, alive, and counted both.
    CHECK(daemon_pid(*a->conn) == pid);
    CHECK(kill(pid, 0) == 0);
    const auto after = counters(*a->conn);
    CHECK(after.at("remote_access_fault") == before.at("remote_access_fault") + 3);

    // The page the file kept, the library's memory and the wire all still work.
    std::memcpy(a->buf->data, "still fine", 10);
    REQUIRE(post_send(*a, other, IBV_WR_RDMA_WRITE, 4, a->buf->data, 10, reinterpret_cast<uintptr_t>(shared + 8),
                      (*mr)->rkey) == 0);
    w = wait_completions(*a, 1);
    REQUIRE(w.size() == 1);
    CHECK(w[0].status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(shared + 8, "still fine", 10) == 0);
    REQUIRE(post_send(*a, across.a, IBV_WR_RDMA_WRITE, 5, a->buf->data, 10, reinterpret_cast<uintptr_t>(b->buf->data),
                      b->mr->rkey) == 0);
    w = wait_completions(*a, 1);
    REQUIRE(w.size() == 1);
    CHECK(w[0].status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(b->buf->data, "still fine", 10) == 0);

    CHECK(a->conn->dereg_mr(*mr) == 0);
    munmap(shared, 4 * kPage);
    close(file);
    unlink(path);
}
