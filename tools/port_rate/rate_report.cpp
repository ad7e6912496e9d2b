#include "rate_report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace rnic::port_rate {

std::string format_line(const Report& r) {
    char buf[512];
    const bool tx = r.role == Role::Tx;
    std::snprintf(buf, sizeof buf, "port_rate %s: pmd=%s iface=%s%s frame=%llu burst=%u seconds=%.3f frames=%llu pps=%.0f gbps=%.3f",
                  tx ? "tx" : "rx", to_string(r.pmd), r.iface.c_str(),
                  tx ? (" payload=" + std::to_string(r.payload)).c_str() : "",
                  static_cast<unsigned long long>(r.frame_bytes()), r.burst, r.seconds,
                  static_cast<unsigned long long>(r.frames), r.pps(), r.gbps());
    std::string line = buf;
    if (tx) {
        line += " dropped=" + std::to_string(r.dropped);
    } else {
        line += " other=" + std::to_string(r.other) + " bad=" + std::to_string(r.bad) +
                " missed=" + std::to_string(r.missed);
    }
    return line;
}

std::string format_json(const Report& r) {
    nlohmann::json j{{"role", r.role == Role::Tx ? "tx" : "rx"},
                     {"pmd", to_string(r.pmd)},
                     {"iface", r.iface},
                     {"frame", r.frame_bytes()},
                     {"burst", r.burst},
                     {"seconds", r.seconds},
                     {"frames", r.frames},
                     {"bytes", r.bytes},
                     {"pps", r.pps()},
                     {"gbps", r.gbps()}};
    if (r.role == Role::Tx) {
        j["payload"] = r.payload;
        j["dropped"] = r.dropped;
    } else {
        j["other"] = r.other;
        j["bad"] = r.bad;
        j["missed"] = r.missed;
    }
    return j.dump();
}

}  // namespace rnic::port_rate
