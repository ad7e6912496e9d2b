#include "service_rig.hpp"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace rnic::host::test {

transport::EngineConfig rig_engine_config() {
    transport::EngineConfig ec;
    ec.mac = port::test::kSelf.mac;
    ec.gids = port::gid_table(port::test::kSelf);
    return ec;
}

ServiceRig::ServiceRig(const std::function<void(server::ServerConfig&)>& tweak, transport::EngineConfig engine_config)
    : engine(std::move(engine_config)), dp(port, engine, port::test::kSelf, nullptr) {
    char tmpl[] = "/tmp/rnic-host-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir = tmpl;
    server::ServerConfig sc;
    sc.name = "rnictest";
    sc.run_dir = dir + "/run";
    sc.mac = port::test::kSelf.mac;
    sc.ipv4 = port::test::kSelf.ipv4;
    sc.prefix_length = 24;
    sc.link_speed_mbps = 10000;  // what a veth reports
    for (const auto& p : port::test::kSelf.ipv6)
        sc.ipv6.push_back(port::ipv6_to_string(p.addr) + "/" + std::to_string(p.length));
    auto resolver = [this](const wire::Gid& dgid, uint64_t t, wire::MacAddr& mac) {
        switch (dp.resolve(dgid, t, mac)) {
            case daemon::Neighbour::Resolved:
                return server::Resolution::Resolved;
            case daemon::Neighbour::Pending:
                return server::Resolution::Pending;
            case daemon::Neighbour::Unreachable:
                break;
        }
        return server::Resolution::Unreachable;
    };
    if (tweak) tweak(sc);
    host = std::make_unique<server::HostService>(io, engine, sc, resolver, [this] { return dp.counter_list(); });
    dp.set_cm(&host->cm());
    host->start();
    dp.start(now);
    port.sent().clear();
}

ServiceRig::~ServiceRig() {
    host.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

void ServiceRig::turn(uint64_t advance_ns) {
    now += advance_ns;
    host->poll(now);
    dp.poll(now);
    host->poll_control();
}

}  // namespace rnic::host::test
