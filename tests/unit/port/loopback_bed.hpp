// A network namespace of the test's own whose loopback interface carries frames injected with an
// AF_PACKET socket, so kernel-facing port code runs against the real kernel and nothing outside
// the test sees a frame.
#pragma once

#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rnic::port::test {

// Root only; false (with a warning) where namespaces are not allowed.
inline bool private_loopback() {
    if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) return false;
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    const bool up = ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
    close(s);
    return up;
}

class Injector {
public:
    Injector() : fd_(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0)) { REQUIRE(fd_ >= 0); }
    ~Injector() { close(fd_); }
    void send(const std::vector<uint8_t>& frame) const {
        sockaddr_ll to{};
        to.sll_family = AF_PACKET;
        to.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
        to.sll_halen = 6;
        REQUIRE(sendto(fd_, frame.data(), frame.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) ==
                static_cast<ssize_t>(frame.size()));
    }

private:
    int fd_;
};

}  // namespace rnic::port::test
