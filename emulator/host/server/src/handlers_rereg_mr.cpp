// ReregMr (ibv_rereg_mr): a region of the session takes a new PD, new rights and/or a new
// translation under the same keys (docs/host_interface.md, "Re-registering a region").
//
// Everything in the request is the client's word and checked here or in the memory table before
// anything changes: the region and the PD must be the session's, the runs must lie in segments
// the session shared, the new pages are charged against RLIMIT_MEMLOCK before the old ones are
// returned. The engine swaps the MPT entry on the control loop, which is the thread every access
// runs on, so a packet meets either the old region or the new one. On any error the region, its
// pinned-page charge and the segments it holds are as they were.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "control_request.hpp"
#include "process_memory.hpp"
#include "rnic/memory/access_flags.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_rereg_mr(Request& rq, const ReregMrRequest& req) {
    Session& s = rq.s;
    if (req.run_count > (kMaxMessage / sizeof(SegmentRun)) ||
        rq.body.size() != sizeof req + size_t{req.run_count} * sizeof(SegmentRun)) {
        reject(s, rq.h, EINVAL, "ReregMr run count");
        return;
    }
    // ib_uverbs_rereg_mr's order: no flag at all is EINVAL, a flag it does not know EOPNOTSUPP.
    if (req.flags == 0) return rq.fail(EINVAL);
    if (req.flags & ~kReregKnownFlags) return rq.fail(EOPNOTSUPP);
    const auto it = s.mrs.find(req.lkey);
    if (it == s.mrs.end()) return rq.fail(EINVAL);
    HostMr& mr = it->second;

    mem::MrRereg change;
    change.change_pd = req.flags & kReregChangePd;
    change.change_access = req.flags & kReregChangeAccess;
    change.change_translation = req.flags & kReregChangeTranslation;
    if (change.change_pd && !s.pds.count(req.pd)) return rq.fail(EINVAL);
    change.pd = req.pd;
    change.access = req.access;
    const bool on_demand = change.change_access ? (req.access & mem::kAccessOnDemand) != 0 : mr.odp != nullptr;
    if (!change.change_translation && req.run_count != 0) return rq.fail(EINVAL);

    std::vector<uintptr_t> pages;
    std::vector<std::shared_ptr<Segment>> segments;
    uint64_t pinned_pages = mr.pinned_pages;
    if (change.change_translation) {
        if (req.length == 0) return rq.fail(EINVAL);
        change.length = req.length;
        change.iova = req.iova;
        if (on_demand) {
            if (req.run_count != 0) return rq.fail(EINVAL);
            change.implicit = req.addr == 0 && req.length == UINT64_MAX && req.iova == 0;
            // As uverbs: the iova at the buffer's offset in its page.
            if (!change.implicit && (req.addr == 0 || (req.iova & (kPageSize - 1)) != (req.addr & (kPageSize - 1))))
                return rq.fail(EINVAL);
            if (int rc = open_process_memory(s); rc) return rq.fail(rc);
            change.odp = s.process_memory.get();
            change.odp_address = req.addr;
            pinned_pages = 0;
        } else {
            if (req.page_offset >= kPageSize || (req.iova & (kPageSize - 1)) != req.page_offset)
                return rq.fail(EINVAL);
            if (int rc = collect_pages(s, rq.body.subspan(sizeof req), req.run_count, req.page_offset, req.length,
                                       pages, segments);
                rc)
                return rq.fail(rc);
            change.pages = pages;
            change.first_page_offset = req.page_offset;
            pinned_pages = pages.size();
            // The new pages are pinned before the old ones are let go (ib_umem_get first).
            if (int rc = charge_locked_pages(s, pinned_pages, "ReregMr"); rc) return rq.fail(rc);
        }
    }
    const int rc = engine.rereg_mr(req.lkey, change);
    if (rc != 0) {
        if (change.change_translation && !on_demand) pinned->release(s.process, pinned_pages);
        spdlog::debug("session {}: ReregMr of {:#x} (flags {:#x}) refused: {}", s.id, req.lkey, req.flags, rc);
        return rq.fail(rc);
    }
    if (change.change_translation) {
        pinned->release(s.process, mr.pinned_pages);
        mr.pinned_pages = pinned_pages;
        mr.segments = std::move(segments);  // the old ones may unmap now: nothing names them
        mr.odp = on_demand ? s.process_memory : nullptr;
        mr.length = req.length;
    }
    if (change.change_pd) mr.pd = req.pd;
    rq.ok(RegMrReply{mr.lkey, mr.rkey});
}

}  // namespace rnic::host::server
