// Data path of the memory table: key checks, copies and atomics. Called per packet, so no
// allocation and no exceptions here. Every touch of registered memory runs guarded (fault_guard):
// the pages may belong to a file a client shrank, and that must cost the access, not the daemon.
// The guarded lambdas hold only trivially destructible state, as a siglongjmp out of them needs.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "rnic/memory/fault_guard.hpp"
#include "rnic/memory/memory_table.hpp"

namespace rnic::mem {

namespace {

// [va, va + length) inside [iova, iova + mr length), without computing either end (both can
// be 2^64 or wrap). length > 0.
constexpr bool in_bounds(const MptEntry& e, uint64_t va, uint64_t length) noexcept {
    if (va < e.iova) return false;
    const uint64_t offset = va - e.iova;
    return offset < e.length && length <= e.length - offset;
}

constexpr AccessFlags write_right(bool remote) noexcept {
    return remote ? kAccessRemoteWrite : kAccessLocalWrite;
}
// An lkey may always be read: the consumer registered the buffer in order to send from it.
constexpr AccessFlags read_right(bool remote) noexcept {
    return remote ? kAccessRemoteRead : AccessFlags{0};
}

// Stores bytes the way a NIC's DMA lands them: each byte once, and, for the end of an access,
// its last bytes after everything before them. glibc's memcpy may store a block's tail early
// and again at the end (overlapping vector stores), so an application polling the last byte of
// an RDMA WRITE (riostream, many RDMA programs) that writes its next value there at once saw
// that value overwritten by the second store of the old one.
void place(uint8_t* dst, const uint8_t* src, uint64_t bytes, bool end_of_access) noexcept {
    constexpr uint64_t kTail = 8;
    const uint64_t head = end_of_access ? bytes - std::min(bytes, kTail) : bytes;
    std::memcpy(dst, src, head);
    if (head == bytes) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();  // memcpy's non-temporal stores, if any, before the tail
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    volatile uint8_t* tail = dst + head;
    for (uint64_t i = 0; i < bytes - head; ++i) tail[i] = src[head + i];
}

}  // namespace

AccessError MemoryTable::lookup(uint32_t key, uint32_t pd, uint64_t& va, uint64_t length, AccessFlags required,
                                bool remote, uint32_t qpn, const MptEntry*& entry) {
    if (is_window_key(key)) {
        // A window is only ever an rkey (rxe looks local keys up among regions only).
        if (!remote) {
            charge(mpt_cache_, key_index(key));
            return AccessError::InvalidKey;
        }
        return lookup_window(key, pd, va, length, required, qpn, entry);
    }
    // The NIC fetches the MPT entry whatever the outcome, so even a bad key costs a lookup.
    charge(mpt_cache_, key_index(key));
    const MptEntry* e = mpt_.find(key);
    // A key is usable only while its region is valid: an unknown index, a stale variant and
    // an invalidated region are the same error to the user (rxe: rkey violation).
    if (e == nullptr || e->state != MrState::Valid) return AccessError::InvalidKey;
    // A QP may only use regions of its own protection domain: that is what PDs are for.
    if (e->pd != pd) return AccessError::PdMismatch;
    if ((e->access & required) != required) return AccessError::AccessDenied;
    if (!in_bounds(*e, va, length)) return AccessError::OutOfBounds;
    entry = e;
    return AccessError::None;
}

// The window's entry, then the region it is bound to: two MPT reads, as on an RNIC whose window
// entries point at their region's.
AccessError MemoryTable::lookup_window(uint32_t key, uint32_t pd, uint64_t& va, uint64_t length,
                                       AccessFlags required, uint32_t qpn, const MptEntry*& entry) {
    charge(mpt_cache_, key_index(key));
    const MptEntry* w = mw_mpt_.find(key);
    // A stale key byte, an unbound window (type 1 after a zero-length bind, type 2 free or
    // invalidated) or a deallocated one: no window matches (rxe_lookup_mw).
    if (w == nullptr || !w->bound() || w->length == 0) return AccessError::InvalidKey;
    if (w->pd != pd) return AccessError::PdMismatch;
    // IBA 10.6.7.2.2 / rxe: a type 2 window is usable only by the QP it was bound through.
    if (w->kind == MptKind::MwType2 && w->mw_qpn != qpn) return AccessError::QpMismatch;
    if ((w->access & required) != required) return AccessError::AccessDenied;
    // The window's own range: a window grants [addr, addr + length) and no more. (rxe 6.1 checks
    // only the region's range here, so there an access outside the window but inside the region
    // passes; docs/transport.md.) A zero-based window is addressed from 0.
    if ((w->access & kAccessZeroBased) != 0) {
        if (va >= w->length || length > w->length - va) return AccessError::OutOfBounds;
        va += w->iova;
    } else if (!in_bounds(*w, va, length)) {
        return AccessError::OutOfBounds;
    }
    charge(mpt_cache_, w->mw_region);
    const MptEntry& mr = mpt_.entry(w->mw_region);
    if (mr.state != MrState::Valid) return AccessError::InvalidKey;
    if (!in_bounds(mr, va, length)) return AccessError::OutOfBounds;
    entry = &mr;
    return AccessError::None;
}

AccessError MemoryTable::count(AccessError error, bool remote) noexcept {
    if (error != AccessError::None && error != AccessError::Pending) {
        auto& errors = remote ? counters_.remote_access_errors : counters_.local_access_errors;
        ++errors[static_cast<std::size_t>(error)];
    }
    return error;
}

AccessError MemoryTable::check_access(uint32_t key, uint32_t pd, uint64_t va, uint64_t length, AccessFlags required,
                                      bool remote, uint32_t qpn) {
    // IBA C9-88: a zero-length RDMA READ/WRITE need not carry a valid R_Key or VA, so the
    // key is not looked at; the same holds for zero-length SGEs (rxe copy_data).
    if (length == 0) return AccessError::None;
    const MptEntry* e = nullptr;
    return count(lookup(key, pd, va, length, required, remote, qpn, e), remote);
}

uintptr_t MemoryTable::translate(const MptEntry& e, uint64_t va) noexcept {
    const uint64_t position = (va - e.iova) + e.first_page_offset;
    const uint64_t mtt_index = e.mtt_first + (position >> kPageShift);
    charge(mtt_cache_, mtt_index);
    return mtt_.page(mtt_index) + (position & kPageMask);
}

// Calls fn(host_address, offset_in_access, bytes) once per page the access touches, each
// page translated through its own MTT entry. [va, va + length) must be in bounds.
template <class Fn>
void MemoryTable::for_each_page(const MptEntry& e, uint64_t va, uint64_t length, Fn&& fn) {
    uint64_t done = 0;
    while (done < length) {
        const uintptr_t host = translate(e, va + done);
        const uint64_t room = kPageSize - (host & kPageMask);
        const uint64_t chunk = std::min(length - done, room);
        fn(host, done, chunk);
        done += chunk;
    }
}

AccessError MemoryTable::copy_in(uint32_t key, uint32_t pd, uint64_t va, std::span<const uint8_t> src, bool remote,
                                 uint32_t qpn) {
    if (src.empty()) return AccessError::None;  // C9-88, see check_access
    const MptEntry* e = nullptr;
    if (const AccessError err = lookup(key, pd, va, src.size(), write_right(remote), remote, qpn, e);
        err != AccessError::None) {
        return count(err, remote);
    }
    if (e->odp != nullptr) return odp_copy(*e, va, src, {}, remote);
    auto copy = [&] {
        const uint64_t total = src.size();
        for_each_page(*e, va, total, [&](uintptr_t host, uint64_t offset, uint64_t bytes) {
            place(reinterpret_cast<uint8_t*>(host), src.data() + offset, bytes, offset + bytes == total);
        });
    };
    return guarded(copy) ? AccessError::None : count(AccessError::Fault, remote);
}

AccessError MemoryTable::copy_out(uint32_t key, uint32_t pd, uint64_t va, std::span<uint8_t> dst, bool remote,
                                  uint32_t qpn) {
    if (dst.empty()) return AccessError::None;  // C9-88, see check_access
    const MptEntry* e = nullptr;
    if (const AccessError err = lookup(key, pd, va, dst.size(), read_right(remote), remote, qpn, e);
        err != AccessError::None) {
        return count(err, remote);
    }
    if (e->odp != nullptr) return odp_copy(*e, va, {}, dst, remote);
    auto copy = [&] {
        for_each_page(*e, va, dst.size(), [&](uintptr_t host, uint64_t offset, uint64_t bytes) {
            std::memcpy(dst.data() + offset, reinterpret_cast<const void*>(host), bytes);
        });
    };
    return guarded(copy) ? AccessError::None : count(AccessError::Fault, remote);
}

template <class Op>
AtomicResult MemoryTable::atomic(uint32_t rkey, uint32_t pd, uint64_t va, uint32_t qpn, Op op) {
    constexpr bool kRemote = true;
    // IBA: an atomic's VA must be naturally aligned (8 bytes); a misaligned request is an
    // invalid request, whatever the key says.
    if ((va & 7u) != 0) return {count(AccessError::Misaligned, kRemote), 0};
    const MptEntry* e = nullptr;
    if (const AccessError err = lookup(rkey, pd, va, sizeof(uint64_t), kAccessRemoteAtomic, kRemote, qpn, e);
        err != AccessError::None) {
        return {count(err, kRemote), 0};
    }
    if (e->odp != nullptr) return {count(AccessError::AccessDenied, kRemote), 0};  // see register_odp
    const uintptr_t host = translate(*e, va);
    if (host % std::atomic_ref<uint64_t>::required_alignment != 0) return {count(AccessError::Misaligned, kRemote), 0};
    // Aligned to 8 inside a 4 KiB page, so the word never straddles two MTT pages.
    uint64_t original = 0;
    auto apply = [&] {
        std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(host));
        original = op(word);
    };
    if (!guarded(apply)) return {count(AccessError::Fault, kRemote), 0};
    return {AccessError::None, original};
}

AtomicResult MemoryTable::compare_and_swap(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t compare, uint64_t swap,
                                           uint32_t qpn) {
    return atomic(rkey, pd, va, qpn, [compare, swap](std::atomic_ref<uint64_t>& word) {
        uint64_t seen = compare;
        // On failure `seen` receives the current value; on success it already equals it.
        word.compare_exchange_strong(seen, swap);
        return seen;
    });
}

AtomicResult MemoryTable::fetch_and_add(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t add, uint32_t qpn) {
    // Unsigned: the sum wraps modulo 2^64, as the IBA's Fetch and Add does.
    return atomic(rkey, pd, va, qpn, [add](std::atomic_ref<uint64_t>& word) { return word.fetch_add(add); });
}

AccessError MemoryTable::odp_copy(const MptEntry& e, uint64_t va, std::span<const uint8_t> in,
                                   std::span<uint8_t> out, bool remote) {
    const uint64_t address = e.host_address + (va - e.iova);
    ++counters_.odp_accesses;
    const OdpResult r = in.empty() ? e.odp->read(address, out) : e.odp->write(address, in);
    if (r == OdpResult::Pending) {
        // The caller parks or NAKs and asks again; nothing is known about the bytes yet.
        ++counters_.odp_pending;
        return AccessError::Pending;
    }
    if (r != OdpResult::Done) {
        ++counters_.odp_faults;
        return count(AccessError::Fault, remote);
    }
    counters_.odp_bytes += in.empty() ? out.size() : in.size();
    return AccessError::None;
}

AccessError MemoryTable::atomic_write(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t value, uint32_t qpn) {
    constexpr bool kRemote = true;
    const MptEntry* e = nullptr;
    if (const AccessError err = lookup(rkey, pd, va, sizeof(uint64_t), kAccessRemoteWrite, kRemote, qpn, e);
        err != AccessError::None) {
        return count(err, kRemote);
    }
    if ((va & 7u) != 0) return count(AccessError::Misaligned, kRemote);
    if (e->odp != nullptr) return count(AccessError::AccessDenied, kRemote);  // see register_odp
    const uintptr_t host = translate(*e, va);
    if (host % std::atomic_ref<uint64_t>::required_alignment != 0) return count(AccessError::Misaligned, kRemote);
    auto store = [&] {
        std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(host));
        word.store(value, std::memory_order_release);
    };
    return guarded(store) ? AccessError::None : count(AccessError::Fault, kRemote);
}

AccessError MemoryTable::flush(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t length, uint8_t placement,
                               bool whole_region) {
    constexpr bool kRemote = true;
    AccessFlags need = 0;
    if (placement & 1u) need |= kAccessFlushGlobal;
    if (placement & 2u) need |= kAccessFlushPersistent;
    // The key is looked up even for a zero-length range (unlike READ/WRITE, C9-88 does not
    // exempt FLUSH), as rxe does.
    charge(mpt_cache_, key_index(rkey));
    const MptEntry* e = mpt_.find(rkey);
    if (e == nullptr || e->state != MrState::Valid) return count(AccessError::InvalidKey, kRemote);
    if (e->pd != pd) return count(AccessError::PdMismatch, kRemote);
    if ((e->access & need) != need) return count(AccessError::AccessDenied, kRemote);
    if (!whole_region) {
        const bool inside = length == 0 ? (va >= e->iova && va - e->iova <= e->length) : in_bounds(*e, va, length);
        if (!inside) return count(AccessError::OutOfBounds, kRemote);
    }
    // Every earlier WRITE was stored into the target's memory before this request was
    // executed; the fence orders them before the response that reports the flush done.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return AccessError::None;
}

}  // namespace rnic::mem
