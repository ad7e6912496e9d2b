// ibv_rereg_mr as the memory table executes it: which of a region's PD, rights and translation
// change. The region keeps its MPT index and key byte, so its lkey and rkey stay the same (as
// mlx5 does when it re-registers an mkey in place through a UMR).
#pragma once

#include <cstdint>
#include <span>

#include "rnic/memory/access_flags.hpp"
#include "rnic/memory/odp_backend.hpp"

namespace rnic::mem {

struct MrRereg {
    bool change_pd = false;  // IBV_REREG_MR_CHANGE_PD
    uint32_t pd = 0;
    bool change_access = false;  // IBV_REREG_MR_CHANGE_ACCESS
    AccessFlags access = 0;
    // IBV_REREG_MR_CHANGE_TRANSLATION: the new range, as register_mr_pages (pinned) or
    // register_odp (when the new rights hold IBV_ACCESS_ON_DEMAND) take it. Turning
    // ON_DEMAND on or off is a new translation too: it must come with one.
    bool change_translation = false;
    uint64_t length = 0;
    uint64_t iova = 0;
    std::span<const uintptr_t> pages;  // pinned: 4 KiB-aligned, exactly the pages spanned
    uint32_t first_page_offset = 0;
    OdpBackend* odp = nullptr;  // on demand: the owner's memory, at odp_address + (va - iova)
    uint64_t odp_address = 0;
    bool implicit = false;  // on demand: the whole address space
};

}  // namespace rnic::mem
