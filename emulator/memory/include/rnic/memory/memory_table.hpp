// The RNIC's memory protection unit: registration (MPT + MTT), the checks every local and
// remote access goes through, copies into and out of registered memory, 8-byte atomics, and
// the MPT/MTT cache models whose misses are charged as processing time.
//
// Not thread-safe: one engine thread owns a table (registration requests reach it through the
// engine's control path). Nothing on the data path allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "rnic/memory/access_error.hpp"
#include "rnic/memory/access_flags.hpp"
#include "rnic/memory/cache_model.hpp"
#include "rnic/memory/keys.hpp"
#include "rnic/memory/memory_config.hpp"
#include "rnic/memory/memory_counters.hpp"
#include "rnic/memory/mpt.hpp"
#include "rnic/memory/mr_rereg.hpp"
#include "rnic/memory/mtt.hpp"
#include "rnic/memory/odp_backend.hpp"

namespace rnic::mem {

struct RegResult {
    int error = 0;  // 0 or an errno value, as ibv_reg_mr would set it
    MrKeys keys{};
    bool ok() const noexcept { return error == 0; }
};

// ibv_alloc_mw: the window's MPT index (its handle: stable across binds) and first rkey.
struct MwAllocResult {
    int error = 0;  // 0, EINVAL (type), ENOMEM (every window entry in use)
    uint32_t index = 0;
    uint32_t rkey = 0;
    bool ok() const noexcept { return error == 0; }
};

// A BIND_MW work request (IBV_WR_BIND_MW, or ibv_bind_mw's). length 0 unbinds a type 1 window.
struct MwBind {
    uint32_t mw_rkey = 0;   // the window's current rkey
    uint32_t new_rkey = 0;  // only its low 8 bits count: the key byte the consumer chose
    uint32_t mr_lkey = 0;   // the region the window goes over (ignored for length 0)
    uint64_t addr = 0;      // start of the window in the region's iova space
    uint64_t length = 0;
    AccessFlags access = 0;  // the window's remote rights, ZERO_BASED (type 2 only)
};

struct AtomicResult {
    AccessError error = AccessError::None;
    uint64_t original = 0;  // the value before the operation (what the AtomicAckETH carries)
};

class MemoryTable {
public:
    // Throws std::invalid_argument on an impossible config (set-up only).
    explicit MemoryTable(const MemoryConfig& config = {});

    // --- control path -------------------------------------------------------------------
    // A region of `length` bytes at `host_address` in this process, named `iova` by its
    // users. Errors: EINVAL (flags, zero length, over max_mr_size, iova or host range
    // wrapping, null address), EOPNOTSUPP (ODP, FLUSH_PERSISTENT), ENOMEM (MPT or MTT full).
    RegResult register_mr(uint32_t pd, void* host_address, uint64_t length, uint64_t iova, AccessFlags access);
    // The same from a list of 4 KiB-aligned page addresses (not necessarily contiguous); the
    // region starts `first_page_offset` bytes into pages[0]. pages.size() must be exactly the
    // number of pages the region spans.
    RegResult register_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                uint64_t length, uint64_t iova, AccessFlags access);
    // An on-demand region (IBV_ACCESS_ON_DEMAND must be in `access`): nothing is pinned or
    // translated now; every access goes through `backend` at `address` + (va - iova). `implicit`
    // is the whole address space (ibv_reg_mr(pd, NULL, SIZE_MAX, ...)): iova 0, every address
    // but the last. The backend must outlive the region. Atomics on such a region are refused
    // (AccessDenied): the backend cannot make them atomic against the owner's CPUs.
    RegResult register_odp(uint32_t pd, uint64_t address, uint64_t length, uint64_t iova, AccessFlags access,
                           OdpBackend* backend, bool implicit);
    // 0, or EINVAL when the key names no registered region (stale variant included) or windows
    // are still bound to it (rxe's answer, IBA 10.6.7.2.6).
    int deregister_mr(uint32_t key);
    // ibv_rereg_mr (memory_rereg.cpp): the region `key` names takes the new PD, rights and/or
    // translation in one step, keeping its keys; the MPT entry and MTT cache lines it had are
    // invalidated, its old MTT range freed. Every check comes first: on error nothing changed.
    // Errors: EINVAL (no such region, a window's key, bad rights or range, ON_DEMAND toggled
    // without a translation), EOPNOTSUPP (rights this device lacks), EBUSY (windows are bound to
    // it: they name its pages and rights), ENOMEM (MTT full). A region that was invalidated
    // (LOCAL_INV, SEND_WITH_INV) is valid again afterwards: it has been registered anew.
    int reregister_mr(uint32_t key, const MrRereg& change);
    // SEND_WITH_INV / LOCAL_INV: the region stays registered but its keys stop working.
    // InvalidKey (no such region), PdMismatch (not the QP's PD), AccessDenied (windows are bound
    // to it: rxe refuses) or None; invalidating an already invalid region is None, as in rxe.
    // A window's rkey unbinds the window instead (type 2 only; a type 1 window is AccessDenied, an
    // unbound one InvalidKey), after which it is free to be bound again.
    AccessError invalidate(uint32_t key, uint32_t pd);
    // The entry a key names, Valid or Invalid; nullopt for free indexes and stale keys.
    std::optional<MptEntry> query(uint32_t key) const;
    // The re-registration count of the entry `key` names (0 for none): a responder records it at
    // a message's first packet and refuses the rest of the message if it changed, so no WRITE or
    // READ is served half through the old translation and half through the new one. Not a
    // lookup the NIC pays for (the MPT entry is already in hand for the packet's own access).
    uint32_t generation(uint32_t key) const noexcept;

    // --- memory windows (memory_windows.cpp; checks and errno values as Linux rxe's) --------
    // mw_type: 1 or 2 (enum ibv_mw_type). A type 1 window starts usable-but-unbound, a type 2
    // one free (bindable only by a BIND_MW work request).
    MwAllocResult alloc_mw(uint32_t pd, uint32_t mw_type);
    // Unbinds it if bound (a window may be deallocated in any state, as in rxe); EINVAL for an
    // index that is no allocated window.
    int dealloc_mw(uint32_t index);
    // The bind a QP of `pd` with number `qpn` executes: 0, or EINVAL for every refusal (unknown
    // or stale keys, type 2 already bound, PD mismatch, region without MW_BIND, writable window
    // on a region without LOCAL_WRITE, range outside the region, ZERO_BASED on type 1, unknown
    // access bits): the requester completes it with IBV_WC_MW_BIND_ERR.
    int bind_mw(const MwBind& bind, uint32_t pd, uint32_t qpn);
    // The window's entry by MPT index (nullptr if no allocated window has it), for tests/stats.
    const MptEntry* window(uint32_t index) const noexcept;
    // A destroyed QP's type 2 windows stay bound but nobody may use them (a later QP may get the
    // same number); rxe keeps them pointing at the dead QP.
    void forget_qp(uint32_t qpn);
    bool is_window_key(uint32_t key) const noexcept { return key_index(key) >= mw_mpt_.first_index(); }

    // --- data path ----------------------------------------------------------------------
    // May `key` be used by a QP of `pd` for [va, va + length) with `required` rights?
    // remote: the key came from the peer (rkey) rather than a local SGE (lkey); it decides
    // which error counters move. Zero-length accesses are not checked at all (IBA C9-88: a
    // zero-length RDMA operation need not carry a valid R_Key or VA; rxe does the same for
    // SGEs), so they succeed for any key and touch no cache.
    // A window's rkey is checked as a window (bound, PD, rights, the window's range; type 2: used
    // by `qpn`, the QP it was bound through), then the access goes through its region. Windows
    // are never lkeys.
    AccessError check_access(uint32_t key, uint32_t pd, uint64_t va, uint64_t length, AccessFlags required,
                             bool remote, uint32_t qpn = 0);

    // Write `src` into registered memory at va. Checks as check_access with the right a write
    // by the NIC needs: REMOTE_WRITE for an rkey (RDMA WRITE), LOCAL_WRITE for an lkey
    // (receive buffer, READ response or atomic result landing). Nothing is written on a check
    // error; on Fault (the region's pages vanished mid-copy, SIGBUS caught) the bytes before the
    // lost page may have been.
    AccessError copy_in(uint32_t key, uint32_t pd, uint64_t va, std::span<const uint8_t> src, bool remote,
                        uint32_t qpn = 0);
    // Read registered memory at va into `dst`: REMOTE_READ for an rkey (RDMA READ), no right
    // for an lkey (a local key may always be read: SEND and WRITE payloads). Fault as copy_in
    // (`dst` then holds a partial copy).
    AccessError copy_out(uint32_t key, uint32_t pd, uint64_t va, std::span<uint8_t> dst, bool remote,
                         uint32_t qpn = 0);

    // Responder atomics on 8 bytes at va, values in host byte order (the engine converts the
    // AtomicETH). Need REMOTE_ATOMIC and an 8-byte aligned va (else Misaligned, checked
    // before the key, as the request itself is malformed) and host address (a region whose
    // iova and host address disagree mod 8 cannot be operated on atomically: Misaligned).
    // Done with std::atomic_ref so an application touching the word concurrently stays defined.
    // A word whose page vanished is Fault, and nothing was changed.
    AtomicResult compare_and_swap(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t compare, uint64_t swap,
                                  uint32_t qpn = 0);
    AtomicResult fetch_and_add(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t add, uint32_t qpn = 0);
    // ATOMIC WRITE (IBTA 1.5): the 8 bytes `value` holds (as they came off the wire) stored at
    // va as one word, after everything stored before it (a release store, as rxe does). Needs
    // REMOTE_WRITE; the key is checked first, then the alignment (Misaligned), as in rxe.
    AccessError atomic_write(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t value, uint32_t qpn = 0);
    // FLUSH (IBTA 1.5) of [va, va + length), or of the whole region when `whole_region`: the
    // key needs the FLUSH rights `placement` asks for (bit 0 global visibility, bit 1
    // persistence). What a software NIC's writes reach is the target process's memory, so
    // global visibility is a store fence once the key checks pass; persistence cannot be
    // granted (no region is registered with FLUSH_PERSISTENT), so it fails as AccessDenied.
    AccessError flush(uint32_t rkey, uint32_t pd, uint64_t va, uint64_t length, uint8_t placement,
                      bool whole_region);

    // --- cost and counters --------------------------------------------------------------
    // Nanoseconds of cache misses since the last take; the engine adds them to its clock.
    uint64_t charged_ns() const noexcept { return charged_ns_; }
    uint64_t take_charged_ns() noexcept;

    const CacheModel& mpt_cache() const noexcept { return mpt_cache_; }
    const CacheModel& mtt_cache() const noexcept { return mtt_cache_; }
    void reset_cache_stats() noexcept;
    const MemoryCounters& raw_counters() const noexcept { return counters_; }
    CounterList counters() const;

    const MemoryConfig& config() const noexcept { return config_; }
    uint32_t mr_count() const noexcept { return mpt_.in_use(); }

private:
    template <class PageAt>
    RegResult register_region(uint32_t pd, uintptr_t host_address, uint32_t first_page_offset, uint64_t length,
                              uint64_t iova, AccessFlags access, PageAt page_at);
    int check_registration(uint64_t length, uint64_t iova, AccessFlags access) const noexcept;
    RegResult reg_failed(int error) noexcept;

    // On success `entry` is the region to copy through and `va` the address in its iova space
    // (a zero-based window's offsets are rebased onto its start).
    AccessError lookup(uint32_t key, uint32_t pd, uint64_t& va, uint64_t length, AccessFlags required, bool remote,
                       uint32_t qpn, const MptEntry*& entry);
    AccessError lookup_window(uint32_t key, uint32_t pd, uint64_t& va, uint64_t length, AccessFlags required,
                              uint32_t qpn, const MptEntry*& entry);
    AccessError invalidate_window(uint32_t key, uint32_t pd);
    void unbind(MptEntry& window) noexcept;
    AccessError count(AccessError error, bool remote) noexcept;
    uintptr_t translate(const MptEntry& e, uint64_t va) noexcept;
    template <class Fn>
    void for_each_page(const MptEntry& e, uint64_t va, uint64_t length, Fn&& fn);
    template <class Op>
    AtomicResult atomic(uint32_t rkey, uint32_t pd, uint64_t va, uint32_t qpn, Op op);
    void charge(CacheModel& cache, uint64_t key) noexcept;
    AccessError odp_copy(const MptEntry& e, uint64_t va, std::span<const uint8_t> in, std::span<uint8_t> out,
                         bool remote);

    MemoryConfig config_;
    Mpt mpt_;     // regions: indexes 1 .. max_mrs
    Mpt mw_mpt_;  // windows: indexes max_mrs + 1 .. max_mrs + max_mws
    Mtt mtt_;
    CacheModel mpt_cache_;
    CacheModel mtt_cache_;
    uint64_t charged_ns_ = 0;
    MemoryCounters counters_;
};

}  // namespace rnic::mem
