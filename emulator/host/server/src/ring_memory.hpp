// Shared memory the daemon creates (rings, the status page) or maps from a client (segments):
// one mapping, and the memfd only as long as it is needed to hand the memory over. The mapping
// keeps the file alive, so a ring whose fd went to its client or a client's segment once mapped
// holds no descriptor: a daemon with max_qp QPs must not need max_qp descriptors (the usual
// RLIMIT_NOFILE of 1024 stopped it at ~1,000 QPs).
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

    // What a client may do with a memfd the daemon hands it: map it read-write (rings), or only
    // read it (the status page: no writable mapping, no write(), not even through /proc).
    enum class ClientAccess : uint8_t { ReadWrite, ReadOnly };

    // A new zeroed memfd of `bytes` (page-rounded), mapped read-write here, then sealed so no
    // client can change its size (a shrunk ring would be SIGBUS on the daemon's next access) or
    // its seals; ReadOnly adds F_SEAL_FUTURE_WRITE after the daemon's own mapping. 0 or an errno.
    int create(const char* name, size_t bytes, ClientAccess access = ClientAccess::ReadWrite);
    // Maps `length` bytes of a client's fd, which is taken over and closed once mapped (or on
    // failure). 0 or an errno; EINVAL when the file is shorter than `length` (touching past its
    // end would be SIGBUS).
    // Adds F_SEAL_SHRINK where the file takes it (a memfd made with MFD_ALLOW_SEALING): sealed()
    // says whether it did. Other files (map_files, an unsealable memfd) can still shrink under
    // the mapping; the engine's accesses to them are guarded instead (rnic/memory/fault_guard.hpp).
    int map_client(int fd, size_t length);
    // The memfd, now the caller's to close once it went to the client (sendmsg gives the client
    // its own copy); the mapping stays.
    int take_fd() noexcept;
    void reset() noexcept;

    int fd() const noexcept { return fd_; }  // -1 after take_fd() and for a client's segment
    uint8_t* data() const noexcept { return static_cast<uint8_t*>(addr_); }
    size_t size() const noexcept { return size_; }
    bool sealed() const noexcept { return sealed_; }

private:
    int fd_ = -1;
    void* addr_ = nullptr;
    size_t size_ = 0;
    bool sealed_ = false;  // the file cannot shrink below the mapping
};

// Writes the daemon-owned, write-once fields of a ring header at `base` and returns its view.
abi::RingView init_ring(void* base, uint32_t entries, uint32_t entry_size);

}  // namespace rnic::host::server
