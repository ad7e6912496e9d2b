// On-demand paging (IBV_ACCESS_ON_DEMAND): a region whose pages are neither pinned nor mapped
// into the NIC at registration. Each access reaches the owner's memory through a backend (in
// rnicd: the client process's address space, process_vm_readv/writev), which faults pages in
// the way a NIC page fault does, and fails for addresses nothing is mapped at. The memory table
// knows only this interface, so the engine stays free of processes and system calls.
#pragma once

#include <cstdint>
#include <span>

namespace rnic::mem {

// What became of an access. Pending: not done yet and nothing can be said about the bytes (a
// page fault the owner's memory has not resolved within the backend's short wait, or the owner's
// earlier access still waits): the caller must not use `data` (a read) and must ask again later
// with the same arguments (a write may be stored once more then, as a retransmission would); the
// backend tells its owner when asking again is worthwhile (in rnicd: the poll loop's wake-up).
enum class OdpResult : uint8_t { Done, Fault, Pending };

class OdpBackend {
public:
    virtual ~OdpBackend() = default;
    // Copy between `address` in the owner's address space and `data`. Fault: some byte could
    // not be reached (unmapped, no permission, the owner is gone); a write may then have
    // stored a prefix. Called on the data path: no exceptions, and never blocking for long.
    virtual OdpResult read(uint64_t address, std::span<uint8_t> data) noexcept = 0;
    virtual OdpResult write(uint64_t address, std::span<const uint8_t> data) noexcept = 0;
};

}  // namespace rnic::mem
