#include "rate_options.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "rnic/port/host_address.hpp"

namespace rnic::port_rate {

namespace {

// The largest RoCE path MTU: a WRITE payload beyond it would be split into packets by rnicd.
constexpr size_t kMaxPayload = 4096;

template <class T>
T number(std::string_view name, std::string_view text, T lo, T hi) {
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || !(v >= lo && v <= hi) ||
        (std::is_floating_point_v<T> && !std::isfinite(static_cast<double>(v))))
        throw std::invalid_argument(std::string(name) + " wants a number from " + std::to_string(lo) + " to " +
                                    std::to_string(hi) + ", not '" + std::string(text) + "'");
    return v;
}

}  // namespace

const char* to_string(Pmd pmd) noexcept {
    return pmd == Pmd::AfXdp ? "af_xdp" : pmd == Pmd::Ring ? "ring" : "af_packet";
}

std::string usage() {
    return "usage: port_rate tx|rx --iface IF [--pmd af_packet|af_xdp|ring] [--size N] [--seconds S] [--burst B]\n"
           "                 [--dst-mac MAC] [--src-ip A] [--dst-ip A] [--wait S] [--idle-ms MS] [--nap-us US] [--verify] [--json]\n"
           "  tx sends RoCEv2 RDMA WRITE frames (N bytes of payload, ICRC included) for S seconds as fast as\n"
           "  the port takes them; rx counts the RoCEv2 frames it receives until S seconds after the first,\n"
           "  or --idle-ms without one. Each prints one line: port_rate tx|rx: key=value ...\n";
}

Options parse_options(const std::vector<std::string>& args) {
    if (args.empty()) throw std::invalid_argument("tx or rx first");
    Options o;
    if (args[0] == "tx")
        o.role = Role::Tx;
    else if (args[0] == "rx")
        o.role = Role::Rx;
    else
        throw std::invalid_argument("the first argument is tx or rx, not '" + args[0] + "'");
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--verify") {
            o.verify = true;
            continue;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (i + 1 >= args.size()) throw std::invalid_argument(a + " wants a value (or is unknown)");
        const std::string& v = args[++i];
        if (a == "--iface") {
            o.iface = v;
        } else if (a == "--pmd") {
            if (v == "af_packet")
                o.pmd = Pmd::AfPacket;
            else if (v == "af_xdp")
                o.pmd = Pmd::AfXdp;
            else if (v == "ring")
                o.pmd = Pmd::Ring;
            else
                throw std::invalid_argument("--pmd wants af_packet, af_xdp or ring, not '" + v + "'");
        } else if (a == "--size") {
            o.payload = number<size_t>("--size", v, 0, kMaxPayload);
        } else if (a == "--seconds") {
            o.seconds = number<double>("--seconds", v, 0.01, 3600.0);
        } else if (a == "--burst") {
            o.burst = number<unsigned>("--burst", v, 1, 512);
        } else if (a == "--wait") {
            o.wait = number<double>("--wait", v, 0.01, 3600.0);
        } else if (a == "--nap-us") {
            o.nap_us = number<unsigned>("--nap-us", v, 0, 100000);
        } else if (a == "--idle-ms") {
            o.idle_ms = number<unsigned>("--idle-ms", v, 1, 600000);
        } else if (a == "--dst-mac") {
            const auto mac = port::parse_mac(v);
            if (!mac) throw std::invalid_argument("--dst-mac wants aa:bb:cc:dd:ee:ff, not '" + v + "'");
            o.dst_mac = *mac;
        } else if (a == "--src-ip" || a == "--dst-ip") {
            const auto ip = port::parse_ipv4(v);
            if (!ip) throw std::invalid_argument(a + " wants an IPv4 address, not '" + v + "'");
            (a == "--src-ip" ? o.src_ip : o.dst_ip) = *ip;
        } else {
            throw std::invalid_argument("unknown option " + a);
        }
    }
    if (o.iface.empty()) throw std::invalid_argument("--iface is required");
    return o;
}

}  // namespace rnic::port_rate
