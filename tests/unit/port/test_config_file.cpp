// rnicd --config: the file's lines become the long options, the command line replaces keys, and
// an error names the file and line.
#include <catch2/catch.hpp>

#include "config_file.hpp"
#include "rnic/wire/gid.hpp"

using namespace rnic;

namespace {
daemon::ConfigFile file_of(const std::string& text) {
    auto f = daemon::parse_config_text(text, "/etc/rnic/t.conf");
    REQUIRE(f);
    return *f;
}
}  // namespace

TEST_CASE("config file: keys, flags, comments, eal and quotes become the long options") {
    const auto f = file_of(
        "# rnicd for the lab port\n"
        "iface = veth0\n"
        "ip=10.0.0.1/24   # the RoCE address\n"
        "\n"
        "  ; another comment\n"
        "busy-poll\n"
        "pcap = \"/var/log/rnic/t.pcap\"\n"
        "eal = -l 1 --log-level=debug\r\n");
    REQUIRE(f.options.size() == 4);
    CHECK(f.options[0].args == std::vector<std::string>{"--iface", "veth0"});
    CHECK(f.options[1].args == std::vector<std::string>{"--ip", "10.0.0.1/24"});
    CHECK(f.options[1].line == 3);
    CHECK(f.options[2].args == std::vector<std::string>{"--busy-poll"});
    CHECK(f.options[3].args == std::vector<std::string>{"--pcap", "/var/log/rnic/t.pcap"});
    CHECK(f.eal == std::vector<std::string>{"-l", "1", "--log-level=debug"});

    const auto o = daemon::parse_with_config(f, {});
    REQUIRE(o);
    CHECK(o->ports.at(0).iface == "veth0");
    CHECK(o->busy_poll);
    CHECK(o->ports[0].pcap == "/var/log/rnic/t.pcap");
    CHECK(o->eal_args == std::vector<std::string>{"-l", "1", "--log-level=debug"});
}

TEST_CASE("config file: the command line replaces the file's keys and EAL arguments") {
    const auto f = file_of("iface = veth0\nip = 10.0.0.1/24\nspin-us = 5\ncc = rp_ai_rate=5\neal = -l 1\n");
    const auto o = daemon::parse_with_config(f, {"--ip", "10.9.0.1/16", "--spin-us", "7", "--", "-l", "0"});
    REQUIRE(o);
    CHECK(o->ports.at(0).iface == "veth0");
    CHECK(wire::ipv4_to_string(o->ports[0].ip.addr) == "10.9.0.1");
    CHECK(o->spin_us == 7);
    CHECK(o->eal_args == std::vector<std::string>{"-l", "0"});
    // Keys the command line does not give stay the file's.
    const auto kept = daemon::parse_with_config(f, {"--log-level", "debug"});
    REQUIRE(kept);
    CHECK(kept->spin_us == 5);
    CHECK(kept->log_level == "debug");
    CHECK(kept->eal_args == std::vector<std::string>{"-l", "1"});
}

TEST_CASE("config file: two ports, each port's keys after its iface") {
    const auto o = daemon::parse_with_config(
        file_of("iface = veth0\nip = 10.0.0.1/24\nname = left\niface = veth1\nip = 10.1.0.1/24\n"), {});
    REQUIRE(o);
    REQUIRE(o->ports.size() == 2);
    CHECK(o->ports[0].name == "left");
    CHECK(o->ports[1].iface == "veth1");
    CHECK(o->ports[1].name == "rnic1");
}

TEST_CASE("config file: errors name the file and the line") {
    auto bad_text = [](const std::string& text) {
        auto f = daemon::parse_config_text(text, "/etc/rnic/t.conf");
        REQUIRE_FALSE(f);
        return f.error();
    };
    CHECK(bad_text("iface = veth0\n--ip = 10.0.0.1/24\n").rfind("/etc/rnic/t.conf:2: write the key without", 0) == 0);
    CHECK(bad_text("iface veth0\n").rfind("/etc/rnic/t.conf:1: expected 'key = value'", 0) == 0);
    CHECK(bad_text("\n\npcap =\n").rfind("/etc/rnic/t.conf:3: 'pcap =' has no value", 0) == 0);
    CHECK(bad_text("config = /x\n").rfind("/etc/rnic/t.conf:1:", 0) == 0);

    auto bad = [](const std::string& text, std::vector<std::string> args = {}) {
        auto o = daemon::parse_with_config(file_of(text), args);
        REQUIRE_FALSE(o);
        return o.error();
    };
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\nspin-us = lots\n") ==
          "/etc/rnic/t.conf:3: --spin-us wants 0..1000000, got 'lots'");
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\n\nno-such-option = 1\n") ==
          "/etc/rnic/t.conf:4: unknown option '--no-such-option'");
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\nwarp\n") == "/etc/rnic/t.conf:3: unknown option '--warp'");
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\nbusy-poll = yes\n") ==
          "/etc/rnic/t.conf:3: 'busy-poll' takes no value: write it alone on its line");
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\nip = 10.0.0.2/24\n") ==
          "/etc/rnic/t.conf:3: two --ip for one port (each --iface starts a port)");
    // Not one line's fault: the file's as a whole.
    CHECK(bad("iface = veth0\nspin-us = 3\n") == "/etc/rnic/t.conf: --ip is required");
    // The command line's own error is not blamed on the file.
    CHECK(bad("iface = veth0\nip = 10.0.0.1/24\n", {"--spin-us", "x"}).rfind("--spin-us wants", 0) == 0);
}

TEST_CASE("config file: --config on the command line") {
    CHECK(daemon::parse_command_line({"--config"}).error() == "--config needs a file");
    CHECK(daemon::parse_command_line({"--config", "/nonexistent/rnic.conf"}).error().rfind(
              "cannot read /nonexistent/rnic.conf: ", 0) == 0);
    CHECK(daemon::parse_command_line({"--config=/a", "--config", "/b"}).error() == "--config given twice");
    const auto help = daemon::parse_command_line({"--config", "/nonexistent/rnic.conf", "--help"});
    REQUIRE(help);
    CHECK(help->help);
    // Without --config it is parse_options itself.
    CHECK(daemon::parse_command_line({"--iface", "veth0", "--ip", "10.0.0.1/24"}));
}
