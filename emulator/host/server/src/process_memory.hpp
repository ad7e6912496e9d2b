// The client process's memory as an on-demand region's backend (mem::OdpBackend): rnicd reaches
// an ODP MR's pages through process_vm_readv/process_vm_writev on the client's own process, the
// one SO_PEERCRED named on the control socket (never a pid the client states). Those calls fault
// the pages in as a NIC page fault would and fail for addresses nothing is mapped at, which the
// engine turns into a remote access or local protection error.
//
// Identity: a pidfd taken at the first ODP registration, checked against the process's start
// time (so it is the process that connected, not a later one with its pid); every access first
// polls it, so a process that exited (its pid free for reuse once reaped) is never touched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "rnic/host/server/pinned_pages.hpp"
#include "rnic/memory/odp_backend.hpp"

namespace rnic::host::server {

class ProcessMemory final : public mem::OdpBackend {
public:
    // nullptr with errno: ESRCH (gone, or not the process `p` names), EPERM (the daemon may not
    // read its memory: not root, and Yama's ptrace_scope forbids it), or the pidfd_open error.
    static std::shared_ptr<ProcessMemory> open(const ProcessId& p);
    ~ProcessMemory() override;
    ProcessMemory(const ProcessMemory&) = delete;
    ProcessMemory& operator=(const ProcessMemory&) = delete;

    bool read(uint64_t address, std::span<uint8_t> data) noexcept override;
    bool write(uint64_t address, std::span<const uint8_t> data) noexcept override;
    bool alive() const noexcept;

private:
    ProcessMemory(uint32_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
    uint32_t pid_;
    int pidfd_;
};

}  // namespace rnic::host::server
