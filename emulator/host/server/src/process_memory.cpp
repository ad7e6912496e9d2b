#include "process_memory.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "peer_process.hpp"

namespace rnic::host::server {

namespace {

int pidfd_open(uint32_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

}  // namespace

std::shared_ptr<ProcessMemory> ProcessMemory::open(const ProcessId& p) {
    const int fd = pidfd_open(p.pid);
    if (fd < 0) return nullptr;
    // The pidfd names whatever process has the pid now: it must be the one that connected.
    const auto start = process_start_time(p.pid);
    if (!start || *start != p.start_time) {
        ::close(fd);
        errno = ESRCH;
        return nullptr;
    }
    std::shared_ptr<ProcessMemory> m(new ProcessMemory(p.pid, fd));
    // May the daemon read its memory at all (root, or the same user where Yama allows it)? A
    // one-byte read at an address nothing is mapped at answers EFAULT when allowed, EPERM not.
    uint8_t byte = 0;
    iovec local{&byte, 1}, remote{reinterpret_cast<void*>(uintptr_t{1}), 1};
    if (process_vm_readv(static_cast<pid_t>(p.pid), &local, 1, &remote, 1, 0) < 0 && errno == EPERM) return nullptr;
    return m;
}

ProcessMemory::~ProcessMemory() {
    ::close(pidfd_);
}

bool ProcessMemory::alive() const noexcept {
    pollfd pfd{pidfd_, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 0;  // readable once the process has exited
}

bool ProcessMemory::read(uint64_t address, std::span<uint8_t> data) noexcept {
    if (data.empty()) return true;
    if (!alive()) return false;
    iovec local{data.data(), data.size()}, remote{reinterpret_cast<void*>(address), data.size()};
    return process_vm_readv(static_cast<pid_t>(pid_), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(data.size());
}

bool ProcessMemory::write(uint64_t address, std::span<const uint8_t> data) noexcept {
    if (data.empty()) return true;
    if (!alive()) return false;
    iovec local{const_cast<uint8_t*>(data.data()), data.size()}, remote{reinterpret_cast<void*>(address), data.size()};
    return process_vm_writev(static_cast<pid_t>(pid_), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(data.size());
}

}  // namespace rnic::host::server
