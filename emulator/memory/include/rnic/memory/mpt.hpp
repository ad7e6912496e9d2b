// The memory protection table: MPT index -> what a key may touch. Index 0 is never handed
// out, so key 0 (a zeroed SGE or RETH) is always invalid.
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
    uint8_t variant = 0;
    MrState state = MrState::Free;

    uint32_t key(uint32_t index) const noexcept { return make_key(index, variant); }
};

class Mpt {
public:
    explicit Mpt(uint32_t max_entries);

    // A free index with a fresh variant, or nullopt when max_entries are in use. Freed indexes
    // are reused oldest first, so a given index (and its variant byte) cycles as slowly as
    // the table allows.
    std::optional<uint32_t> allocate();
    void release(uint32_t index);

    // The entry a key names: index in use and variant current (Valid or Invalid); else null.
    MptEntry* find(uint32_t key) noexcept;
    const MptEntry* find(uint32_t key) const noexcept;

    MptEntry& entry(uint32_t index) noexcept { return entries_[index]; }
    uint32_t in_use() const noexcept { return in_use_; }
    uint32_t max_entries() const noexcept { return max_entries_; }

private:
    uint32_t max_entries_;
    uint32_t in_use_ = 0;
    std::vector<MptEntry> entries_;  // [0] reserved; grows up to max_entries + 1
    std::deque<uint32_t> free_;
};

}  // namespace rnic::mem
