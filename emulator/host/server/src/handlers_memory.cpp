// The ops on protection domains and memory: AllocPd, DeallocPd, ShareSegment, ReleaseSegment,
// RegMr, DeregMr (ReregMr: handlers_rereg_mr.cpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "control_request.hpp"
#include "process_memory.hpp"
#include "rnic/memory/access_flags.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_alloc_pd(Request& rq) {
    Session& s = rq.s;
    if (int rc = charge(s, Resource::Pds); rc) return rq.fail(rc);
    const auto pd = engine.alloc_pd();
    if (!pd) {
        uncharge(s, Resource::Pds);
        return rq.fail(pd.error());
    }
    s.pds.insert(*pd);
    rq.ok(HandleReply{*pd, 0});
}

void HostService::Impl::on_dealloc_pd(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.pds.count(req.handle)) return rq.fail(EINVAL);
    // EBUSY while QPs, SRQs, AHs or MRs of the PD exist: the engine counts them.
    const int rc = engine.dealloc_pd(req.handle);
    if (rc == 0) {
        s.pds.erase(req.handle);
        uncharge(s, Resource::Pds);
    }
    rq.fail(rc);
}

void HostService::Impl::on_share_segment(Request& rq, const ShareSegmentRequest& req) {
    Session& s = rq.s;
    const int fd = rq.take_fd(0);
    if (s.segments.count(req.segment_id) || req.length == 0 || req.length % kPageSize) {
        close(fd);
        return rq.fail(EINVAL);
    }
    auto seg = std::make_shared<Segment>();
    if (int rc = seg->memory.map_client(fd, req.length); rc) return rq.fail(rc);
    if (!seg->memory.sealed())
        spdlog::debug("session {}: segment {} cannot be sealed against shrinking; accesses to it are guarded", s.id,
                      req.segment_id);
    s.segments.emplace(req.segment_id, std::move(seg));
    rq.fail(0);
}

void HostService::Impl::on_release_segment(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    return rq.fail(s.segments.erase(req.handle) ? 0 : EINVAL);
}

// IBV_ACCESS_ON_DEMAND: no pages are shared, pinned or charged; the engine reaches them through
// the client's own process whenever the NIC touches them (process_memory.hpp).
void HostService::Impl::on_reg_mr_odp(Request& rq, const RegMrRequest& req) {
    Session& s = rq.s;
    if (!s.pds.count(req.pd) || req.length == 0) return rq.fail(EINVAL);
    const bool implicit = req.addr == 0 && req.length == UINT64_MAX && req.iova == 0;
    if (!implicit && (req.addr == 0 || (req.iova & (kPageSize - 1)) != (req.addr & (kPageSize - 1))))
        return rq.fail(EINVAL);
    if (int rc = open_process_memory(s); rc) return rq.fail(rc);
    if (int rc = charge(s, Resource::Mrs); rc) return rq.fail(rc);
    const auto r = engine.reg_mr_odp(req.pd, req.addr, req.length, req.iova, req.access, s.process_memory.get(),
                                     implicit);
    if (!r) {
        uncharge(s, Resource::Mrs);
        return rq.fail(r.error());
    }
    HostMr mr;
    mr.lkey = r->lkey;
    mr.rkey = r->rkey;
    mr.pd = req.pd;
    mr.length = req.length;
    mr.odp = s.process_memory;
    s.mrs.emplace(r->lkey, std::move(mr));
    rq.ok(RegMrReply{r->lkey, r->rkey});
}

int HostService::Impl::open_process_memory(Session& s) {
    if (!s.peer_known) return EPERM;  // whose memory would it be?
    if (s.process_memory && s.process_memory->alive()) return 0;
    s.process_memory = ProcessMemory::open(s.process, odp_notifier);
    if (s.process_memory) return 0;
    const int err = errno == EPERM || errno == EAGAIN ? errno : ESRCH;
    spdlog::info("session {}: ODP registration refused: pid {} not reachable ({})", s.id, s.process.pid, err);
    return err;
}

int HostService::Impl::collect_pages(Session& s, std::span<const uint8_t> runs, uint32_t run_count,
                                     uint32_t page_offset, uint64_t length, std::vector<uintptr_t>& pages,
                                     std::vector<std::shared_ptr<Segment>>& segments) {
    if (length == 0 || page_offset >= kPageSize || run_count == 0 || runs.size() != size_t{run_count} * sizeof(SegmentRun))
        return EINVAL;
    if (length > UINT64_MAX - page_offset - kPageSize) return EINVAL;
    const uint64_t pages_needed = (uint64_t{page_offset} + length + kPageSize - 1) / kPageSize;
    for (uint32_t i = 0; i < run_count; ++i) {
        SegmentRun run{};
        std::memcpy(&run, runs.data() + i * sizeof run, sizeof run);
        const auto it = s.segments.find(run.segment_id);
        if (it == s.segments.end() || run.offset % kPageSize || run.length % kPageSize || run.length == 0 ||
            run.offset > it->second->memory.size() || run.length > it->second->memory.size() - run.offset ||
            pages.size() + run.length / kPageSize > pages_needed)
            return EINVAL;
        for (uint64_t off = 0; off < run.length; off += kPageSize)
            pages.push_back(reinterpret_cast<uintptr_t>(it->second->memory.data() + run.offset + off));
        segments.push_back(it->second);
    }
    return pages.size() == pages_needed ? 0 : EINVAL;
}

void HostService::Impl::on_reg_mr(Request& rq, const RegMrRequest& req) {
    Session& s = rq.s;
    if ((req.access & mem::kAccessOnDemand) && req.run_count == 0 && rq.body.size() == sizeof req)
        return on_reg_mr_odp(rq, req);
    if (req.run_count > (kMaxMessage / sizeof(SegmentRun)) ||
        rq.body.size() != sizeof req + size_t{req.run_count} * sizeof(SegmentRun)) {
        reject(s, rq.h, EINVAL, "RegMr run count");
        return;
    }
    if (!s.pds.count(req.pd) || req.length == 0 || req.page_offset >= kPageSize || req.run_count == 0)
        return rq.fail(EINVAL);
    // The engine could name the buffer by any iova, but Linux's uverbs refuses one whose
    // offset in its page differs from the buffer's, on every device: a program doing it
    // must fail here as it would on a real RNIC.
    if ((req.iova & (kPageSize - 1)) != req.page_offset) return rq.fail(EINVAL);
    std::vector<uintptr_t> pages;
    HostMr mr;
    if (int rc = collect_pages(s, rq.body.subspan(sizeof req), req.run_count, req.page_offset, req.length, pages,
                               mr.segments);
        rc)
        return rq.fail(rc);
    const uint64_t pages_needed = pages.size();
    // The object first (uverbs charges the cgroup before the driver pins), then
    // ib_umem_get: every page the buffer spans counts against the process's
    // RLIMIT_MEMLOCK (overlapping MRs each count), read now as the kernel reads the
    // caller's; CAP_IPC_LOCK lifts it.
    if (int rc = charge(s, Resource::Mrs); rc) return rq.fail(rc);
    if (int rc = charge_locked_pages(s, pages_needed, "RegMr"); rc) {
        uncharge(s, Resource::Mrs);
        return rq.fail(rc);
    }
    const auto r = engine.reg_mr_pages(req.pd, pages, req.page_offset, req.length, req.iova, req.access);
    if (!r) {
        pinned->release(s.process, pages_needed);
        uncharge(s, Resource::Mrs);
        return rq.fail(r.error());
    }
    mr.pinned_pages = pages_needed;
    mr.lkey = r->lkey;
    mr.rkey = r->rkey;
    mr.pd = req.pd;
    mr.length = req.length;
    s.mrs.emplace(r->lkey, std::move(mr));
    rq.ok(RegMrReply{r->lkey, r->rkey});
}

void HostService::Impl::on_dereg_mr(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    const auto it = s.mrs.find(req.handle);
    if (it == s.mrs.end()) return rq.fail(EINVAL);
    const int rc = engine.dereg_mr(req.handle);
    if (rc == 0) {
        pinned->release(s.process, it->second.pinned_pages);
        uncharge(s, Resource::Mrs);
        s.mrs.erase(it);  // the segments it held may unmap now
    }
    rq.fail(rc);
}

}  // namespace rnic::host::server
