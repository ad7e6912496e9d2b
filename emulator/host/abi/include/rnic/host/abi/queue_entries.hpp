// The entries of the shared rings: send and receive WQEs the client writes, CQEs and async
// events the daemon writes. Enumerated fields carry rdma-core's values (enum ibv_wr_opcode,
// ibv_wc_status, ibv_wc_opcode, ibv_event_type ...), so neither side translates.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rnic::host::abi {

struct Sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};
static_assert(sizeof(Sge) == 16);

// A send WQE: this header, then `num_sge` Sge entries or `inline_length` bytes of inline data.
// IBV_WR_BIND_MW (no SGEs) carries its bind in the same fields: rkey = the new rkey (its low byte
// is the consumer's key), imm_data = the window's current rkey, remote_addr and compare_add = the
// window's address and length, swap = the region's lkey in bits 0-31 and the window's
// enum ibv_access_flags in bits 32-63.
// The SQ's stride is fixed at QP creation: header + max(max_send_sge * 16, max_inline_data),
// rounded up to a power of two.
struct SendWqe {
    uint64_t wr_id;
    uint8_t opcode;       // enum ibv_wr_opcode
    uint8_t reserved0[3];
    uint32_t send_flags;  // enum ibv_send_flags
    uint32_t imm_data;    // network order, as ibv_send_wr; the rkey for SEND_WITH_INV and LOCAL_INV
    uint32_t num_sge;
    uint32_t inline_length;
    uint32_t rkey;
    uint64_t remote_addr;
    uint64_t compare_add;
    uint64_t swap;
    uint32_t ah;          // UD: AH handle
    uint32_t remote_qpn;  // UD
    uint32_t remote_qkey; // UD
    uint32_t reserved1;
};
static_assert(sizeof(SendWqe) == 72);
static_assert(offsetof(SendWqe, remote_addr) == 32);
static_assert(offsetof(SendWqe, ah) == 56);

inline constexpr uint32_t kSendWqeHeader = 80;  // the header, padded so the payload is 16-aligned
static_assert(kSendWqeHeader >= sizeof(SendWqe) && kSendWqeHeader % 16 == 0);

// A receive WQE (RQ and SRQ): this header, then `num_sge` Sge entries.
struct RecvWqe {
    uint64_t wr_id;
    uint32_t num_sge;
    uint32_t reserved;
};
static_assert(sizeof(RecvWqe) == 16);

constexpr uint32_t send_stride(uint32_t max_sge, uint32_t max_inline);
constexpr uint32_t recv_stride(uint32_t max_sge);

// A completion, the fields of struct ibv_wc.
struct Cqe {
    uint64_t wr_id;
    uint32_t status;  // enum ibv_wc_status
    uint32_t opcode;  // enum ibv_wc_opcode
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;  // network order; the invalidated rkey with IBV_WC_WITH_INV
    uint32_t qp_num;
    uint32_t src_qp;
    uint32_t wc_flags;  // enum ibv_wc_flags
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
    uint8_t reserved0[2];
    // The free-running ring index of the WQE this completes (SQ, RQ or SRQ). A send CQE at index
    // i also retires every unsignaled WQE before i, so the client knows which slots are free.
    uint32_t wqe_index;
    uint8_t reserved1[4];
    // rnicd's CLOCK_MONOTONIC, in ns, when the CQE went into the ring: the device clock that
    // ibv_wc_read_completion_ts reports (hca_core_clock 1 GHz). Writing it into the ring, not at
    // the engine's completion, keeps the engine free of clocks it does not need.
    uint64_t completion_ts_ns;
};
static_assert(sizeof(Cqe) == 64);
static_assert(offsetof(Cqe, wqe_index) == 48);
static_assert(offsetof(Cqe, completion_ts_ns) == 56);

// An asynchronous event (ibv_get_async_event), in the session's event ring.
struct AsyncEventEntry {
    uint32_t event_type;  // enum ibv_event_type
    uint32_t object;      // QPN, CQ handle, SRQ handle or port number, by event type
};
static_assert(sizeof(AsyncEventEntry) == 8);

constexpr uint32_t round_stride(uint32_t bytes) {
    uint32_t p = 16;
    while (p < bytes) p <<= 1;
    return p;
}
constexpr uint32_t send_stride(uint32_t max_sge, uint32_t max_inline) {
    const uint32_t payload = max_sge * uint32_t{sizeof(Sge)};
    return round_stride(kSendWqeHeader + (payload > max_inline ? payload : max_inline));
}
constexpr uint32_t recv_stride(uint32_t max_sge) {
    return round_stride(uint32_t{sizeof(RecvWqe)} + max_sge * uint32_t{sizeof(Sge)});
}
static_assert(send_stride(1, 0) == 128);
static_assert(send_stride(4, 64) == 256);
static_assert(recv_stride(1) == 32);

}  // namespace rnic::host::abi
