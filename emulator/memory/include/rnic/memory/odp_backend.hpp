// On-demand paging (IBV_ACCESS_ON_DEMAND): a region whose pages are neither pinned nor mapped
// into the NIC at registration. Each access reaches the owner's memory through a backend (in
// rnicd: the client process's address space, process_vm_readv/writev), which faults pages in
// the way a NIC page fault does, and fails for addresses nothing is mapped at. The memory table
// knows only this interface, so the engine stays free of processes and system calls.
#pragma once

#include <cstdint>
#include <span>

namespace rnic::mem {

class OdpBackend {
public:
    virtual ~OdpBackend() = default;
    // Copy between `address` in the owner's address space and `data`. False: some byte could
    // not be reached (unmapped, no permission, the owner is gone); a write may then have
    // stored a prefix. Called on the data path: no exceptions.
    virtual bool read(uint64_t address, std::span<uint8_t> data) noexcept = 0;
    virtual bool write(uint64_t address, std::span<const uint8_t> data) noexcept = 0;
};

}  // namespace rnic::mem
