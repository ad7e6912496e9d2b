// rnicctl against the in-test daemon listening in a temporary run directory.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "fake_daemon.hpp"

namespace {

const char* kStats = R"({"device":{"name":"rnic0","pid":4242,"mac":"02:00:00:00:00:01","ipv4":"10.9.0.1/24",
 "port_state":"ACTIVE","active_mtu":1024,"max_mtu":4096,
 "gids":[{"index":0,"gid":"fe80::1","type":"RoCE v2"},{"index":1,"gid":"::ffff:10.9.0.1","type":"RoCE v2"}]},
 "counters":{"rx_packets":12,"retransmits":3},
 "caches":{"mtt_cache_hits":100,"mtt_cache_misses":7},
 "sessions":[{"id":1,"pid":77,"uid":0,"pds":1,"mrs":2,"cqs":1,"qps":1,"srqs":0,"ahs":0,"channels":1,"segments":3}],
 "objects":{"sessions":1,"pds":1,"mrs":2,"cqs":1,"qps":1,"srqs":0,"ahs":0,"channels":1,"segments":3},
 "qps":[{"qpn":17,"type":"RC","state":"RTS","session":1,"pid":77,"sq_psn":100,"sq_una_psn":98,"rq_psn":200,"dest_qpn":18,
         "path_mtu":1024,"counters":{"retransmits":3}}],
 "log_level":"info"})";

struct Run {
    int status;
    std::string out;
};

Run rnicctl(const std::string& args) {
    const std::string cmd = std::string(RNICCTL_PATH) + " " + args + " 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// Serves `connections` clients one after the other, each by its own FakeDaemon.
struct ListeningDaemon {
    std::string dir;
    int listener = -1;
    std::thread thread;
    explicit ListeningDaemon(int connections) {
        char tmpl[] = "/tmp/rnicctl-test-XXXXXX";
        REQUIRE(mkdtemp(tmpl) != nullptr);
        dir = tmpl;
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        const std::string path = dir + "/rnic0.sock";
        std::strcpy(a.sun_path, path.c_str());
        listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(listener, 4) == 0);
        thread = std::thread([this, connections] {
            for (int i = 0; i < connections; ++i) {
                const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
                if (fd < 0) return;
                auto d = std::make_unique<rnic::test::FakeDaemon>(fd, kStats);
                // Wait for the client to hang up: recv on a dup would race the daemon thread, so
                // poll for the hang-up instead.
                pollfd p{fd, POLLRDHUP, 0};
                poll(&p, 1, 5000);
            }
        });
    }
    ~ListeningDaemon() {
        shutdown(listener, SHUT_RDWR);  // a failed test leaves accept() waiting otherwise
        thread.join();
        close(listener);
        unlink((dir + "/rnic0.sock").c_str());
        rmdir(dir.c_str());
    }
};

}  // namespace

TEST_CASE("rnicctl formats the daemon's statistics") {
    ListeningDaemon d(10);
    const std::string base = "--run-dir " + d.dir + " ";

    Run r = rnicctl(base + "dev");
    REQUIRE(r.status == 0);
    REQUIRE(
        r.out.find("rnic0: port 1 state ACTIVE active_mtu 1024 max_mtu 4096 mac 02:00:00:00:00:01 ipv4 10.9.0.1/24") !=
        std::string::npos);

    r = rnicctl(base + "-d rnic0 qp");
    REQUIRE(r.status == 0);
    REQUIRE(
        r.out ==
        "link rnic0/1 lqpn 17 type RC state RTS sq-psn 100 sq-una-psn 98 rq-psn 200 rqpn 18 path-mtu 1024 pid 77\n");

    r = rnicctl(base + "gid");
    REQUIRE(r.out.find("link rnic0/1 gid 1 ::ffff:10.9.0.1 RoCE v2") != std::string::npos);

    r = rnicctl(base + "stat qp 17");
    REQUIRE(r.status == 0);
    REQUIRE(r.out == "link rnic0/1 lqpn 17\n    retransmits 3\n");

    r = rnicctl(base + "cache");
    REQUIRE(r.out == "mtt_cache_hits 100\nmtt_cache_misses 7\n");

    r = rnicctl(base + "session");
    REQUIRE(r.out ==
            "dev rnic0 sessions 1 pds 1 mrs 2 cqs 1 qps 1 srqs 0 ahs 0 channels 1 segments 3\n"
            "session 1 pid 77 uid 0 pds 1 mrs 2 cqs 1 qps 1 srqs 0 ahs 0 channels 1 segments 3\n");

    r = rnicctl(base + "--json session");
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("\"objects\": {") != std::string::npos);
    REQUIRE(r.out.find("\"segments\": 3") != std::string::npos);

    r = rnicctl(base + "--json stat");
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("\"retransmits\": 3") != std::string::npos);

    r = rnicctl(base + "log-level debug");
    REQUIRE(r.status == 0);

    // The daemon's EINVAL is a usage error, and says which levels there are.
    const std::string cmd = std::string(RNICCTL_PATH) + " " + base + "log-level loud 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char line[256] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    const int st = pclose(p);
    CHECK(got);
    CHECK(std::string(line) == "rnicctl: log-level: unknown level 'loud' (trace debug info warn err critical off)\n");
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 2));
}

TEST_CASE("rnicctl: no daemon is exit 1, bad usage exit 2") {
    char tmpl[] = "/tmp/rnicctl-none-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    const std::string base = std::string("--run-dir ") + tmpl + " ";
    REQUIRE(rnicctl(base + "qp").status == 1);
    REQUIRE(rnicctl(base + "dev").status == 1);
    REQUIRE(rnicctl(base + "frobnicate").status == 2);
    REQUIRE(rnicctl(base + "stat qp x").status == 2);
    // cc set checks its words before it looks for a daemon.
    REQUIRE(rnicctl(base + "cc set").status == 2);
    REQUIRE(rnicctl(base + "cc set rp_ai_rate").status == 2);
    REQUIRE(rnicctl(base + "cc set rp_ai_rate=x").status == 2);
    REQUIRE(rnicctl(base + "cc set rp_ai_rate=5").status == 1);  // well formed: no daemon
    REQUIRE(rnicctl("").status == 2);
    rmdir(tmpl);
}
