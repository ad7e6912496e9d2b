#include "rnic/host/client/page_sharer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "proc_maps.hpp"

namespace rnic::host::client {

using detail::Vma;

namespace {

// Idle segments keep their fd so a buffer registered again is recognised without a new copy;
// beyond this many the oldest are forgotten (their pages stay memfd-backed and are shared again
// through /proc/self/map_files if registered later).
constexpr size_t kMaxIdleSegments = 256;

bool same_file(const Vma& v, const Segment& s) {
    return v.shared && v.inode == s.ino && makedev(v.dev_major, v.dev_minor) == s.dev;
}

// True when the process still maps the segment's file at the segment's addresses: a segment
// outlives the app's munmap/mmap cycles otherwise, and would hand the daemon the wrong pages.
bool still_mapped(const std::vector<Vma>& maps, const Segment& s) {
    uintptr_t at = s.start;
    const uintptr_t end = s.start + s.length;
    for (const Vma& v : maps) {
        if (v.end <= at) continue;
        if (v.start > at || !same_file(v, s)) return false;
        if (v.offset + (at - v.start) != s.fd_offset + (at - s.start)) return false;
        at = std::min(v.end, end);
        if (at == end) return true;
    }
    return false;
}

int set_identity(Segment& s) {
    struct stat st {};
    if (fstat(s.fd, &st) != 0) return errno;
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    return 0;
}

// The pages of a private mapping become a memfd at the same address: copy into the memfd, map it
// temporarily, then move that mapping over the original (mremap replaces atomically).
int replace_with_memfd(Segment& s, const Vma& v) {
    // Sealable, so rnicd can forbid shrinking it (F_SEAL_SHRINK) for as long as it maps it: a
    // shrunk memfd would cost every access to the lost pages a fault in the daemon.
    const int fd = memfd_create("rnic-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return errno;
    s.fd = fd;
    if (ftruncate(fd, static_cast<off_t>(s.length)) != 0) return errno;
    void* tmp = mmap(nullptr, s.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (tmp == MAP_FAILED) return errno;
    void* const at = reinterpret_cast<void*>(s.start);
    if ((v.prot & PROT_READ) == 0 && mprotect(at, s.length, v.prot | PROT_READ) != 0) {
        const int e = errno;
        munmap(tmp, s.length);
        return e;
    }
    // The kernel copies, not memcpy: whole pages include bytes the application never
    // allocated, which a sanitizer would (rightly, for C++) call an overflow.
    for (size_t done = 0; done < s.length;) {
        const long n =
            syscall(SYS_pwrite64, fd, static_cast<const char*>(at) + done, s.length - done, static_cast<off_t>(done));
        if (n <= 0) {
            const int e = n < 0 ? errno : EIO;
            munmap(tmp, s.length);
            if ((v.prot & PROT_READ) == 0) mprotect(at, s.length, v.prot);
            return e;
        }
        done += static_cast<size_t>(n);
    }
    // The system call itself, not libc's mremap: UCX's memory hooks (libucm) replace mremap with
    // a four-argument function that drops MREMAP_FIXED's new address, so through them the move
    // failed with EINVAL and every UCX registration of private memory with it.
    if (reinterpret_cast<void*>(syscall(SYS_mremap, tmp, s.length, s.length, MREMAP_MAYMOVE | MREMAP_FIXED, at)) ==
        MAP_FAILED) {
        const int e = errno;
        munmap(tmp, s.length);
        if ((v.prot & PROT_READ) == 0) mprotect(at, s.length, v.prot);
        return e;
    }
    if (v.prot != (PROT_READ | PROT_WRITE) && mprotect(at, s.length, v.prot) != 0) return errno;
    s.fd_offset = 0;
    return set_identity(s);
}

// A MAP_SHARED mapping must stay linked to its file (other processes, msync, the page cache), so
// the daemon gets that very file. /proc/self/map_files needs CAP_SYS_ADMIN (or
// CAP_CHECKPOINT_RESTORE); without it, the path from maps is opened and checked to be the same
// inode.
int open_backing_file(Segment& s, const Vma& v) {
    char name[96];
    std::snprintf(name, sizeof name, "/proc/self/map_files/%lx-%lx", static_cast<unsigned long>(v.start),
                  static_cast<unsigned long>(v.end));
    int fd = open(name, O_RDWR | O_CLOEXEC);
    if (fd < 0) fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && !v.path.empty() && v.path[0] == '/') {
        fd = open(v.path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) fd = open(v.path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) return EOPNOTSUPP;
    s.fd = fd;
    if (const int e = set_identity(s); e != 0) return e;
    if (s.ino != v.inode || s.dev != makedev(v.dev_major, v.dev_minor)) return EOPNOTSUPP;
    s.fd_offset = v.offset + (s.start - v.start);
    s.backing_file = true;
    return 0;
}

}  // namespace

Segment::~Segment() {
    if (fd >= 0) close(fd);
}

size_t page_size() noexcept {
    static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

PageSharer& PageSharer::instance() {
    // Never destroyed: MRs may be released from static destructors of the application.
    static PageSharer* sharer = new PageSharer;
    return *sharer;
}

size_t PageSharer::live_segments() const {
    std::lock_guard lock(mutex_);
    return segments_.size();
}

Result<SharedRange> PageSharer::acquire(const void* addr, size_t length) try {
    const size_t ps = page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (length == 0 || a + length < a || a + length > UINTPTR_MAX - ps) return Error{EINVAL};
    const uintptr_t first = a & ~(ps - 1);
    const uintptr_t last = (a + length + ps - 1) & ~(ps - 1);

    std::lock_guard lock(mutex_);
    const std::vector<Vma> maps = detail::read_self_maps();
    if (maps.empty()) return Error{errno != 0 ? errno : EIO};

    // Forget segments over the range that the process no longer maps as they were.
    for (auto it = segments_.begin(); it != segments_.end();) {
        const Segment& s = *it->second;
        if (s.start < last && s.start + s.length > first && !still_mapped(maps, s)) {
            std::erase(idle_, s.id);
            it = segments_.erase(it);
        } else {
            ++it;
        }
    }

    // Plan the gaps against the maps before changing anything, so a bad page fails the whole call.
    struct Piece {
        uintptr_t start;
        uintptr_t end;
        const Vma* vma;
    };
    std::vector<Piece> pieces;
    const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    for (uintptr_t p = first; p < last;) {
        auto next = segments_.upper_bound(p);
        if (next != segments_.begin()) {
            const auto& prev = std::prev(next)->second;
            if (prev->start + prev->length > p) {
                p = std::min<uintptr_t>(prev->start + prev->length, last);
                continue;
            }
        }
        const uintptr_t gap_end = next == segments_.end() ? last : std::min<uintptr_t>(next->first, last);
        for (uintptr_t q = p; q < gap_end;) {
            const auto v = std::find_if(maps.begin(), maps.end(), [q](const Vma& m) { return m.end > q; });
            if (v == maps.end() || v->start > q) return Error{EFAULT};
            if (v->prot == PROT_NONE || v->path == "[vvar]" || v->path == "[vsyscall]") return Error{EFAULT};
            // Replacing pages under a running stack would lose the frames written meanwhile
            // (this thread's own, between the copy and the mremap).
            if (v->path == "[stack]" || (v->start <= sp && sp < v->end)) return Error{EOPNOTSUPP};
            const uintptr_t e = std::min(v->end, gap_end);
            pieces.push_back({q, e, &*v});
            q = e;
        }
        p = gap_end;
    }

    for (const Piece& piece : pieces) {
        auto seg = std::make_shared<Segment>();
        seg->start = piece.start;
        seg->length = piece.end - piece.start;
        const int rc = piece.vma->shared ? open_backing_file(*seg, *piece.vma) : replace_with_memfd(*seg, *piece.vma);
        if (rc != 0) {
            // Segments made by this call stay registered unreferenced: their pages are memfd-backed now.
            drop_idle_surplus();
            return Error{rc};
        }
        seg->id = next_id_++;
        idle_.push_back(seg->id);
        segments_.emplace(seg->start, std::move(seg));
    }

    SharedRange range;
    auto it = segments_.upper_bound(first);
    if (it != segments_.begin()) --it;
    for (; it != segments_.end() && it->first < last; ++it) {
        const std::shared_ptr<Segment>& s = it->second;
        const uintptr_t lo = std::max(first, s->start);
        const uintptr_t hi = std::min(last, s->start + s->length);
        if (lo >= hi) continue;
        range.runs.push_back({s, s->fd_offset + (lo - s->start), hi - lo});
        range.segments.push_back(s);
    }
    for (const auto& s : range.segments)
        if (s->refs++ == 0) std::erase(idle_, s->id);
    return range;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

void PageSharer::release(const SharedRange& range) try {
    std::lock_guard lock(mutex_);
    for (const auto& s : range.segments) {
        if (s->refs == 0 || --s->refs != 0) continue;
        const auto it = segments_.find(s->start);
        if (it != segments_.end() && it->second == s) idle_.push_back(s->id);
    }
    drop_idle_surplus();
} catch (...) {  // nothing to report from a void verb; never let it escape
}

void PageSharer::drop_idle_surplus() {
    while (idle_.size() > kMaxIdleSegments) {
        const uint32_t id = idle_.front();
        idle_.erase(idle_.begin());
        std::erase_if(segments_, [id](const auto& kv) { return kv.second->id == id; });
    }
}

}  // namespace rnic::host::client
