// ibv_rereg_mr on the client side: share the new range's pages (as reg_mr does), ask the daemon
// to swap the region's translation, PD or rights under its keys (ReregMr), then let go of what
// the old translation held. On any error the region, its segments and the daemon's view are as
// before (the daemon changes nothing on error either).
#include <cerrno>
#include <cstring>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/client/connection.hpp"
#include "rnic/host/client/page_sharer.hpp"
#include "rnic/host/client/verbs_values.hpp"

namespace rnic::host::client {

namespace {

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
    return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

}  // namespace

// Segments of `range` the daemon does not hold yet are sent (their ids added to `sent`).
int Connection::share_segments(const SharedRange& range, std::vector<uint32_t>& sent) {
    for (const auto& seg : range.segments) {
        if (segment_users_.count(seg->id) != 0) continue;
        const abi::ShareSegmentRequest req{seg->id, 0, seg->share_length()};
        const int fd[1] = {seg->fd};
        if (const int rc = call(abi::Op::ShareSegment, bytes_of(req), fd, nullptr, nullptr); rc != 0) return rc;
        sent.push_back(seg->id);
    }
    return 0;
}

// One MR fewer uses each segment of `range`; the daemon unmaps the ones no MR uses any more.
void Connection::drop_segments(const SharedRange& range) {
    for (const auto& seg : range.segments) {
        const auto it = segment_users_.find(seg->id);
        if (it == segment_users_.end() || --it->second != 0) continue;
        segment_users_.erase(it);
        const abi::HandleRequest rel{seg->id, 0};
        if (!dead()) call(abi::Op::ReleaseSegment, bytes_of(rel), {}, nullptr, nullptr);
    }
    PageSharer::instance().release(range);
}

int Connection::rereg_mr(Mr* mr, uint32_t flags, Pd* pd, void* addr, size_t length, uint32_t access) try {
    if (mr == nullptr || mr->connection != this) return EINVAL;
    if ((flags & abi::kReregChangePd) && (pd == nullptr || pd->connection != this)) return EINVAL;
    if (dead()) return EIO;
    std::lock_guard v(verbs_lock_);
    const uint32_t new_access = (flags & abi::kReregChangeAccess) ? access : mr->access;
    const bool on_demand = (new_access & verbs::kAccessOnDemand) != 0;
    const bool new_range = (flags & abi::kReregChangeTranslation) != 0;
    // Turning ON_DEMAND on or off changes how the daemon reaches the pages: a new translation
    // over the same range.
    const bool translate = new_range || on_demand != ((mr->access & verbs::kAccessOnDemand) != 0);
    void* const to_addr = new_range ? addr : mr->addr;
    const size_t to_length = new_range ? length : mr->length;
    const uint64_t to_iova = new_range ? reinterpret_cast<uintptr_t>(addr) : mr->iova;  // rdma-core: hca_va = addr
    const bool implicit = on_demand && to_addr == nullptr && to_length == SIZE_MAX;

    abi::ReregMrRequest req{};
    req.lkey = mr->lkey;
    req.flags = flags | (translate ? abi::kReregChangeTranslation : 0);
    req.pd = (flags & abi::kReregChangePd) ? pd->handle : 0;
    req.access = (flags & abi::kReregChangeAccess) ? access : 0;
    SharedRange shared;
    std::vector<uint32_t> sent;
    if (translate) {
        req.addr = reinterpret_cast<uintptr_t>(to_addr);
        req.length = implicit ? UINT64_MAX : to_length;
        req.iova = implicit ? 0 : to_iova;
        req.page_offset = static_cast<uint32_t>(req.addr & (page_size() - 1));
        if (!on_demand) {
            auto acquired = PageSharer::instance().acquire(to_addr, to_length);
            if (!acquired) return acquired.error();
            shared = std::move(*acquired);
            req.run_count = static_cast<uint32_t>(shared.runs.size());
        }
    }
    auto undo = [&](int rc) {
        for (uint32_t id : sent) {
            const abi::HandleRequest rel{id, 0};
            call(abi::Op::ReleaseSegment, bytes_of(rel), {}, nullptr, nullptr);
        }
        if (!shared.segments.empty()) PageSharer::instance().release(shared);
        return rc;
    };
    if (const int rc = share_segments(shared, sent); rc != 0) return undo(rc);
    std::vector<uint8_t> body(sizeof req + shared.runs.size() * sizeof(abi::SegmentRun));
    if (body.size() + sizeof(abi::MessageHeader) > abi::kMaxMessage) return undo(ENOMEM);
    std::memcpy(body.data(), &req, sizeof req);
    for (size_t i = 0; i < shared.runs.size(); ++i) {
        const SharedRun& run = shared.runs[i];
        const abi::SegmentRun r{run.segment->id, 0, run.offset, run.length};
        std::memcpy(body.data() + sizeof req + i * sizeof r, &r, sizeof r);
    }
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::ReregMr, body, {}, &reply, nullptr); rc != 0) return undo(rc);
    abi::RegMrReply r{};
    if (reply.size() != sizeof r) return undo(EPROTO);
    std::memcpy(&r, reply.data(), sizeof r);

    if (translate) {
        for (const auto& seg : shared.segments) ++segment_users_[seg->id];
        drop_segments(mr->shared);  // after the new ones are counted: a segment both use stays
        mr->shared = std::move(shared);
        mr->addr = to_addr;
        mr->length = to_length;
        mr->iova = req.iova;
    }
    if (flags & abi::kReregChangePd) mr->pd = pd;
    if (flags & abi::kReregChangeAccess) mr->access = access;
    // The daemon keeps the keys; were that ever to change, the lkey is also the map's key.
    if (r.lkey != mr->lkey || r.rkey != mr->rkey) return EPROTO;
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

}  // namespace rnic::host::client
