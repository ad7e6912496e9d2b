// Address vectors between the ABI and the engine, shared by the ops that take one (CreateAh,
// ModifyQp) and QueryQp's answer.
#pragma once

#include "rnic/host/abi/control.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/gid.hpp"

namespace rnic::host::server {

transport::AddressVector to_engine(const abi::AddressVector& a);
abi::AddressVector to_abi(const transport::AddressVector& v);

// The GID an address vector's MAC is resolved for, or an errno. The source GID picks the IP
// version (as rxe's network type follows the sgid), so the destination must be of the same kind:
// an IPv4-mapped dgid with an IPv6 source (or the reverse) could never be put on the wire.
int av_target(const transport::Engine& engine, const abi::AddressVector& av, wire::Gid& dgid);

}  // namespace rnic::host::server
