// The ops on completion channels, CQs and SRQs, and what their rings cost the owner's
// RLIMIT_MEMLOCK (CreateQp's too).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "control_request.hpp"
#include "notify_socket.hpp"
#include "peer_process.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;
namespace tp = rnic::transport;

void HostService::Impl::on_create_comp_channel(Request& rq) {
    Session& s = rq.s;
    NotifyPair pair;
    if (int rc = make_notify_pair(pair); rc) return rq.fail(rc);
    const uint32_t handle = s.next_channel++;
    s.channels.emplace(handle, std::make_shared<Channel>(pair.daemon));
    const int out_fds[2] = {pair.client, pair.daemon};
    rq.ok(HandleReply{handle, 0}, out_fds);
    close(pair.client);
}

void HostService::Impl::on_destroy_comp_channel(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    const auto it = s.channels.find(req.handle);
    if (it == s.channels.end()) return rq.fail(EINVAL);
    // Every CQ on the channel holds a reference: only the session's own is left when none does.
    if (it->second.use_count() > 1) return rq.fail(EBUSY);
    s.channels.erase(it);
    rq.fail(0);
}

void HostService::Impl::on_create_cq(Request& rq, const CreateCqRequest& req) {
    Session& s = rq.s;
    std::shared_ptr<Channel> channel;
    if (req.channel != 0) {
        const auto it = s.channels.find(req.channel);
        if (it == s.channels.end()) return rq.fail(EINVAL);
        channel = it->second;
    }
    if (int rc = charge(s, Resource::Cqs); rc) return rq.fail(rc);
    const auto handle = engine.create_cq(req.cqe);
    if (!handle) {
        uncharge(s, Resource::Cqs);
        return rq.fail(handle.error());
    }
    auto cq = std::make_unique<HostCq>();
    const uint32_t size = round_up_power_of_two(req.cqe);
    if (int rc = cq->memory.create("rnic-cq", ring_bytes(size, sizeof(Cqe))); rc) {
        engine.destroy_cq(*handle);
        uncharge(s, Resource::Cqs);
        return rq.fail(rc);
    }
    if (int rc = charge_queue_memory(s, cq->memory.size() + engine.cq_storage_bytes(*handle), cq->pinned_pages); rc) {
        engine.destroy_cq(*handle);
        uncharge(s, Resource::Cqs);
        return rq.fail(rc);
    }
    cq->ring = init_ring(cq->memory.data(), size, sizeof(Cqe));
    cq->handle = *handle;
    cq->owner = &s;
    cq->cqe = req.cqe;
    cq->channel = req.channel;
    cq->channel_ref = std::move(channel);
    const CreateCqReply out{*handle, req.cqe, size, static_cast<uint32_t>(cq->memory.size())};
    const int out_fd = cq->memory.take_fd();
    s.cqs.insert(*handle);
    cqs.emplace(*handle, std::move(cq));
    rq.ok_closing(out, out_fd);
}

void HostService::Impl::on_destroy_cq(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.cqs.count(req.handle)) return rq.fail(EINVAL);
    const int rc = engine.destroy_cq(req.handle);
    if (rc == 0) {
        pinned->release(s.process, cqs.at(req.handle)->pinned_pages);
        s.cqs.erase(req.handle);
        cqs.erase(req.handle);
        uncharge(s, Resource::Cqs);
    }
    rq.fail(rc);
}

void HostService::Impl::on_create_srq(Request& rq, const CreateSrqRequest& req) {
    Session& s = rq.s;
    if (!s.pds.count(req.pd)) return rq.fail(EINVAL);
    const tp::SrqAttributes attr{req.max_wr, std::max<uint32_t>(req.max_sge, 1), req.srq_limit};
    if (int rc = charge(s, Resource::Srqs); rc) return rq.fail(rc);
    const auto handle = engine.create_srq(req.pd, attr);
    if (!handle) {
        uncharge(s, Resource::Srqs);
        return rq.fail(handle.error());
    }
    auto srq = std::make_unique<HostSrq>();
    const uint32_t size = round_up_power_of_two(req.max_wr);
    const uint32_t stride = recv_stride(attr.max_sge);
    if (int rc = srq->memory.create("rnic-srq", ring_bytes(size, stride)); rc) {
        engine.destroy_srq(*handle);
        uncharge(s, Resource::Srqs);
        return rq.fail(rc);
    }
    srq->wq.ring = init_ring(srq->memory.data(), size, stride);
    srq->wq.max_sge = attr.max_sge;
    srq->handle = *handle;
    srq->pd = req.pd;
    srq->owner = &s;
    srq->max_wr = req.max_wr;
    srq->srq_limit = req.srq_limit;
    if (int rc = charge_queue_memory(s, srq->memory.size() + engine.srq_storage_bytes(*handle), srq->pinned_pages);
        rc) {
        engine.destroy_srq(*handle);
        uncharge(s, Resource::Srqs);
        return rq.fail(rc);
    }
    srq->doorbell = s.take_doorbell({*handle, true});
    if (srq->doorbell == UINT32_MAX) {
        pinned->release(s.process, srq->pinned_pages);
        engine.destroy_srq(*handle);
        uncharge(s, Resource::Srqs);
        return rq.fail(ENOMEM);
    }
    const CreateSrqReply out{
        *handle, req.max_wr, attr.max_sge, size, stride, static_cast<uint32_t>(srq->memory.size()), srq->doorbell, 0};
    const int out_fd = srq->memory.take_fd();
    s.srqs.insert(*handle);
    srqs.emplace(*handle, std::move(srq));
    rq.ok_closing(out, out_fd);
}

void HostService::Impl::on_modify_srq(Request& rq, const ModifySrqRequest& req) {
    Session& s = rq.s;
    if (!s.srqs.count(req.handle)) return rq.fail(EINVAL);
    constexpr uint32_t kSrqMaxWr = 1, kSrqLimit = 2;  // enum ibv_srq_attr_mask
    if (req.attr_mask & ~(kSrqMaxWr | kSrqLimit)) return rq.fail(EINVAL);
    if (req.attr_mask & kSrqMaxWr) return rq.fail(EINVAL);  // resizing is not offered (no IBV_SRQ_RESIZE cap)
    if (req.attr_mask & kSrqLimit) {
        const int rc = engine.modify_srq(req.handle, req.srq_limit);
        if (rc) return rq.fail(rc);
        srqs.at(req.handle)->srq_limit = req.srq_limit;
    }
    rq.fail(0);
}

void HostService::Impl::on_query_srq(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.srqs.count(req.handle)) return rq.fail(EINVAL);
    const HostSrq& srq = *srqs.at(req.handle);
    rq.ok(QuerySrqReply{srq.max_wr, srq.wq.max_sge, srq.srq_limit, 0});
}

void HostService::Impl::on_destroy_srq(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.srqs.count(req.handle)) return rq.fail(EINVAL);
    const int rc = engine.destroy_srq(req.handle);
    if (rc == 0) {
        s.release_doorbell(srqs.at(req.handle)->doorbell);
        pinned->release(s.process, srqs.at(req.handle)->pinned_pages);
        s.srqs.erase(req.handle);
        srqs.erase(req.handle);
        uncharge(s, Resource::Srqs);
    }
    rq.fail(rc);
}

// A queue's memory (the ring the client maps and the engine's copy of its WQEs, or a CQ's
// completions) counts against the owner's RLIMIT_MEMLOCK as mlx5's queue buffers do (user memory
// pinned by ib_umem_get; rxe keeps them in kernel memory instead): without a bound, one user could
// make the daemon every application shares allocate until it is killed (a QP of 16,384 WRs of 32
// SGEs and 256 bytes inline takes 22 MB). CAP_IPC_LOCK lifts it, as for registered memory.
int HostService::Impl::charge_queue_memory(Session& s, size_t bytes, uint64_t& pages) {
    const uint64_t n = (bytes + kPageSize - 1) / kPageSize;
    if (int rc = charge_locked_pages(s, n, "a queue"); rc) return rc;
    pages = n;
    return 0;
}

// The process's RLIMIT_MEMLOCK read now, as the kernel reads the caller's for each pin; the
// limit seen at accept once the process can no longer be read.
int HostService::Impl::charge_locked_pages(Session& s, uint64_t pages, const char* what) {
    const LockLimit limit = process_lock_limit(s.process).value_or(s.accepted_lock_limit);
    const int rc = pinned->charge(s.process, pages, limit);
    if (rc) {
        ++counters.memlock_refusals;
        spdlog::info("session {} (pid {}): {} of {} pages over RLIMIT_MEMLOCK ({} bytes, {} pages held): {}", s.id,
                     s.pid, what, pages, limit.bytes, pinned->pinned(s.process), rc == EPERM ? "EPERM" : "ENOMEM");
    }
    return rc;
}

}  // namespace rnic::host::server
