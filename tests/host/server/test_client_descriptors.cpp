// What a client can do to the descriptors it shares with the daemon: read its kick eventfd,
// clear O_NONBLOCK on it and take its own kicks back, fill a notification socket and clear
// O_NONBLOCK on the daemon's end of it, shut it down. None of it may make the daemon block or
// sleep through another session's doorbell.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>

#include "client_session.hpp"
#include "notify_socket.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;
using Clock = std::chrono::steady_clock;

namespace {

// Runs `work` (the daemon's part) on another thread. A daemon blocked on a client's descriptor
// never comes back: that is a failure, reported, and the test process ends (the blocked thread
// cannot be joined or abandoned safely).
template <class Work>
void must_return(const char* what, std::chrono::seconds limit, Work work) {
    auto done = std::async(std::launch::async, std::move(work));
    if (done.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "FAILED: %s did not return within %lld s: it blocked\n", what,
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(1);
    }
    done.get();
}

void turns_must_finish(Rig& rig, int turns) {
    must_return("the daemon's turn", std::chrono::seconds(10), [&rig, turns] {
        for (int i = 0; i < turns; ++i) rig.turn(10'000);
    });
}

// Fills the stream socket `fd` until a send would block.
size_t fill(int fd) {
    static const std::vector<char> chunk(64 * 1024, 'x');
    size_t total = 0;
    for (;;) {
        const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) break;
        total += static_cast<size_t>(n);
    }
    return total;
}

void set_blocking(int fd) {
    const int flags = fcntl(fd, F_GETFL);
    REQUIRE(flags >= 0);
    REQUIRE(fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0);
}

uint64_t counter(Rig& rig, const char* name) {
    return nlohmann::json::parse(rig.host->stats_json())["counters"][name].get<uint64_t>();
}

}  // namespace

TEST_CASE("a client reading its kick descriptor cannot make the daemon sleep through another's doorbell") {
    Rig rig;
    ClientSession victim(rig);
    ClientSession eater(rig);
    ClientQp qp = victim.create_qp();
    victim.connect(qp.qpn, qp.qpn, kOwnGid);
    for (int i = 0; i < 5; ++i) rig.turn();

    REQUIRE(rig.host->begin_nap());  // sleeping = 1, nothing pending
    // The victim rings a doorbell after the daemon's last scan, sees `sleeping`, and kicks.
    victim.post_recv(qp, 1, reinterpret_cast<uint64_t>(victim.buf.data), 64);
    REQUIRE(rig.host->status().sleeping.load() == 1);
    const uint64_t one = 1;
    REQUIRE(write(victim.kick_fd, &one, sizeof one) == sizeof one);
    // The other client reads the kick eventfd it was given: with one eventfd for every session
    // (ABI 2) this ate the victim's kick. Its own has nothing to give.
    pollfd p{eater.kick_fd, POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 0);
    uint64_t count = 0;
    CHECK(read(eater.kick_fd, &count, sizeof count) == -1);
    CHECK(errno == EAGAIN);

    const auto t0 = Clock::now();
    CHECK(rig.host->nap(2'000'000'000) == server::NapEnd::Kick);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(counter(rig, "host_kicks") == 1);
    rig.turn();
    CHECK(qp.rq.header().consumer.load() == 1);  // the doorbell was served
}

TEST_CASE("the daemon's read of a kick eventfd never waits, whatever the client did to it") {
    // The kick eventfd's file description is the client's too: it can clear O_NONBLOCK and take
    // the count between the readiness the daemon saw and the daemon's read.
    REQUIRE(server::kick_reads_never_wait());
    int fd = -1;
    REQUIRE(server::make_kick(fd) == 0);
    set_blocking(fd);
    int taken = -1;
    must_return("reading an empty blocking kick eventfd", std::chrono::seconds(5),
                [fd, &taken] { taken = server::take_kick(fd); });
    CHECK(taken == 0);
    const uint64_t one = 1;
    REQUIRE(write(fd, &one, sizeof one) == sizeof one);
    CHECK(server::take_kick(fd) == 1);
    CHECK(server::take_kick(fd) == 0);
    close(fd);

    // And a session whose client made its kick eventfd blocking still wakes the daemon.
    Rig rig;
    ClientSession s(rig);
    set_blocking(s.kick_fd);
    for (int i = 0; i < 5; ++i) rig.turn();
    REQUIRE(write(s.kick_fd, &one, sizeof one) == sizeof one);
    server::NapEnd end = server::NapEnd::Timer;
    must_return("a nap ended by a kick", std::chrono::seconds(10),
                [&rig, &end] { end = rig.host->sleep(2'000'000'000); });
    CHECK(end == server::NapEnd::Kick);
    CHECK(counter(rig, "host_kicks") == 1);
}

TEST_CASE("full notification sockets whose O_NONBLOCK the client cleared do not block the daemon") {
    Rig rig;
    ClientSession s(rig);
    ClientQp a = s.create_qp();
    ClientQp b = s.create_qp();
    s.connect_pair(a, b, kOwnGid);
    RawClient other_client(rig.host->socket_path());
    REQUIRE(rig.hello(other_client).header.status == 0);

    const bool shut_down = GENERATE(false, true);
    INFO((shut_down ? "the client also shut the daemon's ends down" : "full, blocking"));
    // The client holds the daemon's end of each notification socket (for its own wake-ups), so
    // it can change that open file description's flags: blocking, and no room left.
    for (int daemon_end : {s.channel_wake_fd, s.async_wake_fd}) {
        CHECK(fill(daemon_end) > 0);
        set_blocking(daemon_end);
        if (shut_down) REQUIRE(shutdown(daemon_end, SHUT_RDWR) == 0);
    }

    // A completion event for the armed CQ and an async event (a corrupt ring: QP_FATAL) both
    // make the daemon notify.
    s.cq.ring.header().arm.store(abi::kArmNext);
    s.post_send(a, 7, /*IBV_WR_RDMA_WRITE*/ 0, reinterpret_cast<uint64_t>(s.buf.data), 8, /*SIGNALED*/ 2,
                reinterpret_cast<uint64_t>(s.buf.data) + 4096);
    turns_must_finish(rig, 200);
    CHECK(s.cq.ring.header().events.load() == 1);
    b.sq.header().producer.store(b.reply.sq_size + 5);
    s.ring(b);
    turns_must_finish(rig, 20);
    uint32_t consumed = 0;
    const auto events = s.async_events(consumed);
    REQUIRE(events.size() == 1);
    CHECK(events[0].object == b.qpn);
    CHECK(counter(rig, "host_cq_events") == 1);
    CHECK(counter(rig, "host_async_events") == 1);
    // The client's own ends stay readable (the queue is full), so its events are not lost on it.
    if (!shut_down) {
        char c;
        CHECK(recv(s.channel_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 1);
        CHECK(recv(s.async_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 1);
    }
    // And the daemon answers everyone as before.
    CHECK(rig.call(other_client, Op::QueryPort, nullptr, 0).header.status == 0);
}
