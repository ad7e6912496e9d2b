// The ops on address handles: CreateAh (which waits for ARP or ND), DestroyAh.
#include <cerrno>

#include "address_vector.hpp"
#include "control_request.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_create_ah(Request& rq, const CreateAhRequest& req) {
    const Session& s = rq.s;
    if (!s.pds.count(req.pd)) return rq.fail(EINVAL);
    wire::Gid dgid;
    if (int rc = av_target(engine, req.av, dgid); rc) return rq.fail(rc);
    // Counted when made (after the neighbour answers); refused at once if already full.
    if (held_by(s.uid, Resource::Ahs) >= limits_of(s.uid)[Resource::Ahs]) {
        ++counters.user_limit_refusals;
        return rq.fail(EAGAIN);
    }
    wire::MacAddr mac{};
    const Resolution r = resolver ? resolver(dgid, now_ns, mac) : Resolution::Unreachable;
    defer(rq, dgid, r, mac);
}

void HostService::Impl::on_create_ah_resolved(Request& rq, const CreateAhRequest& req, const wire::MacAddr& mac) {
    Session& s = rq.s;
    transport::AddressVector v = to_engine(req.av);
    v.dmac = mac;
    if (int rc = charge(s, Resource::Ahs); rc) return rq.fail(rc);
    const auto ah = engine.create_ah(req.pd, v);
    if (!ah) {
        uncharge(s, Resource::Ahs);
        return rq.fail(ah.error());
    }
    s.ahs.emplace(*ah, req.pd);
    rq.ok(HandleReply{*ah, 0});
}

void HostService::Impl::on_destroy_ah(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.ahs.count(req.handle)) return rq.fail(EINVAL);
    const int rc = engine.destroy_ah(req.handle);
    if (rc == 0) {
        s.ahs.erase(req.handle);
        uncharge(s, Resource::Ahs);
    }
    rq.fail(rc);
}

}  // namespace rnic::host::server
