// ICMP echo (RFC 792) for the daemon's IPv4 address and ICMPv6 echo (RFC 4443 4) for its IPv6
// addresses, so `ping` and `ping -6` reach the RNIC.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "rnic/common/counter_macros.hpp"
#include "rnic/common/frame_sink.hpp"
#include "rnic/port/host_address.hpp"
#include "rnic/port/icmp6.hpp"

namespace rnic::port {

enum class IcmpResult : uint8_t {
    Replied,
    NotEchoRequest,  // other ICMP types are counted and dropped
    BadChecksum,
    Malformed,
    NoBuffer,
};

// One set per protocol (icmp_ and icmp6_ counters). other_types: counted and dropped.
#define RNIC_ICMP_COUNTERS(X) X(echo_requests) X(echo_replies) X(other_types) X(bad_checksum) X(malformed) X(no_buffer)

struct IcmpCounters {
    RNIC_COUNTER_MEMBERS(RNIC_ICMP_COUNTERS)
};

// `frame` must have been classified IcmpForUs. The reply goes back to the frame's source MAC:
// answering the way the request came needs no ARP lookup.
IcmpResult answer_echo(std::span<const uint8_t> frame, const HostAddress& self, common::FrameSink& sink,
                       IcmpCounters& counters);

// `message` is an echo request parse_icmp6() accepted (checksum and lengths are checked there;
// its errors are counted by the caller). The reply comes from the address asked, or for a
// multicast request from our address for the asker's prefix; back to the request's source MAC.
IcmpResult answer_echo6(const Icmp6Message& message, const HostAddress& self, common::FrameSink& sink,
                        IcmpCounters& counters);

}  // namespace rnic::port
