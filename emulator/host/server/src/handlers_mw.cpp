// The ops on memory windows: AllocMw, DeallocMw. A window counts against the owner's MR limit
// (the kernel's rdma cgroup counts every HCA object alike). Binding and invalidation are send
// WQEs and reach the engine through the SQ ring (host_queues.cpp).
#include <cerrno>

#include "control_request.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_alloc_mw(Request& rq, const AllocMwRequest& req) {
    Session& s = rq.s;
    if (!s.pds.count(req.pd)) return rq.fail(EINVAL);  // only its own PDs
    if (int rc = charge(s, Resource::Mrs); rc) return rq.fail(rc);
    const auto mw = engine.alloc_mw(req.pd, req.type);  // EINVAL for a type other than 1 or 2
    if (!mw) {
        uncharge(s, Resource::Mrs);
        return rq.fail(mw.error());
    }
    s.mws.insert(mw->handle);
    rq.ok(AllocMwReply{mw->handle, mw->rkey});
}

void HostService::Impl::on_dealloc_mw(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.mws.count(req.handle)) return rq.fail(EINVAL);  // only its own windows
    const int rc = engine.dealloc_mw(req.handle);
    if (rc == 0) {
        s.mws.erase(req.handle);
        uncharge(s, Resource::Mrs);
    }
    rq.fail(rc);
}

}  // namespace rnic::host::server
