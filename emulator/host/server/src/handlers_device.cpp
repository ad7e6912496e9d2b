// The ops on the device and the session itself: Hello, QueryPort, Stats, SetLogLevel.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "control_request.hpp"
#include "notify_socket.hpp"

namespace rnic::host::server {
namespace {

using namespace rnic::host::abi;
namespace tp = rnic::transport;

// IB width and speed for an Ethernet link of `mbps`, the table Linux 6.1's ib_get_eth_speed()
// gives every RoCE device (rxe included), so ibv_devinfo and perftest's rate report what the
// link is, not what an InfiniBand HCA would be. Unknown speed counts as 1 Gb/s there too.
struct IbRate {
    uint8_t width;  // IB_WIDTH_1X 1, 4X 2
    uint8_t speed;  // IB_SPEED_SDR 1, DDR 2, FDR10 8, EDR 32
};
IbRate ib_rate_of_ethernet(uint32_t mbps) {
    if (mbps == 0 || mbps <= 1000) return {1, 1};
    if (mbps <= 10000) return {1, 8};
    if (mbps <= 20000) return {2, 2};
    if (mbps <= 25000) return {1, 32};
    if (mbps <= 40000) return {2, 8};
    return {2, 32};
}

PortAttr port_attr(const tp::Engine& e, uint32_t ethernet_mtu, uint32_t link_speed_mbps) {
    const tp::PortAttributes p = e.query_port();
    PortAttr a{};
    a.state = p.active ? 4 : 1;  // IBV_PORT_ACTIVE : IBV_PORT_DOWN
    a.max_mtu = static_cast<uint32_t>(p.max_mtu);
    a.active_mtu = static_cast<uint32_t>(p.active_mtu);
    a.gid_tbl_len = p.gid_tbl_len;
    a.port_cap_flags = 1u << 26;  // IBV_PORT_IP_BASED_GIDS, as RoCE ports report
    a.max_msg_sz = p.max_msg_sz;
    a.pkey_tbl_len = p.pkey_tbl_len;
    const IbRate rate = ib_rate_of_ethernet(link_speed_mbps);
    a.active_width = rate.width;
    a.active_speed = rate.speed;
    a.phys_state = 5;  // LinkUp
    a.link_layer = 2;  // IBV_LINK_LAYER_ETHERNET
    a.ethernet_mtu = ethernet_mtu;
    return a;
}

DeviceAttr device_attr(const tp::Engine& e, const wire::MacAddr& mac) {
    const tp::DeviceAttributes d = e.query_device();
    const tp::DeviceLimits& l = d.limits;
    DeviceAttr a{};
    // EUI-64 from the MAC, as RoCE drivers derive the node GUID.
    const uint8_t g[8] = {uint8_t(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    for (uint8_t b : g) a.node_guid = (a.node_guid << 8) | b;
    a.sys_image_guid = a.node_guid;
    // What the engine really does: RNR NAKs for RC (IBV_DEVICE_RC_RNR_NAK_GEN) and a system
    // image GUID (IBV_DEVICE_SYS_IMAGE_GUID). No APM, XRC or SRQ resize.
    constexpr uint32_t kSysImageGuid = 1u << 11, kRcRnrNakGen = 1u << 12;
    a.device_cap_flags = kSysImageGuid | kRcRnrNakGen;
    // Memory windows, type 1 and 2B (IBV_DEVICE_MEM_WINDOW, IBV_DEVICE_MEM_WINDOW_TYPE_2B), as rxe.
    constexpr uint32_t kMemWindow = 1u << 17, kMemWindowType2B = 1u << 24;
    a.device_cap_flags |= kMemWindow | kMemWindowType2B;
    a.max_mw = l.max_mw;
    a.max_mr_size = l.max_mr_size;
    a.page_size_cap = d.page_size_cap;
    a.vendor_id = d.vendor_id;
    a.vendor_part_id = d.vendor_part_id;
    a.max_qp = l.max_qp;
    a.max_qp_wr = l.max_qp_wr;
    a.max_sge = l.max_sge;
    a.max_sge_rd = l.max_sge;
    a.max_cq = l.max_cq;
    a.max_cqe = l.max_cqe;
    a.max_mr = l.max_mr;
    a.max_pd = l.max_pd;
    a.max_qp_rd_atom = l.max_qp_rd_atom;
    a.max_qp_init_rd_atom = l.max_qp_init_rd_atom;
    a.max_res_rd_atom = l.max_qp_rd_atom * l.max_qp;
    a.atomic_cap = static_cast<uint32_t>(d.atomic_cap);
    a.max_srq = l.max_srq;
    a.max_srq_wr = l.max_srq_wr;
    a.max_srq_sge = l.max_srq_sge;
    a.max_ah = l.max_ah;
    a.max_inline_data = l.max_inline_data;
    a.max_msg_size = l.max_msg_size;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = d.phys_port_cnt;
    std::snprintf(a.fw_ver, sizeof a.fw_ver, "rnic %u", unsigned{kAbiVersion});
    return a;
}

}  // namespace

void HostService::Impl::on_hello(Request& rq, const HelloRequest& req) {
    Session& s = rq.s;
    if (!s.peer_known) {
        ++counters.sessions_refused;
        spdlog::warn("session {}: Hello refused: the peer's credentials are unknown", s.id);
        rq.fail(EACCES);
        close_session(s, "refused");
        return;
    }
    // A verbs context is the cgroup's hca_handle: over the uid's cap, EAGAIN, as
    // ibv_open_device gets it. Sessions whose peer already closed do not count.
    if (held_by(s.uid, Resource::Sessions) >= limits_of(s.uid)[Resource::Sessions]) reap_hung_up(s.uid, s);
    if (int rc = charge(s, Resource::Sessions); rc) {
        ++counters.sessions_refused;
        rq.fail(rc);
        close_session(s, "refused");
        return;
    }
    const uint32_t entries = round_up_power_of_two(std::max<uint32_t>(config.async_ring_entries, 1));
    const size_t doorbell_offset = page_round(ring_bytes(entries, sizeof(AsyncEventEntry)));
    if (int rc = s.async_memory.create("rnic-async", doorbell_offset + sizeof(DoorbellBits)); rc) {
        uncharge(s, Resource::Sessions);
        return rq.fail(rc);
    }
    // The daemon makes the session's notification descriptors itself (notify_socket.hpp):
    // none can make its writes or reads wait, whatever the client does to them.
    int kick_fd = -1;
    if (int rc = make_kick(kick_fd); rc) {
        uncharge(s, Resource::Sessions);
        return rq.fail(rc);
    }
    NotifyPair async_pair;
    if (int rc = make_notify_pair(async_pair); rc) {
        close(kick_fd);
        uncharge(s, Resource::Sessions);
        return rq.fail(rc);
    }
    s.async_ring = init_ring(s.async_memory.data(), entries, sizeof(AsyncEventEntry));
    s.doorbells = new (s.async_memory.data() + doorbell_offset) DoorbellBits{};
    s.async_fd = async_pair.daemon;
    s.kick.emplace(io, kick_fd);
    s.hello_done = true;
    auto out = std::make_unique<HelloReply>();
    std::memset(out.get(), 0, sizeof *out);
    std::snprintf(out->device_name, sizeof out->device_name, "%s", config.name.c_str());
    out->device = device_attr(engine, config.mac);
    out->port = port_attr(engine, config.ethernet_mtu, config.link_speed_mbps);
    std::memcpy(out->mac, config.mac.data(), 6);
    const auto& gids = engine.gids();
    out->gid_count = static_cast<uint16_t>(std::min<size_t>(gids.size(), kMaxGids));
    for (size_t i = 0; i < out->gid_count; ++i) {
        std::memcpy(out->gids[i], gids[i].raw.data(), 16);
        out->gid_types[i] = kGidTypeRoceV2;
    }
    out->async_ring_size = entries;
    out->status_page_size = static_cast<uint32_t>(status_memory.size());
    out->session_id = s.id;
    out->doorbell_offset = static_cast<uint32_t>(doorbell_offset);
    // Neither the async memfd nor the client's notification end stays open here once sent.
    const int async_memfd = s.async_memory.take_fd();
    const int out_fds[5] = {status_memory.fd(), kick_fd, async_memfd, async_pair.client, async_pair.daemon};
    spdlog::info("session {}: hello from pid {} uid {} (client pid {})", s.id, s.pid, s.uid, req.pid);
    rq.ok(*out, out_fds);
    close(async_pair.client);
    close(async_memfd);
}

void HostService::Impl::on_query_port(Request& rq) {
    rq.ok(port_attr(engine, config.ethernet_mtu, config.link_speed_mbps));
}

void HostService::Impl::on_stats(Request& rq, const StatsRequest& req) {
    if (req.what & ~(kStatsAll | kStatsCmIds)) return rq.fail(EINVAL);
    std::string json = stats_json(rq.s.uid, req.what ? req.what : kStatsAll, req.first_qpn);
    if (json.size() > kMaxMessage - sizeof(MessageHeader)) json = R"({"error":"statistics too large"})";
    reply(rq.s, rq.h, 0, {reinterpret_cast<const uint8_t*>(json.data()), json.size()});
}

void HostService::Impl::on_set_log_level(Request& rq, const SetLogLevelRequest& req) {
    const Session& s = rq.s;
    // The daemon's logging is the host's, not a user's: like writing a sysctl.
    if (!administers(s)) {
        spdlog::info("session {} (pid {}): uid {} may not set the log level: EPERM", s.id, s.pid, s.uid);
        return rq.fail(EPERM);
    }
    const std::string name(req.level, strnlen(req.level, sizeof req.level));
    static constexpr const char* kLevels[] = {"trace", "debug", "info",     "warn", "warning",
                                              "error", "err",   "critical", "off"};
    if (std::find_if(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return name == l; }) ==
        std::end(kLevels))
        return rq.fail(EINVAL);
    spdlog::set_level(spdlog::level::from_str(name));
    spdlog::info("log level set to {} by session {} (pid {})", name, s.id, s.pid);
    rq.fail(0);
}

}  // namespace rnic::host::server
