// ICMP echo (RFC 792) for the daemon's IPv4 address, so `ping` reaches the RNIC.
#pragma once

#include <cstdint>
#include <span>

#include "rnic/port/host_address.hpp"
#include "rnic/transport/engine.hpp"

namespace rnic::port {

enum class IcmpResult : uint8_t {
    Replied,
    NotEchoRequest,  // other ICMP types are counted and dropped
    BadChecksum,
    Malformed,
    NoBuffer,
};

struct IcmpCounters {
    uint64_t echo_requests = 0;
    uint64_t echo_replies = 0;
    uint64_t other_types = 0;
    uint64_t bad_checksum = 0;
    uint64_t malformed = 0;
    uint64_t no_buffer = 0;
};

// `frame` must have been classified IcmpForUs. The reply goes back to the frame's source MAC:
// answering the way the request came needs no ARP lookup.
IcmpResult answer_echo(std::span<const uint8_t> frame, const HostAddress& self, transport::FrameSink& sink,
                       IcmpCounters& counters);

}  // namespace rnic::port
