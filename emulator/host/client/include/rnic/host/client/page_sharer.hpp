// Makes application memory shareable with rnicd without moving it (FreeFlow's trick, see
// docs/host_interface.md "Registered memory"): private pages are replaced in place by a memfd
// holding the same bytes, MAP_SHARED mappings are shared through their own backing file. One
// registry per process, because pages are per process while connections are not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rnic/host/client/result.hpp"

namespace rnic::host::client {

// Pages of the process, shareable through `fd`: the pages [start, start + length) are the bytes
// [fd_offset, fd_offset + length) of the file. The daemon maps the first `share_length` bytes.
struct Segment {
    uint32_t id = 0;  // process-wide unique, used as ShareSegment's segment_id on every connection
    uintptr_t start = 0;
    size_t length = 0;
    int fd = -1;
    uint64_t fd_offset = 0;
    bool backing_file = false;  // the MAP_SHARED fallback rather than a memfd we made
    uint32_t refs = 0;          // registrations (MRs) holding it; guarded by the sharer's mutex
    uint64_t dev = 0;           // the file's identity, to recognise our pages in /proc/self/maps
    uint64_t ino = 0;

    uint64_t share_length() const noexcept { return fd_offset + length; }
    ~Segment();
};

// A page-aligned part of a registration, inside one segment.
struct SharedRun {
    std::shared_ptr<Segment> segment;
    uint64_t offset;  // into the segment's file (fd_offset included)
    uint64_t length;
};

struct SharedRange {
    std::vector<SharedRun> runs;                     // in address order, adjacent runs of a segment merged
    std::vector<std::shared_ptr<Segment>> segments;  // distinct, each holding one reference
};

class PageSharer {
public:
    static PageSharer& instance();

    // Shares every page of [addr, addr + length) and takes one reference on each segment used.
    // EFAULT: a page is unmapped or PROT_NONE; EOPNOTSUPP: the stack or a mapping that cannot be
    // shared; EINVAL: length 0 or the range wraps; ENOMEM etc. from the kernel.
    Result<SharedRange> acquire(const void* addr, size_t length);
    void release(const SharedRange& range);

    size_t live_segments() const;

private:
    mutable std::mutex mutex_;
    std::map<uintptr_t, std::shared_ptr<Segment>> segments_;  // by start; non-overlapping
    std::vector<uint32_t> idle_;  // ids of segments no MR holds, oldest first (their fds stay open)
    uint32_t next_id_ = 1;

    void drop_idle_surplus();
};

size_t page_size() noexcept;

}  // namespace rnic::host::client
