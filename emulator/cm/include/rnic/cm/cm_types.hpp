// What the connection manager (cm_service.hpp) is configured with, what it exchanges with the
// daemon around it (MADs in and out, neighbour lookups, per-user admission, channel wake-ups), and
// the values of Linux's and rdma-core's enums it computes with.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "rnic/common/counter_macros.hpp"
#include "rnic/wire/gid.hpp"
#include "rnic/wire/headers.hpp"
#include "rnic/wire/mad.hpp"

namespace rnic::cm {

// Socket address families as Linux numbers them (the ABI's CmAddress carries these).
inline constexpr uint16_t kAfInet = 2;
inline constexpr uint16_t kAfInet6 = 10;

// enum rdma_cm_event_type (rdma-core's <rdma/rdma_cma.h>).
enum class EventType : uint32_t {
    AddrResolved = 0,
    AddrError = 1,
    RouteResolved = 2,
    RouteError = 3,
    ConnectRequest = 4,
    ConnectResponse = 5,
    ConnectError = 6,
    Unreachable = 7,
    Rejected = 8,
    Established = 9,
    Disconnected = 10,
    DeviceRemoval = 11,
    MulticastJoin = 12,
    MulticastError = 13,
    AddrChange = 14,
    TimewaitExit = 15,
};
std::string_view event_name(EventType e) noexcept;  // "RDMA_CM_EVENT_ESTABLISHED", ...

// enum rdma_cm_state of Linux's cma_priv.h: what CmQueryReply::state and rnicctl show.
enum class RdmaState : uint8_t {
    Idle = 0,
    AddrQuery = 1,
    AddrResolved = 2,
    RouteQuery = 3,
    RouteResolved = 4,
    Connect = 5,
    Disconnect = 6,
    AddrBound = 7,
    Listen = 8,
    DeviceRemoval = 9,
    Destroying = 10,
};
std::string_view rdma_state_name(RdmaState s) noexcept;  // "RDMA_CM_CONNECT", ...

// enum ib_cm_state of Linux's <rdma/ib_cm.h>: the IB CM's state of a connection.
enum class IbState : uint8_t {
    Idle = 0,
    Listen = 1,
    ReqSent = 2,
    ReqRcvd = 3,
    MraReqSent = 4,
    MraReqRcvd = 5,
    RepSent = 6,
    RepRcvd = 7,
    MraRepSent = 8,
    MraRepRcvd = 9,
    Established = 10,
    DreqSent = 11,
    DreqRcvd = 12,
    Timewait = 13,
    SidrReqSent = 14,
    SidrReqRcvd = 15,
};
std::string_view ib_state_name(IbState s) noexcept;  // "IB_CM_ESTABLISHED", ...

// rdma-core's verbs and rdma_cm values the CM reads or fills in.
namespace verbs {
inline constexpr uint32_t kQptRc = 2;  // enum ibv_qp_type
inline constexpr uint32_t kQptUc = 3;
inline constexpr uint32_t kQptUd = 4;
inline constexpr uint32_t kQpsInit = 1;  // enum ibv_qp_state
inline constexpr uint32_t kQpsRtr = 2;
inline constexpr uint32_t kQpsRts = 3;
// enum ibv_qp_attr_mask
inline constexpr uint32_t kQpState = 1u << 0;
inline constexpr uint32_t kQpAccessFlags = 1u << 3;
inline constexpr uint32_t kQpPkeyIndex = 1u << 4;
inline constexpr uint32_t kQpPort = 1u << 5;
inline constexpr uint32_t kQpQkey = 1u << 6;
inline constexpr uint32_t kQpAv = 1u << 7;
inline constexpr uint32_t kQpPathMtu = 1u << 8;
inline constexpr uint32_t kQpTimeout = 1u << 9;
inline constexpr uint32_t kQpRetryCnt = 1u << 10;
inline constexpr uint32_t kQpRnrRetry = 1u << 11;
inline constexpr uint32_t kQpRqPsn = 1u << 12;
inline constexpr uint32_t kQpMaxQpRdAtomic = 1u << 13;
inline constexpr uint32_t kQpMinRnrTimer = 1u << 15;
inline constexpr uint32_t kQpSqPsn = 1u << 16;
inline constexpr uint32_t kQpMaxDestRdAtomic = 1u << 17;
inline constexpr uint32_t kQpDestQpn = 1u << 20;
// enum ibv_access_flags
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;
inline constexpr uint32_t kAccessRemoteRead = 1u << 2;
inline constexpr uint32_t kAccessRemoteAtomic = 1u << 3;
// enum ibv_event_type: the QP events rdma_notify passes on
inline constexpr uint32_t kEventCommEst = 4;
inline constexpr uint32_t kEventPathMig = 6;
// rdma_set_option levels and names (<rdma/rdma_cma.h>)
inline constexpr uint32_t kOptionId = 0;
inline constexpr uint32_t kOptionIdTos = 0;
inline constexpr uint32_t kOptionIdReuseAddr = 1;
inline constexpr uint32_t kOptionIdAfOnly = 2;
inline constexpr uint32_t kOptionIdAckTimeout = 3;
inline constexpr uint32_t kOptionIb = 1;
inline constexpr uint32_t kOptionIbPath = 1;
// The Q_Key rdma_cm gives UD ids of the UDP and IB port spaces (RDMA_UDP_QKEY).
inline constexpr uint32_t kRdmaUdpQkey = 0x01234567;
}  // namespace verbs

// What a neighbour lookup found: the MAC (Resolved), not yet (Pending: a request is out, ask again
// later) or never (Unreachable: off-link, or the neighbour did not answer).
enum class Resolution : uint8_t { Resolved, Pending, Unreachable };
using Resolver = std::function<Resolution(const wire::Gid& dgid, uint64_t now_ns, wire::MacAddr& mac)>;

// One address of the port, at its GID index.
struct LocalAddress {
    wire::Gid gid;  // IPv4 as ::ffff:a.b.c.d
    uint8_t prefix_length = 0;
};

struct CmConfig {
    uint64_t node_guid = 0;           // the CA GUID of REQ and REP, and the ARI of a timeout REJ
    uint8_t local_ca_ack_delay = 15;  // REP's target ACK delay, and the ACK timeout's share of it
    uint32_t active_mtu = 3;          // enum ibv_mtu: the path MTU of routes this port resolves
    // The port's GID table in index order (the engine's): source addresses, sgid_index, and the
    // addresses a REQ may name as ours.
    std::vector<LocalAddress> addresses;
    // Where ports bound to port 0 come from (Linux's ip_local_port_range default).
    uint16_t ephemeral_low = 32768;
    uint16_t ephemeral_high = 60999;
    uint8_t hop_limit = 64;      // of routes (the IP stack's default TTL)
    uint32_t hi_tid = 1;         // upper half of the transaction IDs this CM makes (Linux: the MAD agent's)
    uint64_t seed = 0;           // communication IDs, PSNs and ports; 0: from std::random_device
    size_t max_outbound = 4096;  // MADs queued for the port; past it one is dropped (and resent later)
    // Peers with connections that fall silent are probed (peer_liveness.cpp): after idle_ms
    // without a MAD from them, a probe every probe_ms; `probes` unanswered and their connections
    // are DISCONNECTED (-ETIMEDOUT). idle_ms 0: never (Linux's behaviour).
    uint32_t keepalive_idle_ms = 5000;
    uint32_t keepalive_probe_ms = 2000;
    uint32_t keepalive_probes = 4;
};

// Where a MAD goes, or came from (`remote_*`: the peer).
struct MadRoute {
    wire::Gid local_gid;
    wire::Gid remote_gid;
    uint32_t remote_qpn = 1;
    uint8_t traffic_class = 0;
    uint8_t hop_limit = 64;
    uint32_t flow_label = 0;
    uint16_t pkey = 0xFFFF;
};

struct OutboundMad {
    MadRoute route;
    wire::Mad mad;
};

// The daemon around the CM: wake-ups for channels and accounting of ids per owner (a session).
class CmHooks {
public:
    virtual ~CmHooks() = default;
    // An event was queued on `channel` (the host server writes one byte to its socket).
    virtual void event_queued(uint32_t channel) = 0;
    // Whether `owner` may hold one more id: 0, or the errno its creation fails with. Ids a REQ
    // or SIDR_REQ makes ask too; refused, the request is dropped as Linux drops one it cannot
    // take (no REJ: the peer's retry may find room).
    virtual int admit_id(uint32_t owner) = 0;
    virtual void id_released(uint32_t owner) = 0;
    // Whether `owner` may bind ports below 1024 (Linux: CAP_NET_BIND_SERVICE).
    virtual bool privileged(uint32_t owner) = 0;
};

#define RNIC_CM_COUNTERS(X)                                                                        \
    X(mads_received)                                                                               \
    X(mads_sent)                                                                                   \
    X(mads_resent)    /* retransmissions of REQ, REP, DREQ, SIDR_REQ */                            \
    X(bad_mads)       /* not a MAD the CM can decode: length, class, version, method, attribute */ \
    X(unmatched_mads) /* unknown communication ids, messages the state does not expect */          \
    X(duplicates)     /* REQ, REP, RTU, DREQ, MRA, SIDR_REQ seen again */                          \
    X(req_sent)                                                                                    \
    X(req_received)                                                                                \
    X(mra_sent)                                                                                    \
    X(mra_received)                                                                                \
    X(rej_sent)                                                                                    \
    X(rej_received)                                                                                \
    X(rep_sent)                                                                                    \
    X(rep_received)                                                                                \
    X(rtu_sent)                                                                                    \
    X(rtu_received)                                                                                \
    X(dreq_sent)                                                                                   \
    X(dreq_received)                                                                               \
    X(drep_sent)                                                                                   \
    X(drep_received)                                                                               \
    X(sidr_req_sent)                                                                               \
    X(sidr_req_received)                                                                           \
    X(sidr_rep_sent)                                                                               \
    X(sidr_rep_received)                                                                           \
    X(class_port_info_answered)                                                                    \
    X(unsupported_answered) /* Gets and Sets answered "unsupported", as Linux's MAD layer */       \
    X(send_timeouts)        /* REQ, REP, DREQ, SIDR_REQ out of retries */                          \
    X(requests_dropped)     /* REQ or SIDR_REQ not taken: backlog, owner's limit, full channel */  \
    X(outbound_dropped)     /* MADs dropped with the outbound queue full */                        \
    X(established)                                                                                 \
    X(keepalives_sent)      /* probes of silent peers with connections */                          \
    X(keepalive_answers)                                                                           \
    X(peers_lost)           /* peers that stopped answering: their connections DISCONNECTED */     \
    X(orphaned_disconnects) /* ids destroyed while connected, the CM finishing their disconnect */ \
    X(timewait_exits)

struct CmCounters {
    RNIC_COUNTER_MEMBERS(RNIC_CM_COUNTERS)
};

}  // namespace rnic::cm
