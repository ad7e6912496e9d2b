// Connection management on the control socket: what librdmacm asks of rnicd, as rdma-core's
// librdmacm asks the kernel's rdma_ucm (<rdma/rdma_user_cm.h>). rnicd holds the communication
// identifiers, the IB CM state machine on its GSI QP (QP 1), address and route resolution and
// the CM's retransmissions; the library holds the application's rdma_cm_id, creates the QPs
// through libibverbs and moves them through INIT/RTR/RTS with the attributes rnicd gives
// (CmInitQpAttr), as librdmacm does with the kernel's.
//
// Ids and channels belong to the session that created them and are destroyed with it (a
// connected id then sends DREQ, one being connected REJ, as Linux does when a process dies).
// A channel's socket (the daemon makes the pair, like a completion channel's) is readable while
// the channel has events queued; CmGetEvent takes the oldest. Enumerated fields carry
// librdmacm's values (enum rdma_cm_event_type, enum rdma_port_space, ibv_qp_type, ibv_mtu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rnic/host/abi/control.hpp"

namespace rnic::host::abi {

// Op values of the CM messages: they continue control.hpp's Op numbering without a gap (the
// daemon's op table has one row per op number).
enum class CmOp : uint16_t {
    CreateChannel = 25,  // no body; reply HandleReply, fds [channel socket, the daemon's end]
    DestroyChannel = 26,  // HandleRequest; EBUSY while ids still report to it
    CreateId = 27,        // CmCreateIdRequest -> HandleReply
    DestroyId = 28,       // HandleRequest -> CmDestroyIdReply
    MigrateId = 29,       // CmMigrateIdRequest -> CmDestroyIdReply (events reported on the old channel)
    BindAddr = 30,        // CmAddrRequest -> CmQueryReply
    ResolveAddr = 31,     // CmResolveAddrRequest; later ADDR_RESOLVED or ADDR_ERROR
    ResolveRoute = 32,    // CmTimeoutRequest; later ROUTE_RESOLVED or ROUTE_ERROR
    Query = 33,           // HandleRequest -> CmQueryReply
    Listen = 34,          // CmListenRequest
    Connect = 35,         // CmConnectRequest: REQ (RC/UC) or SIDR_REQ (UD)
    Accept = 36,          // CmConnectRequest: REP (passive side), RTU (active side after CONNECT_RESPONSE), SIDR_REP
    Reject = 37,          // CmRejectRequest: REJ or SIDR_REP with a status
    Disconnect = 38,      // HandleRequest: DREQ, or DREP when the peer's DREQ came first
    InitQpAttr = 39,      // CmInitQpAttrRequest -> CmInitQpAttrReply
    Notify = 40,          // CmNotifyRequest: rdma_notify (a QP event that makes the connection established)
    SetOption = 41,       // CmSetOptionRequest
    GetEvent = 42,        // HandleRequest (channel) -> CmEvent; EAGAIN when none is queued
    JoinMulticast = 43,   // CmJoinRequest -> HandleReply (ENOSYS until multicast is built)
    LeaveMulticast = 44,  // CmLeaveRequest
    Establish = 45,       // HandleRequest: rdma_establish (the active side's RTU without CONNECT_RESPONSE)
};
inline constexpr uint16_t kCmOpFirst = 25;
inline constexpr uint16_t kCmOpLast = 45;
// Verbs ops added after the CM's continue from here (control.hpp's Op; op_table.cpp: row i is
// op i + 1): AllocMw 46, DeallocMw 47, ResizeCq 48, ReregMr 49.
inline constexpr uint16_t kOpResizeCq = kCmOpLast + 3;
static_assert(kOpResizeCq == static_cast<uint16_t>(Op::ResizeCq));
inline constexpr uint16_t kOpReregMr = kCmOpLast + 4;
static_assert(kOpReregMr == static_cast<uint16_t>(Op::ReregMr));

inline constexpr uint32_t kCmPrivateDataMax = 256;  // the largest a CM MAD carries (MRA's 222 rounded up)
inline constexpr uint32_t kCmBacklogMax = 1024;     // CONNECT_REQUESTs queued per listener, at most
inline constexpr uint32_t kCmEventsQueuedMax = 4096;  // per channel; past it the id's operation fails (ENOBUFS)

// A socket address in one shape for both families: IPv4 as ::ffff:a.b.c.d, port in host order.
// family 0 means "any" (an unbound source, a wildcard listen).
struct CmAddress {
    uint16_t family;  // AF_INET, AF_INET6 or 0
    uint16_t port;
    uint32_t scope_id;  // IPv6 link-local scope (ignored for IPv4)
    uint8_t addr[16];
};
static_assert(sizeof(CmAddress) == 24);

struct CmCreateIdRequest {
    uint32_t channel;  // a channel of this session
    uint32_t port_space;  // enum rdma_port_space: RDMA_PS_TCP, UDP, IB, IPOIB
    uint32_t qp_type;     // enum ibv_qp_type: IBV_QPT_RC, UC or UD
    uint32_t reserved;
};

struct CmDestroyIdReply {
    // Events of this id CmGetEvent has handed out (the library waits for their acks); a
    // CONNECT_REQUEST counts for the listening id, as ucma counts it.
    uint32_t events_reported;
    uint32_t reserved;
};

struct CmMigrateIdRequest {
    uint32_t id;
    uint32_t channel;  // the new channel; queued events of the id move with it
};

struct CmAddrRequest {  // BindAddr
    uint32_t id;
    uint32_t reserved;
    CmAddress addr;  // port 0: rnicd picks a free one in the port space
};

struct CmResolveAddrRequest {
    uint32_t id;
    uint32_t timeout_ms;
    CmAddress src;  // family 0: the device's address of the destination's family
    CmAddress dst;
};

struct CmTimeoutRequest {  // ResolveRoute
    uint32_t id;
    uint32_t timeout_ms;
};

// What rdma_query_addr/route and the rdma_cm_id's route show.
struct CmQueryReply {
    CmAddress src;
    CmAddress dst;
    uint8_t sgid[16];
    uint8_t dgid[16];
    uint8_t dmac[6];  // the neighbour's MAC once the address is resolved
    uint16_t pkey;
    uint8_t port_num;
    uint8_t path_count;  // 0 before ROUTE_RESOLVED, then 1
    uint8_t hop_limit;
    uint8_t traffic_class;
    uint32_t flow_label;
    uint32_t path_mtu;  // enum ibv_mtu
    uint8_t sl;
    uint8_t packet_life_time;
    uint8_t sgid_index;
    uint8_t state;  // the id's rdma_cm state (docs/rdma_cm.md), for tools
    uint32_t reserved;
};

struct CmListenRequest {
    uint32_t id;
    uint32_t backlog;  // 0: the default; capped at kCmBacklogMax
};

struct CmConnParam {  // struct rdma_conn_param and struct rdma_ud_param's common part
    uint32_t private_data_len;
    uint32_t qp_num;
    uint32_t qkey;  // UD ids
    uint8_t responder_resources;
    uint8_t initiator_depth;
    uint8_t flow_control;
    uint8_t retry_count;  // ignored on accept, as Linux
    uint8_t rnr_retry_count;
    uint8_t srq;
    uint8_t reserved[2];
    uint8_t private_data[kCmPrivateDataMax];
};
static_assert(sizeof(CmConnParam) == 20 + kCmPrivateDataMax);

struct CmConnectRequest {  // Connect and Accept
    uint32_t id;
    uint32_t reserved;
    CmConnParam param;
};

struct CmRejectRequest {
    uint32_t id;
    uint32_t reason;  // 0: consumer reject (IB_CM_REJ_CONSUMER_DEFINED)
    uint32_t private_data_len;
    uint32_t reserved;
    uint8_t private_data[kCmPrivateDataMax];
};

struct CmInitQpAttrRequest {
    uint32_t id;
    uint32_t qp_state;  // enum ibv_qp_state: INIT, RTR or RTS
};
struct CmInitQpAttrReply {
    QpAttr attr;
    uint32_t attr_mask;  // enum ibv_qp_attr_mask
    uint32_t reserved;
};

struct CmNotifyRequest {
    uint32_t id;
    uint32_t event;  // enum ibv_event_type
};

struct CmSetOptionRequest {
    uint32_t id;
    uint32_t level;    // RDMA_OPTION_ID, RDMA_OPTION_IB
    uint32_t optname;  // RDMA_OPTION_ID_TOS, _REUSEADDR, _AFONLY, _ACK_TIMEOUT, RDMA_OPTION_IB_PATH
    uint32_t value;
};

struct CmJoinRequest {
    uint32_t id;
    uint32_t join_flags;
    CmAddress group;
};
struct CmLeaveRequest {
    uint32_t id;
    uint32_t reserved;
    CmAddress group;
};

// One event as CmGetEvent hands it out. `status` as Linux reports it: 0, a negative errno
// (ADDR_ERROR -EHOSTUNREACH or -ETIMEDOUT, UNREACHABLE -ETIMEDOUT, CONNECT_ERROR -ECONNRESET...),
// or for REJECTED the IB CM reject reason (positive, e.g. 8 for no listener on the service).
struct CmEvent {
    uint32_t event;  // enum rdma_cm_event_type
    int32_t status;
    uint32_t id;         // the id the event is for; CONNECT_REQUEST: the new id, owned by this session
    uint32_t listen_id;  // CONNECT_REQUEST: the listening id; else 0
    CmAddress src;       // CONNECT_REQUEST: the new id's local and remote addresses
    CmAddress dst;
    CmConnParam param;  // private data (rdma_cm's header stripped, as Linux does) and the peer's parameters
    AddressVector ah_attr;  // UD (SIDR_REP, CONNECT_REQUEST on UD): where to send, for the UD param's AH
    uint32_t reserved;
};

}  // namespace rnic::host::abi
