// The memory protection table: MPT index -> what a key may touch. Index 0 is never handed
// out, so key 0 (a zeroed SGE or RETH) is always invalid.
//
// Regions (MRs) and memory windows (MWs) are both MPT entries, as on real RNICs, but in two
// disjoint index ranges (one Mpt each, the windows' starting past the last region index), so a
// window's rkey can never equal a region's key and the index alone says which kind a key names
// (Linux rxe keeps separate MR and MW index ranges for the same reason).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "rnic/memory/access_flags.hpp"
#include "rnic/memory/keys.hpp"

namespace rnic::mem {

// Invalid: invalidated by SEND_WITH_INV or LOCAL_INV; the keys fail until deregistration.
enum class MrState : uint8_t { Free, Valid, Invalid };

std::string_view mr_state_name(MrState state) noexcept;

// What an entry describes. A window has no pages of its own: it names a range of the region it
// is bound to, and accesses through it are translated by that region's MTT entries.
enum class MptKind : uint8_t { Mr, MwType1, MwType2 };

struct MptEntry {
    uint32_t pd = 0;
    AccessFlags access = 0;
    uint64_t iova = 0;           // the address the keys' users (local SGEs, the peer's RETH) name
    uint64_t length = 0;         // bytes from iova
    uintptr_t host_address = 0;  // where the first byte is here; informational, copies use the MTT
    uint64_t mtt_first = 0;      // first MTT entry of the region
    uint64_t mtt_pages = 0;
    uint32_t first_page_offset = 0;  // iova maps this many bytes into MTT page 0
    class OdpBackend* odp = nullptr;  // on-demand region: no MTT, every access through this
    uint8_t variant = 0;  // windows: the key byte the last bind chose (ibv_inc_rkey)
    MrState state = MrState::Free;
    MptKind kind = MptKind::Mr;
    uint32_t bound_windows = 0;  // MR: windows bound to it (it cannot be deregistered meanwhile)
    uint32_t mw_region = 0;      // MW: MPT index of the region it is bound to; 0 = not bound
    uint32_t mw_qpn = 0;         // type 2 MW: the only QP that may use it (0 after that QP is gone)
    // MR: bumped by every re-registration, so a message that began under the old entry can tell
    // it is gone (MemoryTable::generation) instead of going on through the new one.
    uint32_t generation = 0;

    bool is_window() const noexcept { return kind != MptKind::Mr; }
    bool bound() const noexcept { return mw_region != 0; }

    uint32_t key(uint32_t index) const noexcept { return make_key(index, variant); }
};

class Mpt {
public:
    // Indexes first_index .. first_index + max_entries - 1 (first_index >= 1).
    explicit Mpt(uint32_t max_entries, uint32_t first_index = 1);

    // A free index with a fresh variant, or nullopt when max_entries are in use. Freed indexes
    // are reused oldest first, so a given index (and its variant byte) cycles as slowly as
    // the table allows.
    std::optional<uint32_t> allocate();
    void release(uint32_t index);

    // The entry a key names: index in use and variant current (Valid or Invalid); else null.
    MptEntry* find(uint32_t key) noexcept;
    const MptEntry* find(uint32_t key) const noexcept;

    MptEntry& entry(uint32_t index) noexcept { return entries_[slot(index)]; }
    // Whether `index` falls in this table's range (in use or not).
    bool owns(uint32_t index) const noexcept { return index >= first_ && index - first_ < max_entries_; }
    uint32_t in_use() const noexcept { return in_use_; }
    uint32_t max_entries() const noexcept { return max_entries_; }
    uint32_t first_index() const noexcept { return first_; }
    // Calls fn(index, entry) for every entry in use (control path).
    template <class Fn>
    void for_each(Fn&& fn) {
        for (uint32_t s = 1; s < entries_.size(); ++s)
            if (entries_[s].state != MrState::Free) fn(first_ + s - 1, entries_[s]);
    }

private:
    uint32_t slot(uint32_t index) const noexcept { return index - first_ + 1; }

    uint32_t max_entries_;
    uint32_t first_;
    uint32_t in_use_ = 0;
    std::vector<MptEntry> entries_;  // by slot (index - first + 1); [0] unused; grows up to max_entries + 1
    std::deque<uint32_t> free_;      // slots
};

}  // namespace rnic::mem
