// Moving bytes between a message and a scatter/gather list at a byte offset, through the
// memory table's local-key checks. Shared by the requester (gather), the responder (scatter
// into receive WQEs) and the completer (READ data and atomic results landing).
#pragma once

#include <cstdint>
#include <span>

#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/work_request.hpp"

namespace rnic::transport {

// Ok; Failed (a key error, or the SGEs end before the data does); Pending (an on-demand
// region's page is not there yet: do the whole copy again later, see mem::OdpResult).
enum class SgeCopy : uint8_t { Ok, Failed, Pending };

// Writes `data` into the SGEs starting `offset` bytes into them (needs LOCAL_WRITE).
SgeCopy scatter_to_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                        std::span<const uint8_t> data);

// Reads `out.size()` bytes from the SGEs starting `offset` bytes into them.
SgeCopy gather_from_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                         std::span<uint8_t> out);

}  // namespace rnic::transport
