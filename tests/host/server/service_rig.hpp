// Every piece of rnicd but DPDK, in-process: FakePort, engine, rnicd's datapath (ARP, neighbour
// discovery, loopback between our own QPs) and the host service listening in a temporary run
// directory, with a clock the caller moves. Free of Catch2: the Catch tests (raw_client.hpp) and
// the libFuzzer targets (tests/fuzz) both build on it.
#pragma once

// Boost 1.74 Asio does not compile as C++20 with g++ 12 unless <utility> comes first.
// clang-format off
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "datapath.hpp"
#include "rnic/host/server/host_service.hpp"
#include "rnic/port/fake_port.hpp"
#include "test_addresses.hpp"

namespace rnic::host::test {

transport::EngineConfig rig_engine_config();

struct ServiceRig {
    // `tweak` adjusts the service's configuration before it starts. Throws std::runtime_error
    // when the run directory or the socket cannot be set up.
    explicit ServiceRig(const std::function<void(server::ServerConfig&)>& tweak = {},
                        transport::EngineConfig engine_config = rig_engine_config());
    ~ServiceRig();
    ServiceRig(const ServiceRig&) = delete;
    ServiceRig& operator=(const ServiceRig&) = delete;

    // One loop turn as rnicd takes it: the host service, the port and engine, the control socket.
    void turn(uint64_t advance_ns = 1000);

    std::string dir;
    port::FakePort port{port::test::kSelf.mac};
    transport::Engine engine;
    daemon::Datapath dp;
    boost::asio::io_context io;
    std::unique_ptr<server::HostService> host;
    uint64_t now = 1'000'000'000;
};

}  // namespace rnic::host::test
