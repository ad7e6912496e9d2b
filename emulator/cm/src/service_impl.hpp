// The connection manager's state, shared by the files that implement it: ids (an rdma_cm id and
// its IB CM connection in one, since rdma_cm gives each id at most one), channels, the port
// spaces' bind lists, the lookup tables the IB CM keeps (local and remote communication ids,
// remote QPNs, SIDR requests), timers and the outbound queue.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "rnic/cm/cm_service.hpp"
#include "rnic/common/timer_queue.hpp"
#include "rnic/wire/cm_messages.hpp"
#include "rnic/wire/rdma_cm_header.hpp"

namespace rnic::cm {

namespace abi = host::abi;

// Linux's constants for rdma_cm over the IB CM (cma.c): every REQ asks for a 2^20 * 4.096 us
// (4.3 s) response, retries 15 times; routes over RoCE get packet life time 18 (1 s).
inline constexpr uint8_t kCmResponseTimeout = 20;
inline constexpr uint8_t kMaxCmRetries = 15;
inline constexpr uint8_t kIboePacketLifeTime = 18;
// The MRA rdma_cm sends for a REQ (passive) or REP (active) the application has not answered yet,
// when the peer sends it again: service timeout 2^24 * 4.096 us (69 s). Linux's
// CMA_CM_MRA_SETTING carries IB_CM_MRA_FLAG_DELAY: the MRA goes out only with a duplicate.
inline constexpr uint8_t kMraServiceTimeout = 24;
// Ids destroyed while connected that the CM keeps until their disconnect is done: each lives at
// most max_cm_retries DREQ timeouts plus a timewait, and each was a connected id, so a client
// reaches this only by connecting and destroying faster than peers answer. Past it, Linux's way.
inline constexpr uint32_t kMaxOrphans = 4096;
// An orphan's DREQ timeout and timewait at most this long, whatever the peer's REQ or REP asked
// (up to 2^23 ms): its life is bounded by about two minutes, not by the peer.
inline constexpr uint32_t kOrphanMaxWaitMs = 8192;

// cm_convert_to_ms: 4.096 us * 2^t in milliseconds, roughly.
inline uint32_t ms_of(uint8_t iba_time) noexcept {
    const int t = (iba_time & 0x1F) - 8;
    return 1u << (t > 0 ? t : 0);
}

// cm_ack_timeout: 4.096 us * 2^t for the ACK timeout = the CA's ACK delay + twice the packet life
// time, taking the larger and rounding up only when the other is within half of it.
inline uint8_t ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time) noexcept {
    int t = packet_life_time + 1;
    if (t >= ca_ack_delay)
        t += ca_ack_delay >= t - 1;
    else
        t = ca_ack_delay + (t >= ca_ack_delay - 1);
    return static_cast<uint8_t>(t < 31 ? t : 31);
}

// A socket address as rdma_cm keeps it; IPv4 as an IPv4-mapped GID.
struct Endpoint {
    uint16_t family = 0;  // 0 (none), kAfInet, kAfInet6
    uint16_t port = 0;
    uint32_t scope_id = 0;
    wire::Gid addr;

    // INADDR_ANY, in6addr_any and the loopback addresses (Linux's cma_any_addr).
    bool any() const noexcept;
    bool link_local() const noexcept;
    abi::CmAddress to_abi() const noexcept;
    // 0, EAFNOSUPPORT (a family other than 0, AF_INET, AF_INET6) or EINVAL (an AF_INET address
    // that is not IPv4-mapped).
    static int from_abi(const abi::CmAddress& a, Endpoint& out) noexcept;
};

// Linux's cma_addr_cmp: the same family and address (and scope for link-local IPv6).
bool same_address(const Endpoint& a, const Endpoint& b) noexcept;

// The route's path record, as rdma_cm fills one for RoCE (cma_resolve_iboe_route) or takes it
// from a REQ on the passive side.
struct Path {
    wire::Gid sgid;
    wire::Gid dgid;
    uint8_t sgid_index = 0;
    uint32_t flow_label = 0;
    uint8_t traffic_class = 0;
    uint8_t hop_limit = 64;
    uint8_t sl = 0;
    uint32_t mtu = 3;  // enum ibv_mtu
    uint8_t packet_life_time = kIboePacketLifeTime;
    uint8_t rate = 0;
};

enum TimerKind : uint8_t { kSendTimer = 0, kTimewaitTimer = 1, kResolveTimer = 2, kLivenessTimer = 3 };

struct BindList;

struct Id {
    uint32_t handle = 0;
    uint32_t owner = 0;
    uint32_t channel = 0;
    uint16_t port_space = 0;
    uint32_t qp_type = 0;
    RdmaState state = RdmaState::Idle;

    // rdma_set_option
    uint8_t tos = 0;
    bool tos_set = false;
    bool reuseaddr = false;
    bool afonly = false;
    bool afonly_set = false;
    uint8_t ack_timeout = 0;
    bool ack_timeout_set = false;

    Endpoint src;
    Endpoint dst;
    Endpoint bound_src;  // the source before address resolution chose one, restored on ADDR_ERROR
    BindList* bind = nullptr;

    // Address and route.
    bool have_dmac = false;
    wire::MacAddr dmac{};
    uint64_t resolve_deadline = 0;
    uint8_t sgid_index = 0;
    bool path_valid = false;
    Path path;

    // A listener: the connection requests it may hold untaken, and those it holds.
    uint32_t backlog = 0;
    std::vector<uint32_t> requests;
    // A connection a REQ made: its listener, until the application takes the CONNECT_REQUEST.
    uint32_t listener = 0;

    // What rdma_cm keeps for the connection.
    uint32_t seq_num = 0;  // the PSN this side receives from first (REQ or REP's starting PSN)
    uint32_t qp_num = 0;
    bool srq = false;
    uint32_t qkey = 0;
    bool has_ib = false;  // rdma_cm's cm_id.ib: connect, a REQ or SIDR_REQ, listen

    // The IB CM connection (ib_cm's cm_id_private).
    IbState ib = IbState::Idle;
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    uint64_t remote_ca_guid = 0;
    uint32_t remote_qpn = 0;
    uint32_t local_qpn = 0;
    uint64_t tid = 0;
    uint64_t service_id = 0;
    uint32_t sq_psn = 0;
    uint32_t rq_psn = 0;
    uint32_t path_mtu = 3;
    uint8_t responder_resources = 0;
    uint8_t initiator_depth = 0;
    uint8_t retry_count = 0;
    uint8_t rnr_retry_count = 0;
    uint8_t av_timeout = 0;  // ACK timeout of the QP and the timewait's length, 4.096 us * 2^n
    uint8_t target_ack_delay = 0;
    uint8_t service_timeout = 0;
    uint8_t max_cm_retries = 0;
    uint32_t timeout_ms = 0;  // how long a REQ, REP or DREQ waits for its answer
    bool in_remote_ids = false;
    bool in_remote_qpns = false;
    bool in_sidr = false;
    bool in_peer = false;  // counted among its peer's connections (peer_liveness.cpp)
    MadRoute route;  // where this connection's MADs go

    // The MAD waiting for an answer (REQ, REP, DREQ, SIDR_REQ) and its retransmissions.
    bool sending = false;
    wire::Mad sent{};
    IbState sent_state = IbState::Idle;
    uint32_t retries_left = 0;
    uint32_t send_timeout_ms = 0;
    // Private data of the last MRA, RTU or DREP, resent with them when a duplicate asks.
    std::array<uint8_t, wire::kCmRtuPrivateDataSize> saved_private{};

    common::Timer send_timer;
    common::Timer timewait_timer;
    common::Timer resolve_timer;
    uint32_t events_reported = 0;
    // Destroyed by its application while connected: the CM alone keeps it, to finish the
    // disconnect the peer is owed (DREQ retried until answered, a crossing DREQ answered),
    // and frees it when its timewait ends.
    bool orphan = false;
};

// The ids bound to one port of one port space (Linux's rdma_bind_list).
struct BindList {
    uint16_t port_space = 0;
    uint16_t port = 0;
    std::vector<Id*> owners;
};

// A node this CM has connections with, and whether it still answers (peer_liveness.cpp).
struct Peer {
    MadRoute route;
    std::unordered_set<uint32_t> connections;  // ids, established or disconnecting
    uint64_t last_heard = 0;                   // the last MAD from it, or its first connection
    uint32_t probes_unanswered = 0;
    uint64_t probe_sent = 0;
    uint64_t probe_tid = 0;
};

struct Channel {
    uint32_t handle = 0;
    uint32_t owner = 0;
    std::deque<abi::CmEvent> events;
    uint32_t ids = 0;  // ids reporting to it
};

struct CmService::Impl {
    Impl(CmConfig c, Resolver r, CmHooks* h);

    // ---- cm_service.cpp: ids, channels, events ----
    Id* find(uint32_t owner, uint32_t handle) const noexcept;
    Channel* find_channel(uint32_t owner, uint32_t handle) noexcept;
    uint32_t next_handle();
    uint32_t next_comm_id();
    // A new id of `owner` on `channel`; null (errno in `err`) when refused.
    Id* make_id(uint32_t owner, uint32_t channel, uint16_t ps, uint32_t qp_type, int& err);
    void free_id(Id& id, uint64_t now);  // releases everything; the id is gone afterwards
    void queue_event(Id& id, abi::CmEvent ev);
    abi::CmEvent event_for(const Id& id, EventType type, int32_t status) const;
    bool channel_full(const Id& id) const;

    // ---- addresses.cpp: port spaces, addresses, routes ----
    int bind(Id& id, const Endpoint& addr);
    int get_port(Id& id);
    int alloc_any_port(Id& id);
    int use_port(Id& id);
    int check_port(const BindList& bl, const Id& id, bool reuseaddr) const;
    bool port_is_unique(const BindList& bl, const Id& id) const;
    void bind_port(BindList& bl, Id& id);
    void release_port(Id& id);
    int own_address(const wire::Gid& gid) const;  // its GID index, or -1
    int pick_source(const Endpoint& dst, Endpoint& src) const;
    void poll_resolution(Id& id, uint64_t now);
    void fill_path(Id& id);
    uint16_t service_port_space(const Id& id) const;

    // ---- connection.cpp: what the application asks of a connection ----
    int send_req(Id& id, const abi::CmConnParam& param, uint64_t now);
    int send_sidr_req(Id& id, const abi::CmConnParam& param, uint64_t now);
    int send_rep(Id& id, const abi::CmConnParam& param, uint64_t now);
    int send_sidr_rep(Id& id, wire::CmSidrStatus status, uint32_t qkey, std::span<const uint8_t> pd, uint64_t now);
    int send_rtu(Id& id, uint64_t now);
    int send_rej(Id& id, wire::CmRejReason reason, std::span<const uint8_t> ari, std::span<const uint8_t> pd,
                 uint64_t now);
    int send_dreq(Id& id, uint64_t now);
    int send_drep(Id& id, uint64_t now);
    void send_mra_delayed(Id& id);  // Linux's ib_send_cm_mra with IB_CM_MRA_FLAG_DELAY
    int cm_establish(Id& id, uint64_t now);
    // rdma_destroy_id: what the IB CM state calls for on the wire, then the id is freed (with the
    // connection requests a listener holds untaken), or orphaned while its disconnect completes.
    void destroy_ib(Id& id, uint64_t now);
    bool orphan_disconnect(Id& id, uint64_t now);

    // ---- mad_receive.cpp ----
    void on_req(const MadRoute& from, const wire::Mad& mad, const wire::CmReq& req, uint64_t now);
    void on_mra(const wire::CmMra& m, uint64_t now);
    void on_rej(const wire::CmRej& m, uint64_t now);
    void on_rep(const MadRoute& from, const wire::Mad& mad, const wire::CmRep& m, uint64_t now);
    void on_rtu(const wire::CmRtu& m, uint64_t now);
    void on_dreq(const MadRoute& from, const wire::Mad& mad, const wire::CmDreq& m, uint64_t now);
    void on_drep(const wire::CmDrep& m, uint64_t now);
    void on_sidr_req(const MadRoute& from, const wire::Mad& mad, const wire::CmSidrReq& m, uint64_t now);
    void on_sidr_rep(const wire::CmSidrRep& m, uint64_t now);
    void on_get(const MadRoute& from, const wire::Mad& mad);
    Id* acquire(uint32_t local_comm_id, uint32_t remote_comm_id) const noexcept;  // remote 0: any
    // The listening id a REQ or SIDR_REQ for (ps, port) goes to: null when none matches, with
    // `listening` false when nobody listens on the service at all (Linux has no ib_cm listen then).
    Id* find_listener(uint16_t ps, uint16_t port, const wire::RdmaCmIpHeader& hdr, bool& listening) const;
    void new_connection_addresses(Id& id, const wire::RdmaCmIpHeader& hdr, uint16_t local_port);

    // ---- mad_send.cpp: the IB CM's sending side, timers ----
    uint64_t form_tid(const Id& id) const noexcept;
    void send(const MadRoute& to, const wire::Mad& mad);
    void send_cm(const MadRoute& to, const wire::CmMessage& msg, uint64_t tid);
    // Sends and keeps `mad` for retransmission every timeout_ms, at most `retries` times.
    void send_with_retries(Id& id, const wire::Mad& mad, uint32_t timeout_ms, uint32_t retries, uint64_t now);
    void cancel_send(Id& id);
    void modify_send_timeout(Id& id, uint32_t timeout_ms, uint64_t now);
    void send_timed_out(Id& id, uint64_t now);
    void enter_timewait(Id& id, uint64_t now);
    void reset_to_idle(Id& id);
    void timewait_expired(Id& id);
    void remove_remote(Id& id);
    void issue_rej(const MadRoute& to, const wire::Mad& received, uint32_t local_comm_id, uint32_t remote_comm_id,
                   wire::CmRejReason reason, wire::CmMsgResponse msg);
    void issue_drep(const MadRoute& to, const wire::Mad& received, const wire::CmDreq& dreq);
    void count_sent(wire::CmAttr attr);
    MadRoute route_of(const Path& p) const;

    // ---- peer_liveness.cpp ----
    bool liveness_on() const noexcept;
    uint32_t liveness_tick_ms() const noexcept;
    void peer_connected(Id& id, uint64_t now);  // the id's connection is established
    void peer_disconnected(Id& id);             // ... or over
    void heard_from(const wire::Gid& gid, uint64_t now);
    bool take_probe_answer(const MadRoute& from, const wire::Mad& mad);  // the answer to a probe of ours
    void send_probe(Peer& p, uint64_t now);
    void liveness_tick(uint64_t now);
    void peer_lost(const std::array<uint8_t, 16>& gid, uint64_t now);

    // ---- qp_attr.cpp ----
    int init_qp_attr(Id& id, uint32_t qp_state, abi::CmInitQpAttrReply& out);
    uint32_t default_qkey(Id& id);  // cma_set_qkey(id, 0)

    CmConfig config;
    Resolver resolver;
    CmHooks* hooks;
    CmCounters counters;
    std::mt19937_64 rng;
    uint32_t comm_id_operand = 0;
    uint32_t comm_id_next = 0;
    uint32_t handle_next = 0;
    uint32_t last_used_port = 0;
    uint32_t orphans = 0;

    std::unordered_map<uint32_t, std::unique_ptr<Id>> ids;
    std::unordered_map<uint32_t, Channel> channels;
    std::unordered_map<uint32_t, Id*> by_comm_id;                             // our communication ids
    std::map<std::pair<uint64_t, uint32_t>, Id*> remote_ids;                  // (CA GUID, comm id) of peers
    std::map<std::pair<uint64_t, uint32_t>, Id*> remote_qpns;                 // (CA GUID, QPN) of peers
    std::map<std::pair<std::array<uint8_t, 16>, uint32_t>, Id*> remote_sidr;  // (GID, request id)
    std::map<std::pair<uint16_t, uint16_t>, BindList> binds;                  // (port space, port)
    std::vector<uint32_t> resolving;                                          // ids in ADDR_QUERY
    std::map<std::array<uint8_t, 16>, Peer> peers;  // by GID
    common::Timer liveness_timer;
    uint32_t probe_seq = 0;
    common::TimerQueue timers;
    std::deque<OutboundMad> outbound;
};

}  // namespace rnic::cm
