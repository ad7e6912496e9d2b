#include "address_vector.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace rnic::host::server {
namespace {

// Linux resolves a RoCE path like an IP route and replaces the application's hop limit with the
// route's (ib_resolve_unicast_gid_dmac, for modify_qp and create_ah alike): ibv_rc_pingpong asks
// for 1, rxe sends TTL 64. Our destinations are on-link neighbours with the default TTL, so every
// path gets 64, and a frame of ours survives a router the way rxe's does.
constexpr uint8_t kRouteHopLimit = 64;

}  // namespace

transport::AddressVector to_engine(const abi::AddressVector& a) {
    transport::AddressVector v;
    std::memcpy(v.dgid.raw.data(), a.dgid, 16);
    v.sgid_index = a.sgid_index;
    v.flow_label = a.flow_label;
    v.hop_limit = kRouteHopLimit;
    v.traffic_class = a.traffic_class;
    v.sl = a.sl;
    return v;
}

abi::AddressVector to_abi(const transport::AddressVector& v) {
    abi::AddressVector a{};
    std::memcpy(a.dgid, v.dgid.raw.data(), 16);
    a.sgid_index = v.sgid_index;
    a.flow_label = v.flow_label;
    a.hop_limit = v.hop_limit;
    a.traffic_class = v.traffic_class;
    a.sl = v.sl;
    a.is_global = 1;
    a.port_num = 1;
    std::memcpy(a.dmac, v.dmac.data(), 6);
    return a;
}

int av_target(const transport::Engine& engine, const abi::AddressVector& av, wire::Gid& dgid) {
    const transport::AddressVector v = to_engine(av);
    const auto& gids = engine.gids();
    if (v.sgid_index >= gids.size()) return EINVAL;
    if (gids[v.sgid_index].is_ipv4_mapped() != v.dgid.is_ipv4_mapped()) {
        spdlog::info("address vector for {}: source GID {} ({}) is of the other IP version", v.dgid.to_string(),
                     unsigned{v.sgid_index}, gids[v.sgid_index].to_string());
        return EINVAL;
    }
    dgid = v.dgid;
    return 0;
}

}  // namespace rnic::host::server
