#include "sge_copy.hpp"

#include <algorithm>

namespace rnic::transport {
namespace {

// Walks the SGEs from `offset`, handing each contiguous piece to `move(sge, skip, done, n)`.
template <class Move>
SgeCopy walk(std::span<const Sge> sges, uint64_t offset, size_t length, Move&& move) {
    uint64_t skip = offset;
    size_t done = 0;
    for (const Sge& s : sges) {
        if (done == length) break;
        if (skip >= s.length) {
            skip -= s.length;
            continue;
        }
        const size_t n = static_cast<size_t>(std::min<uint64_t>(s.length - skip, length - done));
        if (const mem::AccessError e = move(s, skip, done, n); e != mem::AccessError::None)
            return e == mem::AccessError::Pending ? SgeCopy::Pending : SgeCopy::Failed;
        done += n;
        skip = 0;
    }
    return done == length ? SgeCopy::Ok : SgeCopy::Failed;
}

}  // namespace

SgeCopy scatter_to_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                        std::span<const uint8_t> data) {
    return walk(sges, offset, data.size(), [&](const Sge& s, uint64_t skip, size_t done, size_t n) {
        return memory.copy_in(s.lkey, pd, s.addr + skip, data.subspan(done, n), false);
    });
}

SgeCopy gather_from_sges(mem::MemoryTable& memory, uint32_t pd, std::span<const Sge> sges, uint64_t offset,
                         std::span<uint8_t> out) {
    return walk(sges, offset, out.size(), [&](const Sge& s, uint64_t skip, size_t done, size_t n) {
        return memory.copy_out(s.lkey, pd, s.addr + skip, out.subspan(done, n), false);
    });
}

}  // namespace rnic::transport
