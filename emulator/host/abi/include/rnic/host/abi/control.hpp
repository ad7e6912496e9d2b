// The control protocol between a client (the verbs shim, rnicctl, tests) and rnicd: the slow
// path. One Unix SOCK_SEQPACKET connection per client at $RNIC_RUN_DIR/<device>.sock (default
// /run/rnic/rnic0.sock). Every message is a MessageHeader followed by the op's body; the daemon
// answers each request with the same op and seq, `status` 0 or a positive errno (as rdma-core
// returns it), and the reply body only when status is 0. File descriptors travel with
// SCM_RIGHTS on the message named in each op's comment. Enumerated and mask fields carry
// rdma-core's values. The daemon checks the peer with SO_PEERCRED, gives each connection its
// own objects, and reclaims them all when the connection closes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rnic::host::abi {

inline constexpr uint32_t kMagic = 0x434e5252;  // "RRNC" little-endian
// 2: HelloReply::gid_types. 3: doorbell bits (doorbell.hpp), and the daemon makes every
// notification descriptor (docs/host_interface.md): Hello and CreateCompChannel send none;
// completion and async events come on unix stream sockets (the reply carries the client's end
// and the daemon's); the kick eventfd is per session.
inline constexpr uint16_t kAbiVersion = 3;
inline constexpr size_t kMaxMessage = 64 * 1024;
inline constexpr size_t kMaxFdsPerMessage = 5;
inline constexpr const char* kDefaultRunDir = "/run/rnic";
inline constexpr const char* kRunDirEnv = "RNIC_RUN_DIR";
inline constexpr uint32_t kMaxGids = 16;
inline constexpr uint8_t kGidTypeRoceV2 = 2;  // enum ibv_gid_type: IBV_GID_TYPE_ROCE_V2
inline constexpr uint32_t kDeviceNameMax = 32;

enum class Op : uint16_t {
    // Hello reply fds: [status page memfd (read-only), the session's kick eventfd, async ring
    // memfd (the doorbell bits at doorbell_offset), async event socket, the daemon's end of it
    // (to make the client's end readable again)]
    Hello = 1,
    AllocPd = 2,
    DeallocPd = 3,
    ShareSegment = 4,  // req fds: [memfd holding the pages]
    ReleaseSegment = 5,
    RegMr = 6,
    DeregMr = 7,
    CreateCompChannel = 8,  // reply fds: [channel socket (one byte per event), the daemon's end of it]
    DestroyCompChannel = 9,
    CreateCq = 10,  // reply fds: [ring memfd]
    DestroyCq = 11,
    CreateSrq = 12,  // reply fds: [ring memfd]
    ModifySrq = 13,
    QuerySrq = 14,
    DestroySrq = 15,
    CreateQp = 16,  // reply fds: [memfd with the SQ ring, then the RQ ring (none with an SRQ)]
    ModifyQp = 17,
    QueryQp = 18,
    DestroyQp = 19,
    CreateAh = 20,
    DestroyAh = 21,
    QueryPort = 22,  // port state can change (link, MTU): asked again, not cached from Hello
    Stats = 23,      // reply body: JSON text (rnicctl)
    SetLogLevel = 24,
    // 25..45 are the CM's (cm.hpp); the verbs continue after them.
    AllocMw = 46,    // AllocMwRequest -> AllocMwReply
    DeallocMw = 47,  // HandleRequest (the window's handle)
    ResizeCq = 48,   // ResizeCqRequest; reply fds: [the new ring memfd]
    ReregMr = 49,    // ReregMrRequest + SegmentRun[run_count] -> RegMrReply (the keys, unchanged)
    SetCongestionParam = 50,  // SetCongestionParamRequest (the daemon's owner or root)
};

struct MessageHeader {
    uint32_t magic;
    uint16_t version;
    uint16_t op;
    uint32_t seq;
    uint32_t length;  // bytes, this header included
    int32_t status;   // replies: 0 or a positive errno
    uint32_t reserved;
};
static_assert(sizeof(MessageHeader) == 24);

// ---- attributes ----

struct DeviceAttr {  // struct ibv_device_attr, the fields a software RNIC fills
    uint64_t node_guid;
    uint64_t sys_image_guid;
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    uint32_t max_qp;
    uint32_t max_qp_wr;
    uint32_t device_cap_flags;
    uint32_t max_sge;
    uint32_t max_sge_rd;
    uint32_t max_cq;
    uint32_t max_cqe;
    uint32_t max_mr;
    uint32_t max_pd;
    uint32_t max_qp_rd_atom;
    uint32_t max_qp_init_rd_atom;
    uint32_t max_res_rd_atom;
    uint32_t atomic_cap;
    uint32_t max_srq;
    uint32_t max_srq_wr;
    uint32_t max_srq_sge;
    uint32_t max_ah;
    uint32_t max_inline_data;
    uint32_t max_msg_size;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay;
    uint8_t phys_port_cnt;
    uint32_t max_mw;
    char fw_ver[64];
};
static_assert(sizeof(DeviceAttr) == 32 + 22 * 4 + 4 + 4 + 64);

struct PortAttr {         // struct ibv_port_attr for a RoCE port
    uint32_t state;       // enum ibv_port_state
    uint32_t max_mtu;     // enum ibv_mtu
    uint32_t active_mtu;  // enum ibv_mtu
    uint32_t gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint16_t pkey_tbl_len;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer;  // IBV_LINK_LAYER_ETHERNET
    uint8_t reserved[2];
    uint32_t ethernet_mtu;  // the port's IP MTU, for tools
};
static_assert(sizeof(PortAttr) == 36);

struct AddressVector {  // struct ibv_ah_attr with its GRH (RoCE always has one)
    uint8_t dgid[16];
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
    uint8_t sl;
    uint8_t is_global;
    uint8_t port_num;
    uint8_t static_rate;
    uint8_t src_path_bits;
    uint16_t dlid;
    uint8_t dmac[6];  // replies only: what the daemon resolved (ARP or ND) for the dgid
};
static_assert(sizeof(AddressVector) == 36);

struct QpCaps {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
};
static_assert(sizeof(QpCaps) == 20);

struct QpAttr {  // struct ibv_qp_attr; which fields count is said by the attr_mask beside it
    uint32_t qp_state;
    uint32_t cur_qp_state;
    uint32_t path_mtu;
    uint32_t qkey;
    uint32_t rq_psn;
    uint32_t sq_psn;
    uint32_t dest_qp_num;
    uint32_t qp_access_flags;
    QpCaps cap;
    AddressVector ah_attr;
    uint16_t pkey_index;
    uint8_t en_sqd_async_notify;
    uint8_t sq_draining;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t port_num;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t reserved;
};
static_assert(sizeof(QpAttr) == 32 + 20 + 36 + 12);

// ---- request and reply bodies, by op ----

struct HelloRequest {
    uint32_t pid;  // informational; the daemon trusts SO_PEERCRED
    uint32_t flags;
};
struct HelloReply {
    char device_name[kDeviceNameMax];
    DeviceAttr device;
    PortAttr port;
    uint8_t mac[6];
    uint16_t gid_count;
    uint8_t gids[kMaxGids][16];
    uint32_t async_ring_size;   // entries of AsyncEventEntry in the async ring memfd
    uint32_t status_page_size;  // bytes of the status page memfd
    uint32_t session_id;
    uint32_t doorbell_offset;     // of the session's DoorbellBits (doorbell.hpp) in the async ring memfd
    uint8_t gid_types[kMaxGids];  // enum ibv_gid_type per GID (every GID of rnicd is RoCE v2)
};
static_assert(offsetof(HelloReply, gids) == 268 && offsetof(HelloReply, async_ring_size) == 524 &&
              offsetof(HelloReply, gid_types) == 540 && sizeof(HelloReply) == 560);

// The daemon's status page, mapped read-only by every client.
struct StatusPage {
    // Non-zero while the poll loop is (about to be) asleep: a client that rings a doorbell then
    // writes 1 to its session's kick eventfd. Both sides put a seq_cst fence between their
    // index store and their load of the other's flag/index, so a doorbell is never missed.
    alignas(64) std::atomic<uint32_t> sleeping;
    std::atomic<uint32_t> shutting_down;  // set on SIGTERM before clients are disconnected
    std::atomic<uint64_t> loop_turns;     // liveness, for tools
    // Non-zero while rnicd traces latency (rnicd --latency-trace): clients then stamp their
    // doorbells and kicks (DoorbellBits::doorbell_ns, kick_ns), which costs them a clock read.
    std::atomic<uint32_t> latency_trace;
};
static_assert(offsetof(StatusPage, latency_trace) == 16);

// Bodies: AllocPd, CreateCompChannel and QueryPort requests have none; Stats takes StatsRequest.
// Replies without a struct below (DeallocPd, ShareSegment, ModifyQp, Destroy*, ...) have none.
// HandleRequest: DeallocPd, DestroyCq, DestroySrq, DestroyAh, QuerySrq, DestroyCompChannel,
// DeregMr (lkey), ReleaseSegment (segment id), DestroyQp (qpn).
struct HandleRequest {
    uint32_t handle;
    uint32_t reserved;
};
struct HandleReply {  // AllocPd, CreateAh, CreateCompChannel
    uint32_t handle;
    uint32_t reserved;
};

struct ShareSegmentRequest {
    uint32_t segment_id;  // chosen by the client, unique within its connection
    uint32_t reserved;
    uint64_t length;  // bytes of the memfd to map (a multiple of the page size)
};

// Registered memory is described as runs of pages in segments the client shared earlier, so an
// MR may span segments (a buffer that partly overlaps an earlier registration).
struct SegmentRun {
    uint32_t segment_id;
    uint32_t reserved;
    uint64_t offset;  // into the segment, page-aligned
    uint64_t length;  // page multiple
};
struct RegMrRequest {
    uint32_t pd;
    uint32_t access;  // enum ibv_access_flags
    uint64_t addr;    // the client's virtual address of the buffer
    uint64_t length;
    uint64_t iova;         // what keys' users name it by (ibv_reg_mr: addr); same offset in its page
    uint32_t page_offset;  // addr's offset in its first page
    uint32_t run_count;    // SegmentRun entries following this struct
};
struct RegMrReply {
    uint32_t lkey;
    uint32_t rkey;
};

// ibv_rereg_mr (an op number after the CM's, abi/cm.hpp). `flags` are enum ibv_rereg_mr_flags;
// only the fields their bits name count. A translation is described as RegMr describes one:
// SegmentRun entries after the struct, or none for an on-demand region (the new rights, or the
// region's when CHANGE_ACCESS is absent, hold IBV_ACCESS_ON_DEMAND). Turning ON_DEMAND on or off
// needs CHANGE_TRANSLATION (the client library sends the region's current range then). The
// region keeps its keys (as mlx5 does when it re-registers in place); on any error it is
// unchanged (docs/host_interface.md, "Re-registering a region").
struct ReregMrRequest {
    uint32_t lkey;    // the region's handle
    uint32_t flags;   // IBV_REREG_MR_CHANGE_TRANSLATION 1, _CHANGE_PD 2, _CHANGE_ACCESS 4
    uint32_t pd;      // CHANGE_PD: a PD of this connection
    uint32_t access;  // CHANGE_ACCESS: enum ibv_access_flags
    uint64_t addr;    // CHANGE_TRANSLATION: as RegMrRequest
    uint64_t length;
    uint64_t iova;
    uint32_t page_offset;
    uint32_t run_count;
};
static_assert(sizeof(ReregMrRequest) == 48);
inline constexpr uint32_t kReregChangeTranslation = 1;  // IBV_REREG_MR_CHANGE_TRANSLATION
inline constexpr uint32_t kReregChangePd = 2;           // IBV_REREG_MR_CHANGE_PD
inline constexpr uint32_t kReregChangeAccess = 4;       // IBV_REREG_MR_CHANGE_ACCESS
inline constexpr uint32_t kReregKnownFlags = kReregChangeTranslation | kReregChangePd | kReregChangeAccess;

// Memory windows. The handle is the window's for its whole life; its rkey changes with every
// bind (the client keeps ibv_mw.rkey as rdma-core's rxe provider does). Binding is a send WQE
// (IBV_WR_BIND_MW, queue_entries.hpp).
struct AllocMwRequest {
    uint32_t pd;
    uint32_t type;  // enum ibv_mw_type: 1 or 2
};
struct AllocMwReply {
    uint32_t handle;
    uint32_t rkey;
};

struct CreateCqRequest {
    uint32_t cqe;
    uint32_t channel;  // 0: none
    uint32_t comp_vector;
    uint32_t reserved;
};
struct CreateCqReply {
    uint32_t handle;
    uint32_t cqe;         // granted (what ibv_cq.cqe shows)
    uint32_t ring_size;   // entries, a power of two >= cqe
    uint32_t ring_bytes;  // of the memfd
};

// ResizeCq (an op number after the CM's, abi/cm.hpp): a new ring of `cqe` completions, holding
// the old ring's unpolled ones first, in order (docs/host_interface.md, "Resizing a CQ").
struct ResizeCqRequest {
    uint32_t handle;
    uint32_t cqe;
};
using ResizeCqReply = CreateCqReply;  // reply fds: [the new ring memfd]

struct CreateSrqRequest {
    uint32_t pd;
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
};
struct CreateSrqReply {
    uint32_t handle;
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t ring_size;
    uint32_t ring_stride;
    uint32_t ring_bytes;
    uint32_t doorbell;  // the SRQ's slot in the session's DoorbellBits
    uint32_t reserved;
};
struct ModifySrqRequest {
    uint32_t handle;
    uint32_t attr_mask;  // enum ibv_srq_attr_mask
    uint32_t max_wr;
    uint32_t srq_limit;
};
struct QuerySrqReply {
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
    uint32_t reserved;
};

struct CreateQpRequest {
    uint32_t qp_type;  // enum ibv_qp_type
    uint32_t pd;
    uint32_t send_cq;
    uint32_t recv_cq;
    uint32_t srq;  // 0: none
    uint32_t sq_sig_all;
    QpCaps cap;
};
struct CreateQpReply {
    uint32_t qpn;
    QpCaps cap;  // granted
    uint32_t sq_size;
    uint32_t sq_stride;
    uint32_t rq_size;  // 0 with an SRQ
    uint32_t rq_stride;
    uint32_t rq_offset;  // the RQ ring's offset in the memfd (page-aligned)
    uint32_t ring_bytes;
    uint32_t doorbell;  // the QP's slot in the session's DoorbellBits (both its queues)
    uint32_t reserved;
};

struct ModifyQpRequest {
    uint32_t qpn;
    uint32_t attr_mask;  // enum ibv_qp_attr_mask
    QpAttr attr;
};
struct QueryQpRequest {
    uint32_t qpn;
    uint32_t attr_mask;
};
struct QueryQpReply {
    QpAttr attr;
    QpCaps init_cap;
    uint32_t qp_type;
    uint32_t sq_sig_all;
    uint32_t send_cq;
    uint32_t recv_cq;
    uint32_t srq;
};

struct CreateAhRequest {
    uint32_t pd;
    uint32_t reserved;
    AddressVector av;
};

// Stats answers one JSON document of at most kMaxMessage bytes, so the QP list comes in pages:
// the QPs from `first_qpn` on, in QPN order, as many as fit, and "next_qpn" where the next page
// starts while more remain (about 60 QPs fit; 16,384 would take ~15 MB).
// The CM's ids come the same way, asked for on their own: "cm_ids" from the id `first_qpn`
// names, and "next_cm_id".
inline constexpr uint32_t kStatsDevice = 1;  // device, counters, caches, sessions, objects, log_level
inline constexpr uint32_t kStatsQps = 2;     // a page of the "qps" list
inline constexpr uint32_t kStatsAll = kStatsDevice | kStatsQps;
inline constexpr uint32_t kStatsCmIds = 4;  // a page of the "cm_ids" list (not in kStatsAll)

struct StatsRequest {
    uint32_t what;       // kStats* bits; 0 means kStatsAll; other bits: EINVAL
    uint32_t first_qpn;  // the page of the QP list (or of the CM ids) starts at this QPN (id)
};

struct SetLogLevelRequest {
    char level[16];  // spdlog level name
};

// SetCongestionParam: DCQCN/ECN knobs by their mlx5 names (docs/congestion.md), all or nothing:
// EINVAL (nothing changed) for an unknown name, a value out of range, an inconsistent result,
// `count` 0 or above the array, a name not NUL-terminated, or reserved fields not zero; EPERM
// unless the caller is the daemon's owner or root. Names as `rnicd --cc` takes them, including
// mlx5's per-priority switches `rp_enable/N` and `np_enable/N`. No reply body.
inline constexpr uint32_t kMaxCongestionParams = 16;
struct CongestionParamAssignment {
    char name[40];  // NUL-terminated
    uint32_t reserved;
    uint32_t reserved2;
    uint64_t value;
};
static_assert(sizeof(CongestionParamAssignment) == 56);
struct SetCongestionParamRequest {
    uint32_t count;  // entries of `params` used, 1..kMaxCongestionParams
    uint32_t reserved;
    CongestionParamAssignment params[kMaxCongestionParams];
};

}  // namespace rnic::host::abi
