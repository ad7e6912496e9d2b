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
        sealed_ = o.sealed_;
        o.fd_ = -1;
        o.addr_ = nullptr;
        o.size_ = 0;
        o.sealed_ = false;
    }
    return *this;
}

int SharedMemory::create(const char* name, size_t bytes, ClientAccess access) {
    reset();
    const size_t size = page_round(bytes);
    const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
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
    // F_SEAL_FUTURE_WRITE refuses writable mappings and write() from now on, and (since it came
    // with the seal in Linux 5.1) clears VM_MAYWRITE on later read-only shared mappings, so a
    // client cannot mprotect one writable either; the daemon's mapping above keeps writing.
    // F_SEAL_SEAL last: a client could otherwise add F_SEAL_WRITE-like seals of its own.
    int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (access == ClientAccess::ReadOnly) seals |= F_SEAL_FUTURE_WRITE;
    if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
        const int e = errno;
        munmap(p, size);
        close(fd);
        return e;
    }
    fd_ = fd;
    addr_ = p;
    size_ = size;
    sealed_ = true;
    return 0;
}

int SharedMemory::map_client(int fd, size_t length) {
    reset();
    struct stat st {};
    if (fstat(fd, &st) != 0 || length == 0 || static_cast<uint64_t>(st.st_size) < length) {
        close(fd);
        return EINVAL;
    }
    // A client that shrinks the file under us would make the engine's next access to the lost
    // pages fault. The client library's memfds take the seal; a file passed through map_files
    // (or a memfd made without MFD_ALLOW_SEALING) refuses it with EINVAL or EPERM, and is left
    // to the engine's guarded accesses. Whatever F_ADD_SEALS said, F_GET_SEALS is the truth
    // (the client may have sealed it itself).
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
    const int seals = fcntl(fd, F_GET_SEALS);
    // The size is checked after sealing: before, the client could shrink it between the two.
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < length) {
        close(fd);
        return EINVAL;
    }
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        close(fd);
        return e;
    }
    close(fd);
    addr_ = p;
    size_ = length;
    sealed_ = seals > 0 && (seals & F_SEAL_SHRINK) != 0;
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
    sealed_ = false;
}

abi::RingView init_ring(void* base, uint32_t entries, uint32_t entry_size) {
    auto* h = new (base) abi::RingHeader{};
    h->size = entries;
    h->entry_size = entry_size;
    h->entries_offset = sizeof(abi::RingHeader);
    return abi::RingView(base, entries, entry_size);
}

}  // namespace rnic::host::server
