// The drop-in librdmacm's parts that need no rnicd: address conversions and the device choice,
// rdma_getaddrinfo's translation, the event channel's descriptor (poll, epoll, select, blocking
// and O_NONBLOCK), the event path from a queued event to rdma_get_cm_event/rdma_ack_cm_event and
// rdma_destroy_id's wait, and the errno of bad arguments as rdma-core's librdmacm gives them.
// Linked with the library's own objects; $RNIC_RUN_DIR points at an empty directory, so no
// daemon running on this machine is seen (what needs one: check_rdmacm_utils.py).
#define CATCH_CONFIG_RUNNER
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "address.hpp"
#include "addrinfo.hpp"
#include "cm_objects.hpp"
#include "event_channel.hpp"

using namespace rnic::rdmacm;

namespace {

abi::CmAddress v4(const char* text, uint16_t port = 0) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    REQUIRE(inet_pton(AF_INET, text, &in.sin_addr) == 1);
    return *to_cm(reinterpret_cast<sockaddr*>(&in));
}

abi::CmAddress v6(const char* text, uint16_t port = 0, uint32_t scope = 0) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    in6.sin6_scope_id = scope;
    REQUIRE(inet_pton(AF_INET6, text, &in6.sin6_addr) == 1);
    return *to_cm(reinterpret_cast<sockaddr*>(&in6));
}

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

RawEvent removal_for(CmDevice& dev, Id& id, uint32_t handle) {
    RawEvent r;
    r.dev = &dev;
    r.ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
    r.ev.id = handle;
    r.target = &id;
    return r;
}

// rdma_errno: what the call returned and errno, as one comparable pair.
struct Failure {
    long ret;
    int err;
    bool operator==(const Failure&) const = default;
};
template <class F>
Failure failure(F f) {
    errno = 0;
    const long ret = static_cast<long>(f());
    return {ret, errno};
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<Failure> {
    static std::string convert(const Failure& f) {
        return "{ret " + std::to_string(f.ret) + ", errno " + std::to_string(f.err) + " (" + std::strerror(f.err) +
               ")}";
    }
};
}  // namespace Catch

TEST_CASE("socket addresses convert to the CM's form and back, port and scope included") {
    const abi::CmAddress a = v4("10.77.0.1", 7471);
    CHECK(a.family == AF_INET);
    CHECK(a.port == 7471);
    CHECK(a.addr[10] == 0xff);
    CHECK(a.addr[11] == 0xff);
    CHECK(a.addr[12] == 10);
    CHECK(a.addr[15] == 1);
    sockaddr_storage ss;
    to_sockaddr(a, ss);
    sockaddr_in in;
    std::memcpy(&in, &ss, sizeof in);
    CHECK(in.sin_family == AF_INET);
    CHECK(ntohs(in.sin_port) == 7471);
    CHECK(in.sin_addr.s_addr == inet_addr("10.77.0.1"));

    const abi::CmAddress b = v6("fe80::1", 18515, 3);
    CHECK(b.family == AF_INET6);
    CHECK(b.scope_id == 3);
    to_sockaddr(b, ss);
    sockaddr_in6 in6;
    std::memcpy(&in6, &ss, sizeof in6);
    CHECK(ntohs(in6.sin6_port) == 18515);
    CHECK(in6.sin6_scope_id == 3);
    CHECK(is_link_local(b));

    sockaddr unknown{};
    unknown.sa_family = AF_UNIX;
    CHECK_FALSE(to_cm(&unknown).has_value());
    CHECK_FALSE(to_cm(nullptr).has_value());
    CHECK(address_length(&unknown) == 0);
    CHECK(address_length(nullptr) == 0);
    CHECK(address_length(reinterpret_cast<sockaddr*>(&in)) == sizeof(sockaddr_in));
    CHECK(address_length(reinterpret_cast<sockaddr*>(&in6)) == sizeof(sockaddr_in6));
}

TEST_CASE("wildcards stay per family, and an IPv4 address given as ::ffff:a.b.c.d is the same address") {
    CHECK(is_any(v4("0.0.0.0")));
    CHECK(is_any(v6("::")));
    CHECK_FALSE(is_any(v4("10.0.0.1")));
    CHECK(v4("0.0.0.0").family != v6("::").family);
    CHECK(same_address(v4("10.77.0.2"), v6("::ffff:10.77.0.2")));
    CHECK_FALSE(same_address(v4("10.77.0.2"), v4("10.77.0.3")));
    CHECK_FALSE(same_address(v6("fd77::1"), v6("fd77::2")));
    CHECK(same_address(v4("10.77.0.2", 1), v4("10.77.0.2", 2)));  // ports do not matter
}

TEST_CASE("a device's addresses come from its GIDs with the prefixes of its Stats document") {
    // What rnicd's Stats device part says (compact JSON, as nlohmann dumps it).
    const std::string json = R"({"device":{"name":"rnic0","pid":42,"mac":"02:00:00:00:00:01","ipv4":"10.77.0.1/24",)"
                             R"("ipv6":["fd77::1/64","2001:db8::5/48"],"port_state":"ACTIVE","gids":[]}})";
    const auto prefixes = parse_stats_prefixes(json);
    REQUIRE(prefixes.size() == 3);
    CHECK(prefixes[0].prefix_bits == 96 + 24);
    CHECK(prefixes[1].prefix_bits == 64);
    CHECK(prefixes[2].prefix_bits == 48);
    CHECK(parse_stats_prefixes(R"({"device":{"ipv4":"nonsense","ipv6":[]}})").empty());
    CHECK(parse_stats_prefixes("").empty());

    uint8_t gids[4][16] = {};
    const abi::CmAddress g0 = v4("10.77.0.1"), g1 = v6("fe80::1"), g2 = v6("fd77::1");
    std::memcpy(gids[0], g0.addr, 16);
    std::memcpy(gids[1], g1.addr, 16);
    std::memcpy(gids[2], g2.addr, 16);  // gids[3] stays zero: not an address
    const auto addrs = device_addresses(std::span<const uint8_t[16]>(gids, 4), prefixes);
    REQUIRE(addrs.size() == 3);
    CHECK(addrs[0].addr.family == AF_INET);
    CHECK(addrs[0].prefix_bits == 120);
    CHECK(addrs[1].prefix_bits == 64);  // link-local
    CHECK(addrs[2].prefix_bits == 64);
    CHECK(in_subnet(addrs[0], v4("10.77.0.200")));
    CHECK_FALSE(in_subnet(addrs[0], v4("10.77.1.2")));
    CHECK_FALSE(in_subnet(addrs[0], v6("fd77::2")));
    CHECK(in_subnet(addrs[2], v6("fd77::abcd")));

    // No prefix known: the address stands for itself only.
    const auto bare = device_addresses(std::span<const uint8_t[16]>(gids, 1), {});
    CHECK(bare[0].prefix_bits == 128);
    CHECK(in_subnet(bare[0], v4("10.77.0.1")));
    CHECK_FALSE(in_subnet(bare[0], v4("10.77.0.2")));
    DeviceAddress odd{v4("10.77.0.1"), 96 + 20};  // a prefix not on a byte boundary
    CHECK(in_subnet(odd, v4("10.77.15.1")));
    CHECK_FALSE(in_subnet(odd, v4("10.77.16.1")));
}

TEST_CASE("the device for an address: its owner, else the subnet holding it, else the family's first") {
    const std::vector<std::vector<DeviceAddress>> devices = {
        {{v4("10.1.0.1"), 120}, {v6("fe80::1"), 64}, {v6("fd01::1"), 64}},
        {{v4("10.2.0.1"), 120}, {v6("fe80::2"), 64}},
        {{v4("10.2.0.9"), 112}},
    };
    CHECK(owner_of(devices, v4("10.2.0.1")) == 1u);
    CHECK(owner_of(devices, v6("fd01::1")) == 0u);
    CHECK_FALSE(owner_of(devices, v4("10.2.0.2")).has_value());
    CHECK(route_to(devices, v4("10.2.0.1")) == 1u);     // local: the owner
    CHECK(route_to(devices, v4("10.2.0.77")) == 1u);    // the longest prefix holding it (/24 over /16)
    CHECK(route_to(devices, v4("10.2.9.9")) == 2u);     // only the /16 holds it
    CHECK(route_to(devices, v4("192.168.0.1")) == 0u);  // no subnet: the family's first device
    CHECK(route_to(devices, v6("fd01::99")) == 0u);
    CHECK(route_to(devices, v6("2001:db8::1")) == 0u);     // first with a global IPv6 address
    CHECK(route_to(devices, v6("fe80::99", 0, 2)) == 0u);  // link-local: first with one
    const std::vector<std::vector<DeviceAddress>> v4_only = {{{v4("10.1.0.1"), 120}}};
    CHECK_FALSE(route_to(v4_only, v6("fd01::1")).has_value());
    CHECK_FALSE(route_to({}, v4("10.1.0.1")).has_value());
}

TEST_CASE("rdma_getaddrinfo's translation: passive, active, IPv4, IPv6, port spaces, QP types") {
    rdma_addrinfo hints{};
    rdma_addrinfo* res = nullptr;

    SECTION("passive numeric IPv4: the source address, RC over RDMA_PS_TCP from the hints") {
        hints.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST;
        hints.ai_port_space = RDMA_PS_TCP;
        REQUIRE(translate_addrinfo("10.77.0.1", "7471", &hints, &res) == 0);
        CHECK(res->ai_flags == RAI_PASSIVE);
        CHECK(res->ai_family == AF_INET);
        CHECK(res->ai_qp_type == IBV_QPT_RC);  // from SOCK_STREAM, the TCP protocol's socket type
        CHECK(res->ai_port_space == RDMA_PS_TCP);
        REQUIRE(res->ai_src_len == sizeof(sockaddr_in));
        CHECK(res->ai_dst_addr == nullptr);
        sockaddr_in in;
        std::memcpy(&in, res->ai_src_addr, sizeof in);
        CHECK(ntohs(in.sin_port) == 7471);
        CHECK(in.sin_addr.s_addr == inet_addr("10.77.0.1"));
    }
    SECTION("passive without a node: the wildcard") {
        hints.ai_flags = RAI_PASSIVE;
        hints.ai_family = AF_INET6;
        REQUIRE(translate_addrinfo(nullptr, "20079", &hints, &res) == 0);
        REQUIRE(res->ai_src_len == sizeof(sockaddr_in6));
        sockaddr_in6 in6;
        std::memcpy(&in6, res->ai_src_addr, sizeof in6);
        CHECK(IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr));
        CHECK(ntohs(in6.sin6_port) == 20079);
    }
    SECTION("active numeric IPv6, UD over RDMA_PS_UDP") {
        hints.ai_flags = RAI_NUMERICHOST;
        hints.ai_qp_type = IBV_QPT_UD;
        hints.ai_port_space = RDMA_PS_UDP;
        REQUIRE(translate_addrinfo("fd77::2", "7174", &hints, &res) == 0);
        CHECK(res->ai_flags == 0);
        CHECK(res->ai_family == AF_INET6);
        CHECK(res->ai_qp_type == IBV_QPT_UD);
        CHECK(res->ai_port_space == RDMA_PS_UDP);
        CHECK(res->ai_src_addr == nullptr);
        REQUIRE(res->ai_dst_len == sizeof(sockaddr_in6));
        sockaddr_in6 in6;
        std::memcpy(&in6, res->ai_dst_addr, sizeof in6);
        CHECK(ntohs(in6.sin6_port) == 7174);
    }
    SECTION("the port space follows the protocol without hints of its own") {
        hints.ai_qp_type = IBV_QPT_UD;  // SOCK_DGRAM: UDP
        REQUIRE(translate_addrinfo("127.0.0.1", "1", &hints, &res) == 0);
        CHECK(res->ai_port_space == RDMA_PS_UDP);
    }
    SECTION("no node and no service: the hints' own addresses") {
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        dst.sin_port = htons(9);
        sockaddr_in src = dst;
        src.sin_port = htons(10);
        hints.ai_family = AF_INET;
        hints.ai_port_space = RDMA_PS_IB;
        hints.ai_qp_type = IBV_QPT_RC;
        hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
        hints.ai_dst_len = sizeof dst;
        hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
        hints.ai_src_len = sizeof src;
        REQUIRE(translate_addrinfo(nullptr, nullptr, &hints, &res) == 0);
        CHECK(res->ai_port_space == RDMA_PS_IB);
        REQUIRE(res->ai_dst_len == sizeof dst);
        REQUIRE(res->ai_src_len == sizeof src);
        CHECK(std::memcmp(res->ai_dst_addr, &dst, sizeof dst) == 0);
        CHECK(std::memcmp(res->ai_src_addr, &src, sizeof src) == 0);
        CHECK(res->ai_dst_addr != hints.ai_dst_addr);  // copies, freed by rdma_freeaddrinfo
    }
    SECTION("AF_IB asked for with RAI_FAMILY and a numeric IPv6 node: a GID and service ID") {
        hints.ai_flags = RAI_FAMILY | RAI_NUMERICHOST;
        hints.ai_family = AF_IB;
        hints.ai_port_space = RDMA_PS_TCP;
        REQUIRE(translate_addrinfo("fe80::1", "7471", &hints, &res) == 0);
        CHECK(res->ai_family == AF_IB);
        CHECK(res->ai_dst_len == sizeof(sockaddr_ib));
        sockaddr_ib sib;
        std::memcpy(&sib, res->ai_dst_addr, sizeof sib);
        CHECK(sib.sib_family == AF_IB);
        CHECK(be64toh(sib.sib_sid) == ((uint64_t{RDMA_PS_TCP} << 16) | 7471));
        CHECK(be64toh(sib.sib_sid_mask) == (RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK));
    }
    SECTION("getaddrinfo's error comes back as it is") {
        hints.ai_flags = RAI_NUMERICHOST;
        CHECK(translate_addrinfo("not-a-number", "1", &hints, &res) == EAI_NONAME);
        res = nullptr;
    }
    SECTION("nothing at all to look up is EINVAL") {
        CHECK(failure([&] { return translate_addrinfo(nullptr, nullptr, nullptr, &res); }) == Failure{-1, EINVAL});
        res = nullptr;
    }
    free_addrinfo(res);
}

TEST_CASE("an event channel's descriptor is readable exactly while events wait: poll, epoll, select") {
    Channel* ch = nullptr;
    REQUIRE(Channel::create(&ch) == 0);
    const int fd = ch->pub.fd;
    CmDevice dev;
    Id id;
    RawEvent out;
    CHECK_FALSE(readable(fd));
    CHECK(ch->take(out) == EAGAIN);

    const int outer = epoll_create1(EPOLL_CLOEXEC);  // an application's own epoll around ours
    epoll_event e{};
    e.events = EPOLLIN;
    REQUIRE(epoll_ctl(outer, EPOLL_CTL_ADD, fd, &e) == 0);
    epoll_event got{};
    CHECK(epoll_wait(outer, &got, 1, 0) == 0);

    ch->post(removal_for(dev, id, 7));
    ch->post(removal_for(dev, id, 8));
    CHECK(readable(fd));
    CHECK(epoll_wait(outer, &got, 1, 0) == 1);
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd, &set);
    timeval zero{};
    CHECK(select(fd + 1, &set, nullptr, nullptr, &zero) == 1);

    REQUIRE(ch->take(out) == 0);
    CHECK(out.ev.id == 7);  // in order
    CHECK(readable(fd));    // one left
    REQUIRE(ch->take(out) == 0);
    CHECK(out.ev.id == 8);
    CHECK_FALSE(readable(fd));
    CHECK(epoll_wait(outer, &got, 1, 0) == 0);
    FD_ZERO(&set);
    FD_SET(fd, &set);
    CHECK(select(fd + 1, &set, nullptr, nullptr, &zero) == 0);
    CHECK(ch->take(out) == EAGAIN);

    // The events of one id are taken out together (a destroyed or migrated id's).
    Id other;
    ch->post(removal_for(dev, id, 1));
    ch->post(removal_for(dev, other, 2));
    ch->post(removal_for(dev, id, 3));
    const auto mine = ch->extract([&](const RawEvent& r) { return r.target == &id; });
    CHECK(mine.size() == 2);
    REQUIRE(ch->take(out) == 0);
    CHECK(out.ev.id == 2);
    CHECK_FALSE(readable(fd));
    close(outer);
    Channel::destroy(ch);
}

TEST_CASE("rdma_get_cm_event blocks until an event, or says EAGAIN on an O_NONBLOCK descriptor") {
    Channel* ch = nullptr;
    REQUIRE(Channel::create(&ch) == 0);
    auto* id = new Id();
    id->pub.channel = &ch->pub;
    id->pub.ps = RDMA_PS_TCP;
    CmDevice dev;
    dev.ids[5] = id;
    id->parts = {IdPart{&dev, 5}};
    id->device = &dev;

    REQUIRE(fcntl(ch->pub.fd, F_SETFL, O_NONBLOCK) == 0);
    rdma_cm_event* event = nullptr;
    CHECK(failure([&] { return rdma_get_cm_event(&ch->pub, &event); }) == Failure{-1, EAGAIN});
    REQUIRE(fcntl(ch->pub.fd, F_SETFL, 0) == 0);

    std::atomic<bool> posted{false};
    std::thread poster([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        posted = true;
        ch->post(removal_for(dev, *id, 5));
    });
    REQUIRE(rdma_get_cm_event(&ch->pub, &event) == 0);  // blocks until the post
    CHECK(posted);
    poster.join();
    CHECK(event->event == RDMA_CM_EVENT_DEVICE_REMOVAL);
    CHECK(event->status == 0);
    CHECK(event->id == &id->pub);
    CHECK(event->listen_id == nullptr);
    CHECK_FALSE(readable(ch->pub.fd));

    // rdma_destroy_id waits for the acknowledgement of the events it handed out.
    dev.dead = true;  // no daemon to tell
    std::atomic<bool> destroyed{false};
    std::thread destroyer([&] {
        CHECK(rdma_destroy_id(&id->pub) == 0);
        destroyed = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(destroyed);
    CHECK(rdma_ack_cm_event(event) == 0);
    destroyer.join();
    CHECK(destroyed);
    CHECK(dev.ids.empty());

    // An event whose id is gone is dropped, not handed out.
    Id gone;
    ch->post(removal_for(dev, gone, 5));
    REQUIRE(fcntl(ch->pub.fd, F_SETFL, O_NONBLOCK) == 0);
    CHECK(failure([&] { return rdma_get_cm_event(&ch->pub, &event); }) == Failure{-1, EAGAIN});
    Channel::destroy(ch);
}

TEST_CASE("a thread waiting in rdma_get_cm_event while another destroys the channel stays waiting") {
    // rping's event thread is blocked in rdma_get_cm_event while its main thread destroys the id
    // and the channel, then returns from main: on Linux the blocked read stays blocked. Here
    // too, and the channel's memory stays valid for it; the descriptor it polls is not closed.
    Channel* ch = nullptr;
    REQUIRE(Channel::create(&ch) == 0);
    const int fd = ch->pub.fd;
    std::atomic<int> returned{0};
    std::thread waiter([&] {
        rdma_cm_event* event = nullptr;
        returned = rdma_get_cm_event(&ch->pub, &event) == 0 ? 1 : 2;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Channel::destroy(ch);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(returned == 0);
    CHECK(fcntl(fd, F_GETFD) >= 0);  // still open: a number the application could get back is not polled
    waiter.detach();                 // it waits until the process ends, as on Linux
}

TEST_CASE("without a device: ENODEV where librdmacm's ucma_init fails, EINVAL before it") {
    CHECK(rdma_create_event_channel() == nullptr);
    CHECK(errno == ENODEV);
    rdma_cm_id* id = nullptr;
    CHECK(failure([&] { return rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP); }) == Failure{-1, ENODEV});
    int n = -1;
    CHECK(rdma_get_devices(&n) == nullptr);
    CHECK(errno == ENODEV);
    CHECK(n == 0);
    rdma_addrinfo* res = nullptr;
    rdma_addrinfo hints{};
    hints.ai_flags = RAI_PASSIVE;
    CHECK(failure([&] { return rdma_getaddrinfo(nullptr, "7471", &hints, &res); }) == Failure{-1, ENODEV});
    CHECK(failure([&] { return rdma_getaddrinfo(nullptr, nullptr, nullptr, &res); }) == Failure{-1, EINVAL});
    rdma_freeaddrinfo(nullptr);
}

TEST_CASE("bad arguments get rdma-core's errno") {
    Channel* ch = nullptr;
    REQUIRE(Channel::create(&ch) == 0);
    Id id;  // an idle id: nothing bound, no daemon id
    id.pub.channel = &ch->pub;
    id.pub.ps = RDMA_PS_TCP;
    id.pub.qp_type = IBV_QPT_RC;
    rdma_cm_id* cm = &id.pub;
    rdma_cm_event* event = nullptr;
    sockaddr_in in{};
    in.sin_family = AF_INET;
    sockaddr unix_addr{};
    unix_addr.sa_family = AF_UNIX;
    const Failure einval{-1, EINVAL};

    CHECK(failure([&] { return rdma_create_id(&ch->pub, nullptr, nullptr, RDMA_PS_TCP); }) == einval);
    CHECK(failure([&] { return rdma_get_cm_event(nullptr, &event); }) == einval);
    CHECK(failure([&] { return rdma_get_cm_event(&ch->pub, nullptr); }) == einval);
    CHECK(failure([&] { return rdma_ack_cm_event(nullptr); }) == einval);
    CHECK(failure([&] { return rdma_bind_addr(cm, nullptr); }) == einval);
    CHECK(failure([&] { return rdma_bind_addr(cm, &unix_addr); }) == einval);
    CHECK(failure([&] { return rdma_resolve_addr(cm, nullptr, nullptr, 2000); }) == einval);
    CHECK(failure([&] { return rdma_resolve_addr(cm, &unix_addr, reinterpret_cast<sockaddr*>(&in), 2000); }) == einval);
    // States: nothing resolved, connected or bound yet.
    CHECK(failure([&] { return rdma_resolve_route(cm, 2000); }) == einval);
    rdma_conn_param param{};
    CHECK(failure([&] { return rdma_connect(cm, &param); }) == einval);
    CHECK(failure([&] { return rdma_accept(cm, &param); }) == einval);
    CHECK(failure([&] { return rdma_reject(cm, nullptr, 0); }) == einval);
    CHECK(failure([&] { return rdma_disconnect(cm); }) == einval);
    CHECK(failure([&] { return rdma_establish(cm); }) == einval);
    CHECK(failure([&] { return rdma_notify(cm, IBV_EVENT_COMM_EST); }) == einval);
    ibv_qp_attr qp_attr{};
    int mask = 0;
    CHECK(failure([&] { return rdma_init_qp_attr(cm, &qp_attr, &mask); }) == einval);
    ibv_qp_init_attr init{};
    CHECK(failure([&] { return rdma_create_qp(cm, nullptr, &init); }) == einval);
    CHECK(failure([&] { return rdma_join_multicast(cm, reinterpret_cast<sockaddr*>(&in), nullptr); }) == einval);
    CHECK(failure([&] { return rdma_leave_multicast(cm, reinterpret_cast<sockaddr*>(&in)); }) ==
          Failure{-1, EADDRNOTAVAIL});
    rdma_cm_join_mc_attr_ex mc{};
    mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
    CHECK(failure([&] { return rdma_join_multicast_ex(cm, &mc, nullptr); }) == Failure{-1, ENOTSUP});
    mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    CHECK(failure([&] { return rdma_join_multicast_ex(cm, &mc, nullptr); }) == einval);
    CHECK(failure([&] { return rdma_get_request(cm, &cm); }) == einval);  // not a synchronous id
    CHECK(failure([&] { return rdma_migrate_id(nullptr, &ch->pub); }) == einval);

    // Options: lengths and levels as the kernel's ucma_set_option checks them.
    uint8_t tos = 32;
    int on = 1;
    CHECK(rdma_set_option(cm, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) == 0);
    CHECK(rdma_set_option(cm, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on) == 0);
    CHECK(id.options.size() == 2);  // kept for the daemon id the id gets later
    CHECK(failure([&] { return rdma_set_option(cm, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &on, sizeof on); }) == einval);
    CHECK(failure([&] { return rdma_set_option(cm, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &tos, 1); }) == einval);
    CHECK(failure([&] { return rdma_set_option(cm, RDMA_OPTION_ID, 99, &on, sizeof on); }) == Failure{-1, ENOSYS});
    CHECK(failure([&] { return rdma_set_option(cm, 7, 0, &on, sizeof on); }) == Failure{-1, ENOSYS});
    CHECK(failure([&] { return rdma_set_option(cm, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, nullptr, 1); }) ==
          Failure{-1, EFAULT});
    CHECK(failure([&] { return rdma_set_option(cm, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &on, 3); }) == einval);
    Id udp;
    udp.pub.ps = RDMA_PS_UDP;
    udp.pub.qp_type = IBV_QPT_UD;
    CHECK(failure([&] { return rdma_set_option(&udp.pub, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tos, 1); }) ==
          einval);

    ibv_ece ece{};
    CHECK(failure([&] { return rdma_set_local_ece(cm, &ece); }) == einval);  // vendor_id 0
    ece.vendor_id = 0x15b3;
    CHECK(rdma_set_local_ece(cm, &ece) == 0);
    CHECK(rdma_get_remote_ece(cm, &ece) == 0);
    CHECK(ece.vendor_id == 0);  // the CM carries no ECE
    CHECK(failure([&] { return rdma_get_remote_ece(cm, nullptr); }) == einval);

    CHECK(rdma_get_src_port(cm) == 0);
    CHECK(rdma_get_dst_port(nullptr) == 0);
    CHECK(rdma_get_local_addr(cm)->sa_family == AF_UNSPEC);
    Channel::destroy(ch);
}

TEST_CASE("rdma_event_str names every event as librdmacm does") {
    CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED)) == "RDMA_CM_EVENT_ADDR_RESOLVED");
    CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_CONNECT_REQUEST)) == "RDMA_CM_EVENT_CONNECT_REQUEST");
    CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_DEVICE_REMOVAL)) == "RDMA_CM_EVENT_DEVICE_REMOVAL");
    CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT)) == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    CHECK(std::string(rdma_event_str(static_cast<rdma_cm_event_type>(99))) == "UNKNOWN EVENT");
}

int main(int argc, char** argv) {
    char dir[] = "/tmp/rdmacm-unit-XXXXXX";
    if (mkdtemp(dir) == nullptr) return 1;
    setenv("RNIC_RUN_DIR", dir, 1);
    const int rc = Catch::Session().run(argc, argv);
    rmdir(dir);
    return rc;
}
