#include "ring_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace rnic::host::server {

SharedMemory& SharedMemory::operator=(SharedMemory&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = o.fd_;
        addr_ = o.addr_;
        size_ = o.size_;
        o.fd_ = -1;
        o.addr_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

int SharedMemory::create(const char* name, size_t bytes) {
    reset();
    const size_t size = page_round(bytes);
    const int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return errno;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        const int e = errno;
        close(fd);
        return e;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        close(fd);
        return e;
    }
    fd_ = fd;
    addr_ = p;
    size_ = size;
    return 0;
}

int SharedMemory::map_client(int fd, size_t length) {
    reset();
    struct stat st {};
    if (fstat(fd, &st) != 0 || length == 0 || static_cast<uint64_t>(st.st_size) < length) {
        close(fd);
        return EINVAL;
    }
    // Best effort: a client that shrinks the file under us would make the engine fault. memfds
    // created with MFD_ALLOW_SEALING take the seal; others (map_files fallback) cannot.
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        close(fd);
        return e;
    }
    close(fd);
    addr_ = p;
    size_ = length;
    return 0;
}

int SharedMemory::take_fd() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
}

void SharedMemory::reset() noexcept {
    if (addr_) munmap(addr_, size_);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    addr_ = nullptr;
    size_ = 0;
}

abi::RingView init_ring(void* base, uint32_t entries, uint32_t entry_size) {
    auto* h = new (base) abi::RingHeader{};
    h->size = entries;
    h->entry_size = entry_size;
    h->entries_offset = sizeof(abi::RingHeader);
    return abi::RingView(base, entries, entry_size);
}

}  // namespace rnic::host::server
