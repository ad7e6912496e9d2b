#include "rnic/port/interface_speed.hpp"

#include <fstream>

namespace rnic::port {

unsigned interface_speed_mbps(const std::string& iface) {
    std::ifstream f("/sys/class/net/" + iface + "/speed");
    long speed = 0;
    return f >> speed && speed > 0 ? static_cast<unsigned>(speed) : 0;
}

}  // namespace rnic::port
