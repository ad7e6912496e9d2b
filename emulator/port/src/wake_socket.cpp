#include "rnic/port/wake_socket.hpp"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace rnic::port {

namespace {

// Classic BPF jumps are relative offsets; naming the targets and resolving them at the end keeps
// the program readable and the offsets right.
class FilterBuilder {
public:
    enum Label : int { kNext = -1, kAccept, kDrop, kIpv4, kIpv6, kUdp4, kUdp6, kLabels };

    void stmt(uint16_t code, uint32_t k) { code_.push_back(sock_filter{code, 0, 0, k}); }
    void jump(uint16_t code, uint32_t k, Label jt, Label jf) {
        fixups_.push_back({code_.size(), jt, jf});
        code_.push_back(sock_filter{static_cast<uint16_t>(BPF_JMP | code | BPF_K), 0, 0, k});
    }
    void place(Label l) { where_[static_cast<size_t>(l)] = code_.size(); }

    std::vector<sock_filter> finish() {
        for (const auto& [at, jt, jf] : fixups_) {
            code_[at].jt = offset(at, jt);
            code_[at].jf = offset(at, jf);
        }
        return std::move(code_);
    }

private:
    uint8_t offset(size_t at, Label l) const {
        return l == kNext ? 0 : static_cast<uint8_t>(where_[static_cast<size_t>(l)] - at - 1);
    }
    struct Fixup {
        size_t at;
        Label jt, jf;
    };
    std::vector<sock_filter> code_;
    std::vector<Fixup> fixups_;
    std::array<size_t, kLabels> where_{};
};

}  // namespace

std::vector<sock_filter> wake_filter(uint32_t ipv4, uint32_t snap) {
    using F = FilterBuilder;
    F f;
    // Our own transmissions must not wake us (PACKET_IGNORE_OUTGOING says the same; this also
    // holds on kernels older than 4.20).
    f.stmt(BPF_LD | BPF_B | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_PKTTYPE));
    f.jump(BPF_JEQ, PACKET_OUTGOING, F::kDrop, F::kNext);
    f.stmt(BPF_LD | BPF_H | BPF_ABS, 12);  // EtherType
    f.jump(BPF_JEQ, ETHERTYPE_ARP, F::kAccept, F::kNext);
    // MAC control (PAUSE, PFC): the pause receiver must see it at once, not at the nap's end.
    f.jump(BPF_JEQ, 0x8808, F::kAccept, F::kNext);
    // A tag the kernel left in place (it usually strips it into metadata first): rare, let the
    // classifier decide.
    f.jump(BPF_JEQ, ETHERTYPE_VLAN, F::kAccept, F::kNext);
    f.jump(BPF_JEQ, ETHERTYPE_IP, F::kIpv4, F::kNext);
    f.jump(BPF_JEQ, ETHERTYPE_IPV6, F::kIpv6, F::kDrop);

    f.place(F::kIpv4);
    f.stmt(BPF_LD | BPF_W | BPF_ABS, 14 + 16);  // destination address
    f.jump(BPF_JEQ, ipv4, F::kNext, F::kDrop);
    f.stmt(BPF_LD | BPF_B | BPF_ABS, 14 + 9);  // protocol
    f.jump(BPF_JEQ, 1, F::kAccept, F::kNext);   // ICMP
    f.jump(BPF_JEQ, 17, F::kUdp4, F::kDrop);
    f.place(F::kUdp4);
    f.stmt(BPF_LD | BPF_H | BPF_ABS, 14 + 6);  // a later fragment carries no UDP header
    f.jump(BPF_JSET, 0x1fff, F::kDrop, F::kNext);
    f.stmt(BPF_LDX | BPF_B | BPF_MSH, 14);  // X = IPv4 header length
    f.stmt(BPF_LD | BPF_H | BPF_IND, 14 + 2);  // UDP destination port
    f.jump(BPF_JEQ, 4791, F::kAccept, F::kDrop);

    f.place(F::kIpv6);
    f.stmt(BPF_LD | BPF_B | BPF_ABS, 14 + 6);  // next header (extension headers are not served)
    f.jump(BPF_JEQ, 58, F::kAccept, F::kNext);  // ICMPv6: ND, echo
    f.jump(BPF_JEQ, 17, F::kUdp6, F::kDrop);
    f.place(F::kUdp6);
    f.stmt(BPF_LD | BPF_H | BPF_ABS, 14 + 40 + 2);
    f.jump(BPF_JEQ, 4791, F::kAccept, F::kDrop);

    f.place(F::kAccept);
    f.stmt(BPF_RET | BPF_K, snap);
    f.place(F::kDrop);
    f.stmt(BPF_RET | BPF_K, 0);
    return f.finish();
}

wire::Expected<WakeSocket, std::string> WakeSocket::open(const std::string& iface, uint32_t ipv4) {
    using U = wire::Unexpected<std::string>;
    const auto fail = [](int fd, const char* what) {
        const int e = errno;
        if (fd >= 0) close(fd);
        return U{std::string(what) + ": " + std::strerror(e)};
    };
    const unsigned index = if_nametoindex(iface.c_str());
    if (index == 0) return fail(-1, "if_nametoindex");
    // Protocol 0: nothing is queued before the filter is in place and the socket bound.
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(fd, "AF_PACKET socket");
    auto program = wake_filter(ipv4, kSnap);
    const sock_fprog prog{static_cast<unsigned short>(program.size()), program.data()};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return fail(fd, "SO_ATTACH_FILTER");
    const int one = 1;
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);  // the filter covers old kernels
    const int buffer = kReceiveBuffer;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer) != 0) return fail(fd, "SO_RCVBUF");
    sockaddr_ll addr{};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = htons(ETH_P_ALL);
    addr.sll_ifindex = static_cast<int>(index);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return fail(fd, "bind");
    return WakeSocket(fd);
}

WakeSocket& WakeSocket::operator=(WakeSocket&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

WakeSocket::~WakeSocket() {
    if (fd_ >= 0) close(fd_);
}

size_t WakeSocket::drain() noexcept {
    // The buffer holds a few copies at most; the bound only guards against a flood arriving as
    // fast as we read.
    std::array<uint8_t, kSnap> sink{};
    size_t n = 0;
    while (n < 256 && recv(fd_, sink.data(), sink.size(), MSG_DONTWAIT | MSG_TRUNC) >= 0) ++n;
    return n;
}

bool WakeSocket::enable_timestamps(bool on) noexcept {
    const int v = on ? 1 : 0;
    return setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &v, sizeof v) == 0;
}

size_t WakeSocket::drain_stamped(uint64_t& earliest_realtime_ns) noexcept {
    earliest_realtime_ns = 0;
    std::array<uint8_t, kSnap> sink{};
    alignas(cmsghdr) std::array<uint8_t, CMSG_SPACE(sizeof(timespec))> control{};
    size_t n = 0;
    while (n < 256) {
        iovec iov{sink.data(), sink.size()};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        if (recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_TRUNC) < 0) break;
        ++n;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_TIMESTAMPNS) continue;
            timespec ts{};
            std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
            const uint64_t at = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
            if (at != 0 && (earliest_realtime_ns == 0 || at < earliest_realtime_ns)) earliest_realtime_ns = at;
        }
    }
    return n;
}

}  // namespace rnic::port
