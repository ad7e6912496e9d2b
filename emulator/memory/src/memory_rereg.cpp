// ibv_rereg_mr: a region changes its PD, rights or translation under the same keys.
//
// Atomic with respect to traffic because the table has one owner thread (memory_table.hpp):
// every access checks, translates and copies in one call, so it sees either the entry before
// this function or the entry after it, never a mix. Like a hardware RNIC that re-writes an
// MPT entry (mlx5's UMR), the unit is the access: a message spread over several packets may
// see the old translation for its first packets and the new one for the rest, each packet
// checked against what it meets. The responder closes that gap for the messages it serves:
// it notes the entry's generation at a WRITE's first packet (a READ's first response) and fails
// the rest of the message with a remote access error if a re-registration came in between, as
// mlx5's revoke-then-update of the mkey fails packets that meet it. So a WRITE or READ lands
// wholly through the old translation, wholly through the new one, or fails.
#include <cerrno>
#include <limits>

#include "rnic/memory/memory_table.hpp"

namespace rnic::mem {

namespace {

constexpr bool wraps(uint64_t start, uint64_t length) noexcept {
    return length - 1 > std::numeric_limits<uint64_t>::max() - start;
}

// The checks register_odp / register_mr_pages make of a new translation; 0 or EINVAL.
int check_translation(const MrRereg& c, bool on_demand, uint64_t max_mr_size) noexcept {
    if (on_demand) {
        if (c.odp == nullptr) return EINVAL;
        if (c.implicit) return 0;
        if (c.length == 0 || wraps(c.iova, c.length) || c.odp_address == 0 || wraps(c.odp_address, c.length))
            return EINVAL;
        return 0;
    }
    if (c.length == 0 || c.length > max_mr_size || wraps(c.iova, c.length)) return EINVAL;
    if (c.first_page_offset >= kPageSize || c.pages.size() != pages_spanned(c.first_page_offset, c.length))
        return EINVAL;
    for (const uintptr_t page : c.pages) {
        if (page == 0 || (page & kPageMask) != 0 || page > std::numeric_limits<uintptr_t>::max() - kPageMask)
            return EINVAL;
    }
    return 0;
}

}  // namespace

int MemoryTable::reregister_mr(uint32_t key, const MrRereg& c) {
    if (is_window_key(key)) return EINVAL;
    MptEntry* e = mpt_.find(key);
    if (e == nullptr) return EINVAL;
    // Windows name the region's pages and rely on its rights (MW_BIND, LOCAL_WRITE): the IBA's
    // Reregister Memory Region fails while windows are bound, as Deregister does.
    if (e->bound_windows != 0) return EBUSY;

    const AccessFlags access = c.change_access ? effective_access_flags(c.access) : e->access;
    const bool on_demand = (access & kAccessOnDemand) != 0;
    if (c.change_access) {
        if (const int err = check_mr_access_flags(access & ~kAccessOnDemand); err != 0) return err;
    }
    const bool was_on_demand = e->odp != nullptr;
    if (on_demand != was_on_demand && !c.change_translation) return EINVAL;  // no translation to switch to
    if (c.change_translation) {
        if (const int err = check_translation(c, on_demand, config_.max_mr_size); err != 0) return err;
    }

    // The new MTT range before the old one goes, so a failure leaves the region as it was.
    std::optional<uint64_t> mtt_first;
    uint64_t mtt_pages = 0;
    if (c.change_translation && !on_demand) {
        mtt_pages = c.pages.size();
        mtt_first = mtt_.allocate(mtt_pages);
        if (!mtt_first) return ENOMEM;
        for (uint64_t i = 0; i < mtt_pages; ++i) mtt_.set_page(*mtt_first + i, c.pages[i]);
    }

    // What the NIC cached of the old entry must not outlive it (a hardware SYNC_TPT).
    const uint32_t index = key_index(key);
    mpt_cache_.invalidate(index);
    if (c.change_translation) {
        if (mtt_cache_.enabled()) {
            for (uint64_t i = 0; i < e->mtt_pages; ++i) mtt_cache_.invalidate(e->mtt_first + i);
        }
        if (e->mtt_pages != 0) mtt_.release(e->mtt_first, e->mtt_pages);
        if (on_demand) {
            e->iova = c.implicit ? 0 : c.iova;
            e->length = c.implicit ? UINT64_MAX : c.length;
            e->host_address = c.implicit ? 0 : c.odp_address;
            e->mtt_first = 0;
            e->mtt_pages = 0;
            e->first_page_offset = 0;
            e->odp = c.odp;
        } else {
            e->iova = c.iova;
            e->length = c.length;
            e->host_address = c.pages[0] + c.first_page_offset;
            e->mtt_first = *mtt_first;
            e->mtt_pages = mtt_pages;
            e->first_page_offset = c.first_page_offset;
            e->odp = nullptr;
        }
    }
    if (c.change_pd) e->pd = c.pd;
    e->access = access;
    e->state = MrState::Valid;
    ++e->generation;
    ++counters_.mr_reregistrations;
    return 0;
}

uint32_t MemoryTable::generation(uint32_t key) const noexcept {
    const MptEntry* e = is_window_key(key) ? mw_mpt_.find(key) : mpt_.find(key);
    return e != nullptr ? e->generation : 0;
}

}  // namespace rnic::mem
