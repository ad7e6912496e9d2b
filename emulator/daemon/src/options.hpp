// rnicd's command line, parsed once before anything starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rnic/port/host_address.hpp"
#include "rnic/wire/expected.hpp"

namespace rnic::daemon {

struct Options {
    std::string iface;
    port::Ipv4Prefix ip;
    std::optional<wire::MacAddr> mac;
    std::string pcap;
    uint64_t pcap_max_mb = 0;  // 0: one file, never rotated
    bool busy_poll = false;
    uint64_t idle_sleep_max_us = 2000;
    std::string log_level = "info";
    std::string name = "rnic0";  // device name; the control socket is <run_dir>/<name>.sock
    std::string run_dir;         // empty: $RNIC_RUN_DIR, else /run/rnic
    std::vector<std::string> eal_args;
    bool help = false;
};

const char* usage();

// Errors are messages for the user, printed before exiting with status 2.
wire::Expected<Options, std::string> parse_options(const std::vector<std::string>& args);

}  // namespace rnic::daemon
