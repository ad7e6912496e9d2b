// Control path of the memory table: registration, deregistration, invalidation, queries.
#include "rnic/memory/memory_table.hpp"

#include "rnic/memory/fault_guard.hpp"

#include <cerrno>
#include <limits>
#include <stdexcept>

namespace rnic::mem {

namespace {

constexpr uint64_t kMaxMrSizeLimit = uint64_t{1} << 63;

// True when [start, start + length) wraps past the end of a 64-bit space (length > 0).
constexpr bool range_wraps(uint64_t start, uint64_t length) noexcept {
    return length - 1 > std::numeric_limits<uint64_t>::max() - start;
}

const MemoryConfig& validated(const MemoryConfig& config) {
    if (config.max_mrs == 0 || config.max_mrs > kMaxMptIndex) {
        throw std::invalid_argument("max_mrs must be in [1, 2^24 - 1]");
    }
    if (config.max_mws > kMaxMptIndex - config.max_mrs) {
        throw std::invalid_argument("max_mrs + max_mws must be at most 2^24 - 1");
    }
    if (config.max_mr_size == 0 || config.max_mr_size > kMaxMrSizeLimit) {
        throw std::invalid_argument("max_mr_size must be in [1, 2^63]");
    }
    return config;
}

}  // namespace

MemoryTable::MemoryTable(const MemoryConfig& config)
    : config_(validated(config)),
      mpt_(config.max_mrs),
      mw_mpt_(config.max_mws, config.max_mrs + 1),
      mtt_(config.max_mtt_entries),
      mpt_cache_(config.mpt_cache),
      mtt_cache_(config.mtt_cache) {
    // Registered memory may be a client's file that shrinks under us (see memory_access.cpp).
    (void)install_fault_guard();
}

int MemoryTable::check_registration(uint64_t length, uint64_t iova, AccessFlags access) const noexcept {
    if (const int err = check_mr_access_flags(access); err != 0) return err;
    if (length == 0 || length > config_.max_mr_size) return EINVAL;
    if (range_wraps(iova, length)) return EINVAL;
    return 0;
}

RegResult MemoryTable::reg_failed(int error) noexcept {
    ++counters_.mr_reg_errors;
    return RegResult{error, {}};
}

RegResult MemoryTable::register_mr(uint32_t pd, void* host_address, uint64_t length, uint64_t iova,
                                   AccessFlags access) {
    if (const int err = check_registration(length, iova, access); err != 0) return reg_failed(err);
    const uintptr_t start = reinterpret_cast<uintptr_t>(host_address);
    if (start == 0 || range_wraps(start, length)) return reg_failed(EINVAL);
    const uint32_t offset = static_cast<uint32_t>(start & kPageMask);
    const uintptr_t first_page = start - offset;
    return register_region(pd, start, offset, length, iova, access,
                           [first_page](uint64_t i) { return first_page + i * kPageSize; });
}

RegResult MemoryTable::register_mr_pages(uint32_t pd, std::span<const uintptr_t> pages, uint32_t first_page_offset,
                                         uint64_t length, uint64_t iova, AccessFlags access) {
    if (const int err = check_registration(length, iova, access); err != 0) return reg_failed(err);
    if (first_page_offset >= kPageSize || pages.size() != pages_spanned(first_page_offset, length)) {
        return reg_failed(EINVAL);
    }
    for (const uintptr_t page : pages) {
        if (page == 0 || (page & kPageMask) != 0 || page > std::numeric_limits<uintptr_t>::max() - kPageMask) {
            return reg_failed(EINVAL);
        }
    }
    return register_region(pd, pages[0] + first_page_offset, first_page_offset, length, iova, access,
                           [pages](uint64_t i) { return pages[i]; });
}

template <class PageAt>
RegResult MemoryTable::register_region(uint32_t pd, uintptr_t host_address, uint32_t first_page_offset, uint64_t length,
                                       uint64_t iova, AccessFlags access, PageAt page_at) {
    const uint64_t pages = pages_spanned(first_page_offset, length);
    const std::optional<uint32_t> index = mpt_.allocate();
    if (!index) return reg_failed(ENOMEM);
    const std::optional<uint64_t> mtt_first = mtt_.allocate(pages);
    if (!mtt_first) {
        mpt_.release(*index);
        return reg_failed(ENOMEM);
    }
    for (uint64_t i = 0; i < pages; ++i) mtt_.set_page(*mtt_first + i, page_at(i));

    MptEntry& e = mpt_.entry(*index);
    e.pd = pd;
    e.access = effective_access_flags(access);
    e.iova = iova;
    e.length = length;
    e.host_address = host_address;
    e.mtt_first = *mtt_first;
    e.mtt_pages = pages;
    e.first_page_offset = first_page_offset;
    e.state = MrState::Valid;
    ++counters_.mr_registrations;
    const uint32_t key = e.key(*index);
    return RegResult{0, MrKeys{key, key}};
}

int MemoryTable::deregister_mr(uint32_t key) {
    const MptEntry* e = mpt_.find(key);
    if (e == nullptr) return EINVAL;
    if (e->bound_windows != 0) return EINVAL;  // IBA 10.6.7.2.6; rxe_dereg_mr says EINVAL
    // The cached copies describe a region that no longer exists; a later region reusing the
    // index or the MTT entries must miss, as after a hardware SYNC_TPT.
    mpt_cache_.invalidate(key_index(key));
    if (mtt_cache_.enabled()) {
        for (uint64_t i = 0; i < e->mtt_pages; ++i) mtt_cache_.invalidate(e->mtt_first + i);
    }
    mtt_.release(e->mtt_first, e->mtt_pages);
    mpt_.release(key_index(key));
    ++counters_.mr_deregistrations;
    return 0;
}

AccessError MemoryTable::invalidate(uint32_t key, uint32_t pd) {
    if (is_window_key(key)) return invalidate_window(key, pd);
    charge(mpt_cache_, key_index(key));
    MptEntry* e = mpt_.find(key);
    if (e == nullptr) return AccessError::InvalidKey;
    // The invalidating QP must belong to the region's protection domain, or a peer could
    // revoke another domain's memory.
    if (e->pd != pd) return AccessError::PdMismatch;
    // Windows bound to a region keep it valid until they go (rxe_invalidate_mr).
    if (e->bound_windows != 0) return AccessError::AccessDenied;
    if (e->state == MrState::Valid) ++counters_.mr_invalidations;
    e->state = MrState::Invalid;
    return AccessError::None;
}

std::optional<MptEntry> MemoryTable::query(uint32_t key) const {
    const MptEntry* e = mpt_.find(key);
    if (e == nullptr) return std::nullopt;
    return *e;
}

uint64_t MemoryTable::take_charged_ns() noexcept {
    const uint64_t ns = charged_ns_;
    charged_ns_ = 0;
    return ns;
}

void MemoryTable::reset_cache_stats() noexcept {
    mpt_cache_.reset_stats();
    mtt_cache_.reset_stats();
}

void MemoryTable::charge(CacheModel& cache, uint64_t key) noexcept {
    const uint64_t ns = cache.access_cost_ns(key);
    charged_ns_ += ns;
    counters_.cache_miss_ns += ns;
}

}  // namespace rnic::mem
