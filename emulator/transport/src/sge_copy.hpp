// Moving bytes between a message and a scatter/gather list at a byte offset, through the
// memory table's local-key checks. Shared by the requester (gather), the responder (scatter
// into receive WQEs) and the completer (READ data and atomic results landing).
#pragma once

#include <cstdint>
#include <span>

#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/work_request.hpp"

namespace rnic::transport {

// Writes `data` into the SGEs starting `offset` bytes into them (needs LOCAL_WRITE). False on
// a key error or when the SGEs end before the data does.
bool scatter_to_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                     std::span<const uint8_t> data);

// Reads `out.size()` bytes from the SGEs starting `offset` bytes into them.
bool gather_from_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                      std::span<uint8_t> out);

}  // namespace rnic::transport
