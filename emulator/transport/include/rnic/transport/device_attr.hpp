// What the device advertises (ibv_query_device / ibv_query_port), and the limits the engine
// enforces with the errno rdma-core providers return.
#pragma once

#include <cstdint>

#include "rnic/memory/cache_model.hpp"
#include "rnic/transport/verbs_types.hpp"

namespace rnic::transport {

struct DeviceLimits {
    uint32_t max_qp = 16384;
    uint32_t max_qp_wr = 16384;
    uint32_t max_sge = 32;
    uint32_t max_cq = 16384;
    // As ConnectX-4 and later (mlx5) advertise: perftest's bandwidth tests make one CQ of
    // tx_depth (128) x QPs entries, 2M at its -q maximum of 16,384 = max_qp.
    uint32_t max_cqe = (1u << 22) - 1;
    uint32_t max_mr = 1u << 20;
    uint32_t max_mw = 1u << 12;  // as rxe (RXE_MAX_MW); window keys use indexes past max_mr
    uint64_t max_mr_size = 1ull << 40;
    uint32_t max_pd = 1u << 16;
    uint32_t max_qp_rd_atom = 128;
    uint32_t max_qp_init_rd_atom = 128;
    uint32_t max_srq = 4096;
    uint32_t max_srq_wr = 16384;
    uint32_t max_srq_sge = 32;
    uint32_t max_inline_data = 256;
    uint32_t max_ah = 1u << 16;
    uint32_t max_msg_size = 1u << 31;
    Mtu max_mtu = Mtu::Mtu4096;
    Mtu active_mtu = Mtu::Mtu4096;  // what the port's Ethernet MTU allows
};

enum class AtomicCap : uint8_t { None = 0, Hca = 1, Glob = 2 };  // enum ibv_atomic_cap

// ibv_query_device as the engine answers it.
struct DeviceAttributes {
    DeviceLimits limits;
    AtomicCap atomic_cap = AtomicCap::Hca;  // atomic among this device's QPs (std::atomic_ref)
    // As Linux rxe: no IEEE OUI of its own, so 0xffffff (rxe's RXE_VENDOR_ID), part 0, hw_ver 0.
    uint32_t vendor_id = 0xffffff;
    uint32_t vendor_part_id = 0;
    uint64_t page_size_cap = 4096;
    uint8_t phys_port_cnt = 1;
};

// ibv_query_port: RoCE ports are always Ethernet, with the GID table as their address.
struct PortAttributes {
    bool active = true;
    Mtu max_mtu = Mtu::Mtu4096;
    Mtu active_mtu = Mtu::Mtu4096;
    uint32_t gid_tbl_len = 0;
    uint16_t pkey_tbl_len = 1;
    uint32_t max_msg_sz = 0;
};

// The RNIC's on-chip caches (sizes in entries; 0 = off) and what a miss costs.
struct CacheSetup {
    mem::CacheConfig qpc{};
    mem::CacheConfig mpt{};
    mem::CacheConfig mtt{};
};

struct EngineTuning {
    uint32_t max_inflight_packets = 1024;  // per QP, unacknowledged
    uint32_t ack_request_interval = 64;    // request an ACK at least every N packets of a message
    // A message followed by another already queued asks for no ACK of its own while fewer than
    // this many packets in a row went without one (1: every message asks, as rxe's requester
    // does): the responder's one ACK then covers them all. requester.cpp, coalesced_ack_request().
    uint32_t ack_request_coalesce = 16;
    uint32_t tx_burst = 32;                // frames one QP may emit per scheduling turn
    uint64_t per_packet_cost_ns = 0;       // processing time charged per packet (0: only cache misses)
    // How long an access to an on-demand region may stay Pending (a page fault the owner does
    // not resolve) before its QP goes to error (docs/host_interface.md, "On-demand regions").
    uint64_t odp_timeout_ns = 2'000'000'000;
};

}  // namespace rnic::transport
