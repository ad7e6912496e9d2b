// ResizeCq (ibv_resize_cq): the CQ gets a new ring of the new size, and the completions the
// client has not polled yet move to its front in order, so none is lost or reordered
// (docs/host_interface.md, "Resizing a CQ").
//
// The old ring is shared with the client, so everything read from it is the client's word:
// only its consumer index is used, and only when `produced - consumer` fits in the old ring
// (otherwise the ring is corrupt and the resize refused); the entries are copied as bytes and
// never interpreted. The daemon's own `produced` count, not the shared producer index, says how
// far the ring was written. The control loop is the only thread touching the CQ, so no
// completion can land in the old ring during the copy.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "control_request.hpp"

namespace rnic::host::server {

using namespace rnic::host::abi;

void HostService::Impl::on_resize_cq(Request& rq, const ResizeCqRequest& req) {
    Session& s = rq.s;
    if (!s.cqs.count(req.handle)) return rq.fail(EINVAL);
    HostCq& cq = *cqs.at(req.handle);
    const uint32_t consumer = cq.ring.header().consumer.load(std::memory_order_acquire);
    const uint32_t unpolled = cq.produced - consumer;
    if (unpolled > cq.ring.size()) return rq.fail(EINVAL);  // a consumer index no poll could give
    // rxe refuses a size below the completions the CQ holds (EINVAL); ours are in the ring, the
    // daemon's own queue and the engine.
    const uint64_t held_here = uint64_t{unpolled} + cq.local.size();
    const uint32_t old_cqe = cq.cqe;
    if (int rc = engine.resize_cq(cq.handle, req.cqe, held_here); rc) return rq.fail(rc);
    const uint32_t size = round_up_power_of_two(req.cqe);
    SharedMemory memory;
    if (int rc = memory.create("rnic-cq", ring_bytes(size, sizeof(Cqe))); rc) {
        engine.resize_cq(cq.handle, old_cqe, 0);
        return rq.fail(rc);
    }
    uint64_t pages = 0;
    if (int rc = charge_queue_memory(s, memory.size() + engine.cq_storage_bytes(cq.handle), pages); rc) {
        engine.resize_cq(cq.handle, old_cqe, 0);
        return rq.fail(rc);
    }
    RingView ring = init_ring(memory.data(), size, sizeof(Cqe));
    for (uint32_t i = 0; i < unpolled; ++i) std::memcpy(ring.entry(i), cq.ring.entry(consumer + i), sizeof(Cqe));
    // The arming state and the event count carry over: an armed CQ stays armed, and the
    // client's count of events seen stays meaningful.
    const RingHeader& old = cq.ring.header();
    ring.header().arm.store(old.arm.load(std::memory_order_acquire), std::memory_order_relaxed);
    ring.header().events.store(old.events.load(std::memory_order_acquire), std::memory_order_relaxed);
    ring.header().error.store(old.error.load(std::memory_order_acquire), std::memory_order_relaxed);
    ring.header().consumer.store(0, std::memory_order_relaxed);
    ring.publish(unpolled);
    pinned->release(s.process, cq.pinned_pages);
    cq.pinned_pages = pages;
    cq.memory = std::move(memory);
    cq.ring = ring;
    cq.produced = unpolled;
    cq.cqe = req.cqe;
    // A larger ring may take what the engine or the daemon's queue held back.
    backlog_cq(cq);
    spdlog::debug("session {}: CQ {} resized from {} to {} ({} completions carried over)", s.id, cq.handle, old_cqe,
                  req.cqe, unpolled);
    const ResizeCqReply out{cq.handle, req.cqe, size, static_cast<uint32_t>(cq.memory.size())};
    rq.ok_closing(out, cq.memory.take_fd());
}

}  // namespace rnic::host::server
