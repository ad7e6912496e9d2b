// The data-path rules of one work queue, free of sockets so they can be tested against rings in
// plain memory: WQE validation and encoding (rdma-core providers' checks and errno values), slot
// retirement by completions and flush completions for a dead daemon.
#pragma once

#include <cstdint>

#include "rnic/host/abi/queue_entries.hpp"
#include "rnic/host/client/objects.hpp"

namespace rnic::host::client {

// Validates `wr` for a QP of `qp_type` and writes it into the SQ slot at `sq.produced`
// (not published). 0, EINVAL (opcode, sge count, inline size, atomic operands, UD without AH) or
// ENOMEM (max_wr WQEs not yet retired). `ah_handle` is the daemon's handle of wr.ah (UD).
int encode_send(WorkQueue& sq, uint32_t qp_type, const SendWr& wr, uint32_t ah_handle) noexcept;

// Same for a receive WQE into an RQ (retired by completions) or an SRQ (free once the daemon's
// consumer index passed it: `srq` true).
int encode_recv(WorkQueue& rq, const RecvWr& wr, bool srq) noexcept;

// A completion for the WQE at free-running `wqe_index` frees it and, on an SQ, every unsignaled
// WQE before it. Indices outside [retired, produced) are ignored (a stale CQE after a reset).
void retire(WorkQueue& q, uint32_t wqe_index) noexcept;

// Writes IBV_WC_WR_FLUSH_ERR completions for posted WQEs not yet retired or flushed, at most
// `max`; returns how many. `send` picks the opcode source (the WQE's) over IBV_WC_RECV.
uint32_t flush(WorkQueue& q, bool send, uint32_t qpn, abi::Cqe* out, uint32_t max) noexcept;

// ibv_wc_opcode for a send WQE opcode.
uint32_t wc_opcode_for(uint8_t wr_opcode) noexcept;

}  // namespace rnic::host::client
