// One client pipelining control messages as fast as the daemon answers must not hold the poll
// loop inside the control handlers: poll_control() serves a bounded number of messages per call
// (the loop's doorbells and frames wait for it to return), one per session in turn, so another
// session's request is answered within a call or two of arriving.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "raw_client.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;
using abi::Op;

namespace {

uint64_t control_messages(Rig& rig) {
    return nlohmann::json::parse(rig.host->stats_json())["counters"]["host_control_messages"].get<uint64_t>();
}

}  // namespace

TEST_CASE("a control-message flood from one session cannot monopolise the loop") {
    Rig rig;
    RawClient flooder(rig.host->socket_path());
    RawClient other(rig.host->socket_path());
    REQUIRE(rig.hello(flooder).header.status == 0);
    REQUIRE(rig.hello(other).header.status == 0);

    // The flood: 64 QueryPort requests in flight, one more sent for each reply read, until told
    // to stop or 200000 were sent.
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> answered{0};
    std::thread flood([&, fd = flooder.fd()] {
        constexpr uint64_t kWindow = 64, kMax = 200000;
        const abi::MessageHeader h{abi::kMagic, abi::kAbiVersion, uint16_t(Op::QueryPort), 1, sizeof h, 0, 0};
        std::vector<uint8_t> in(abi::kMaxMessage);
        uint64_t sent = 0;
        while (!stop.load()) {
            while (sent < kMax && sent - answered.load() < kWindow && send(fd, &h, sizeof h, MSG_NOSIGNAL) == sizeof h)
                ++sent;
            pollfd p{fd, POLLIN, 0};
            if (poll(&p, 1, 10) == 1 && recv(fd, in.data(), in.size(), 0) > 0) answered.fetch_add(1);
        }
    });
    for (int i = 0; i < 100000 && answered.load() < 1000; ++i) rig.turn();
    REQUIRE(answered.load() >= 1000);

    // Each call serves at most its budget, however fast the flood refills the socket.
    uint64_t most = 0;
    for (int i = 0; i < 50; ++i) {
        const uint64_t before = control_messages(rig);
        rig.host->poll_control();
        most = std::max(most, control_messages(rig) - before);
    }
    CHECK(most > 0);
    CHECK(most <= server::HostService::kControlHandlersPerPoll);

    // Another session's request, sent in the middle of the flood, is served in turn.
    const uint32_t seq = other.send(Op::QueryPort, nullptr, 0);
    int calls = 0;
    std::optional<Reply> r;
    while (!r && calls < 100) {
        rig.host->poll_control();
        ++calls;
        r = other.try_receive();
    }
    stop = true;
    flood.join();
    REQUIRE(r);
    CHECK(r->header.seq == seq);
    CHECK(r->header.status == 0);
    CHECK(calls <= 2);
    INFO("flood answered " << answered.load());
}
