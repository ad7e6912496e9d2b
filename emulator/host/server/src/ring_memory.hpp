// Shared memory the daemon creates (rings, the status page) or maps from a client (segments):
// one memfd and one mapping, released together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rnic/host/abi/ring.hpp"

namespace rnic::host::server {

inline constexpr size_t kPageSize = 4096;

constexpr size_t page_round(size_t bytes) {
    return (bytes + kPageSize - 1) & ~(kPageSize - 1);
}

class SharedMemory {
public:
    SharedMemory() = default;
    ~SharedMemory() { reset(); }
    SharedMemory(SharedMemory&& o) noexcept { *this = std::move(o); }
    SharedMemory& operator=(SharedMemory&& o) noexcept;
    SharedMemory(const SharedMemory&) = delete;
    SharedMemory& operator=(const SharedMemory&) = delete;

    // A new zeroed memfd of `bytes` (page-rounded), mapped read-write. 0 or an errno.
    int create(const char* name, size_t bytes);
    // As create(), then sealed so that no one can write it but through this mapping: every
    // session maps the status page, and a writable mapping would let one user's client change
    // what every other user's reads (F_SEAL_FUTURE_WRITE: mmap with PROT_WRITE and write() fail
    // with EPERM, whatever the descriptor's mode).
    int create_sealed(const char* name, size_t bytes);
    // Maps `length` bytes of a client's fd (taken over: closed with this object). 0 or an errno;
    // EINVAL when the file is shorter than `length` (touching past its end would be SIGBUS).
    int map_client(int fd, size_t length);
    void reset() noexcept;

    int fd() const noexcept { return fd_; }
    uint8_t* data() const noexcept { return static_cast<uint8_t*>(addr_); }
    size_t size() const noexcept { return size_; }

private:
    int create_memfd(const char* name, size_t bytes, unsigned flags);
    int fd_ = -1;
    void* addr_ = nullptr;
    size_t size_ = 0;
};

// Writes the daemon-owned, write-once fields of a ring header at `base` and returns its view.
abi::RingView init_ring(void* base, uint32_t entries, uint32_t entry_size);

}  // namespace rnic::host::server
