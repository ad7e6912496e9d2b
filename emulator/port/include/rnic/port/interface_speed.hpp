// A Linux interface's link speed as the kernel reports it (what ethtool shows; a veth says 10000),
// for the ports that sit on an interface (DpdkPort's af_packet and af_xdp, PacketRingPort).
#pragma once

#include <string>

namespace rnic::port {

// Mb/s; 0 when unknown (a missing interface, or -1: a link that is down).
unsigned interface_speed_mbps(const std::string& iface);

}  // namespace rnic::port
