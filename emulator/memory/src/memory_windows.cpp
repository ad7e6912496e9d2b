// Memory windows: allocation, binding and invalidation. The checks follow Linux rxe (rxe_mw.c)
// rule for rule, each with the IBA rule it implements; where we are stricter it says why.
#include <cerrno>

#include "rnic/memory/memory_table.hpp"

namespace rnic::mem {

namespace {

constexpr uint32_t kMwType1 = 1;  // IBV_MW_TYPE_1
constexpr uint32_t kMwType2 = 2;  // IBV_MW_TYPE_2

// What a window may grant: remote rights, and ZERO_BASED addressing. LOCAL_WRITE and MW_BIND
// mean nothing on a window but rdma-core lets applications pass them, so they are accepted.
constexpr AccessFlags kWindowAccess =
    kAccessLocalWrite | kAccessRemoteAny | kAccessMwBind | kAccessZeroBased | kAccessOptionalRange;

// [addr, addr + length) inside the region, overflow-safe (length > 0).
bool inside(const MptEntry& mr, uint64_t addr, uint64_t length) {
    if (addr < mr.iova) return false;
    const uint64_t offset = addr - mr.iova;
    return offset < mr.length && length <= mr.length - offset;
}

}  // namespace

MwAllocResult MemoryTable::alloc_mw(uint32_t pd, uint32_t mw_type) {
    if (mw_type != kMwType1 && mw_type != kMwType2) return {EINVAL, 0, 0};
    const std::optional<uint32_t> index = mw_mpt_.allocate();
    if (!index) return {ENOMEM, 0, 0};
    MptEntry& w = mw_mpt_.entry(*index);
    w.kind = mw_type == kMwType1 ? MptKind::MwType1 : MptKind::MwType2;
    w.pd = pd;
    // Allocated: its key names it. Whether it grants anything is whether it is bound.
    w.state = MrState::Valid;
    ++counters_.mw_allocations;
    return {0, *index, w.key(*index)};
}

void MemoryTable::unbind(MptEntry& w) noexcept {
    if (w.bound()) {
        MptEntry& mr = mpt_.entry(w.mw_region);
        if (mr.bound_windows > 0) --mr.bound_windows;
    }
    w.mw_region = 0;
    w.mw_qpn = 0;
    w.access = 0;
    w.iova = 0;
    w.length = 0;
}

int MemoryTable::dealloc_mw(uint32_t index) {
    if (!mw_mpt_.owns(index)) return EINVAL;
    MptEntry& w = mw_mpt_.entry(index);
    if (w.state == MrState::Free) return EINVAL;
    unbind(w);
    // Cached copies describe a window that is gone (as deregister_mr does for regions).
    mpt_cache_.invalidate(index);
    mw_mpt_.release(index);
    return 0;
}

const MptEntry* MemoryTable::window(uint32_t index) const noexcept {
    if (!mw_mpt_.owns(index)) return nullptr;
    const MptEntry& w = const_cast<Mpt&>(mw_mpt_).entry(index);
    return w.state == MrState::Free ? nullptr : &w;
}

int MemoryTable::bind_mw(const MwBind& b, uint32_t pd, uint32_t qpn) {
    charge(mpt_cache_, key_index(b.mw_rkey));
    MptEntry* w = mw_mpt_.find(b.mw_rkey);
    // The WR names the window by its current rkey: another key byte is another window.
    int err = w == nullptr ? EINVAL : 0;
    MptEntry* mr = nullptr;
    if (err == 0 && b.length != 0) {
        charge(mpt_cache_, key_index(b.mr_lkey));
        mr = mpt_.find(b.mr_lkey);
        if (mr == nullptr || mr->state != MrState::Valid) err = EINVAL;
    }
    if (err == 0 && (b.access & ~kWindowAccess) != 0) err = EINVAL;
    if (err == 0 && w->kind == MptKind::MwType1) {
        // o10-36.2.2: a type 1 window is never zero based.
        if (b.access & kAccessZeroBased) err = EINVAL;
    }
    if (err == 0 && w->kind == MptKind::MwType2) {
        if (w->bound()) err = EINVAL;                        // o10-37.2.30: bound only from free
        if (b.length == 0 || mr == nullptr) err = EINVAL;  // o10-37.2.40: no zero-length type 2 bind
    }
    // C10-72: the window is in the QP's PD. rxe checks it for type 2 only; every window of one
    // rnicd is shared by all its clients, so a type 1 window of another PD is refused too.
    if (err == 0 && w->pd != pd) err = EINVAL;
    if (err == 0 && mr != nullptr) {
        // The region must be in the same PD as well (rxe does not look; a client must not reach
        // another domain's memory through a window of its own).
        if (mr->pd != pd) err = EINVAL;
        // C10-73: the region was registered for binding windows.
        else if (!(mr->access & kAccessMwBind)) err = EINVAL;
        // C10-74: a window that lets the peer write needs a region the local side may write.
        else if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(mr->access & kAccessLocalWrite))
            err = EINVAL;
        // C10-75: the window lies inside the region.
        else if (b.access & kAccessZeroBased ? b.length > mr->length || !inside(*mr, b.addr, b.length)
                                              : !inside(*mr, b.addr, b.length))
            err = EINVAL;
    }
    if (err != 0) {
        ++counters_.mw_bind_errors;
        return err;
    }
    unbind(*w);
    w->variant = key_variant(b.new_rkey);  // the consumer's key byte (ibv_inc_rkey)
    if (mr != nullptr) {
        w->access = effective_access_flags(b.access);
        w->iova = b.addr;
        w->length = b.length;
        w->mw_region = key_index(b.mr_lkey);
        ++mr->bound_windows;
        if (w->kind == MptKind::MwType2) w->mw_qpn = qpn;
    }
    ++counters_.mw_binds;
    return 0;
}

AccessError MemoryTable::invalidate_window(uint32_t key, uint32_t pd) {
    charge(mpt_cache_, key_index(key));
    MptEntry* w = mw_mpt_.find(key);
    if (w == nullptr) return AccessError::InvalidKey;
    if (w->pd != pd) return AccessError::PdMismatch;
    // o10-37.2.26: type 1 windows are not invalidated by work requests (only rebound).
    if (w->kind == MptKind::MwType1) return AccessError::AccessDenied;
    // A free type 2 window has nothing to invalidate (rxe would trip over its missing region).
    if (!w->bound()) return AccessError::InvalidKey;
    unbind(*w);
    ++counters_.mw_invalidations;
    return AccessError::None;
}

void MemoryTable::forget_qp(uint32_t qpn) {
    mw_mpt_.for_each([qpn](uint32_t, MptEntry& w) {
        if (w.kind == MptKind::MwType2 && w.mw_qpn == qpn) w.mw_qpn = 0;
    });
}

}  // namespace rnic::mem
