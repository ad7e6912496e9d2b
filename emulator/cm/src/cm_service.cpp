// Ids, channels and events: rdma_ucm's part (one context per id, events queued per channel and
// handed out oldest first), and the public entry points.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "service_impl.hpp"

namespace rnic::cm {

std::string_view event_name(EventType e) noexcept {
    static constexpr std::string_view kNames[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",  "RDMA_CM_EVENT_ADDR_ERROR",      "RDMA_CM_EVENT_ROUTE_RESOLVED",
        "RDMA_CM_EVENT_ROUTE_ERROR",    "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",  "RDMA_CM_EVENT_UNREACHABLE",     "RDMA_CM_EVENT_REJECTED",
        "RDMA_CM_EVENT_ESTABLISHED",    "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
        "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
    const auto i = static_cast<size_t>(e);
    return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

std::string_view rdma_state_name(RdmaState s) noexcept {
    static constexpr std::string_view kNames[] = {
        "RDMA_CM_IDLE",           "RDMA_CM_ADDR_QUERY",     "RDMA_CM_ADDR_RESOLVED", "RDMA_CM_ROUTE_QUERY",
        "RDMA_CM_ROUTE_RESOLVED", "RDMA_CM_CONNECT",        "RDMA_CM_DISCONNECT",    "RDMA_CM_ADDR_BOUND",
        "RDMA_CM_LISTEN",         "RDMA_CM_DEVICE_REMOVAL", "RDMA_CM_DESTROYING"};
    const auto i = static_cast<size_t>(s);
    return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

std::string_view ib_state_name(IbState s) noexcept {
    static constexpr std::string_view kNames[] = {
        "IB_CM_IDLE",         "IB_CM_LISTEN",       "IB_CM_REQ_SENT",      "IB_CM_REQ_RCVD",
        "IB_CM_MRA_REQ_SENT", "IB_CM_MRA_REQ_RCVD", "IB_CM_REP_SENT",      "IB_CM_REP_RCVD",
        "IB_CM_MRA_REP_SENT", "IB_CM_MRA_REP_RCVD", "IB_CM_ESTABLISHED",   "IB_CM_DREQ_SENT",
        "IB_CM_DREQ_RCVD",    "IB_CM_TIMEWAIT",     "IB_CM_SIDR_REQ_SENT", "IB_CM_SIDR_REQ_RCVD"};
    const auto i = static_cast<size_t>(s);
    return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

CmService::Impl::Impl(CmConfig c, Resolver r, CmHooks* h)
    : config(std::move(c)), resolver(std::move(r)), hooks(h), timers(64) {
    uint64_t seed = config.seed;
    if (seed == 0) {
        std::random_device rd;
        seed = (uint64_t{rd()} << 32) | rd();
    }
    rng.seed(seed);
    liveness_timer.kind = kLivenessTimer;
    comm_id_operand = static_cast<uint32_t>(rng());
    handle_next = static_cast<uint32_t>(rng() & 0xFFFF);
    if (config.ephemeral_low == 0 || config.ephemeral_high < config.ephemeral_low) {
        config.ephemeral_low = 32768;
        config.ephemeral_high = 60999;
    }
}

uint32_t CmService::Impl::next_handle() {
    for (;;) {
        const uint32_t h = ++handle_next;
        if (h != 0 && !ids.count(h) && !channels.count(h)) return h;
    }
}

// Linux hands out ids cyclically and XORs them with a random operand, so they do not repeat soon
// and are not guessable from one another's order.
uint32_t CmService::Impl::next_comm_id() {
    for (;;) {
        const uint32_t id = ++comm_id_next ^ comm_id_operand;
        if (id != 0 && !by_comm_id.count(id)) return id;
    }
}

Id* CmService::Impl::find(uint32_t owner, uint32_t handle) const noexcept {
    const auto it = ids.find(handle);
    if (it == ids.end() || it->second->owner != owner || it->second->orphan) return nullptr;
    // A connection request not yet taken is the listener's, not yet the application's.
    if (it->second->listener != 0) return nullptr;
    return it->second.get();
}

Channel* CmService::Impl::find_channel(uint32_t owner, uint32_t handle) noexcept {
    const auto it = channels.find(handle);
    if (it == channels.end() || it->second.owner != owner) return nullptr;
    return &it->second;
}

Id* CmService::Impl::make_id(uint32_t owner, uint32_t channel, uint16_t ps, uint32_t qp_type, int& err) {
    err = hooks ? hooks->admit_id(owner) : 0;
    if (err) return nullptr;
    auto id = std::make_unique<Id>();
    id->handle = next_handle();
    id->owner = owner;
    id->channel = channel;
    id->port_space = ps;
    id->qp_type = qp_type;
    id->seq_num = static_cast<uint32_t>(rng()) & 0xFFFFFF;
    id->path.mtu = config.active_mtu;
    for (common::Timer* t : {&id->send_timer, &id->timewait_timer, &id->resolve_timer}) t->owner = id->handle;
    id->send_timer.kind = kSendTimer;
    id->timewait_timer.kind = kTimewaitTimer;
    id->resolve_timer.kind = kResolveTimer;
    Id* raw = id.get();
    ids.emplace(raw->handle, std::move(id));
    ++channels.at(channel).ids;
    return raw;
}

void CmService::Impl::free_id(Id& id, uint64_t) {
    timers.cancel(id.send_timer);
    timers.cancel(id.timewait_timer);
    timers.cancel(id.resolve_timer);
    remove_remote(id);
    if (id.orphan) {
        // Its application's share went when it was orphaned.
        --orphans;
        if (id.local_comm_id) by_comm_id.erase(id.local_comm_id);
        ids.erase(id.handle);
        return;
    }
    if (id.in_sidr) {
        std::erase_if(remote_sidr, [&](const auto& kv) { return kv.second == &id; });
        id.in_sidr = false;
    }
    if (id.local_comm_id) by_comm_id.erase(id.local_comm_id);
    release_port(id);
    std::erase(resolving, id.handle);
    if (id.listener) {
        if (const auto it = ids.find(id.listener); it != ids.end()) std::erase(it->second->requests, id.handle);
    }
    if (const auto ch = channels.find(id.channel); ch != channels.end()) {
        std::erase_if(ch->second.events, [&](const abi::CmEvent& e) { return e.id == id.handle; });
        --ch->second.ids;
    }
    const uint32_t owner = id.owner;
    ids.erase(id.handle);
    if (hooks) hooks->id_released(owner);
}

bool CmService::Impl::channel_full(const Id& id) const {
    const auto it = channels.find(id.channel);
    return it == channels.end() || it->second.events.size() >= abi::kCmEventsQueuedMax;
}

abi::CmEvent CmService::Impl::event_for(const Id& id, EventType type, int32_t status) const {
    abi::CmEvent ev{};
    ev.event = static_cast<uint32_t>(type);
    ev.status = status;
    ev.id = id.handle;
    ev.src = id.src.to_abi();
    ev.dst = id.dst.to_abi();
    return ev;
}

void CmService::Impl::queue_event(Id& id, abi::CmEvent ev) {
    const auto it = channels.find(id.channel);
    if (it == channels.end()) return;
    it->second.events.push_back(ev);
    if (hooks) hooks->event_queued(id.channel);
}

// ---- public entry points ----

CmService::CmService(CmConfig config, Resolver resolver, CmHooks* hooks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(resolver), hooks)) {}

CmService::~CmService() = default;

int CmService::create_channel(uint32_t owner, uint32_t& channel) {
    Channel c;
    c.handle = impl_->next_handle();
    c.owner = owner;
    channel = c.handle;
    impl_->channels.emplace(c.handle, std::move(c));
    return 0;
}

int CmService::destroy_channel(uint32_t owner, uint32_t channel) {
    Channel* c = impl_->find_channel(owner, channel);
    if (!c) return ENOENT;
    if (c->ids) return EBUSY;
    impl_->channels.erase(channel);
    return 0;
}

int CmService::create_id(uint32_t owner, const abi::CmCreateIdRequest& req, uint32_t& id) {
    if (!impl_->find_channel(owner, req.channel)) return ENOENT;
    // rdma_ucm's ucma_get_qp_type: the port space decides, but for RDMA_PS_IB.
    uint32_t qp_type = 0;
    switch (static_cast<wire::RdmaPortSpace>(req.port_space)) {
        case wire::RdmaPortSpace::Tcp:
            qp_type = verbs::kQptRc;
            break;
        case wire::RdmaPortSpace::Udp:
        case wire::RdmaPortSpace::Ipoib:
            qp_type = verbs::kQptUd;
            break;
        case wire::RdmaPortSpace::Ib:
            if (req.qp_type != verbs::kQptRc && req.qp_type != verbs::kQptUc && req.qp_type != verbs::kQptUd)
                return EINVAL;
            qp_type = req.qp_type;
            break;
        default:
            return EINVAL;
    }
    int err = 0;
    Id* made = impl_->make_id(owner, req.channel, static_cast<uint16_t>(req.port_space), qp_type, err);
    if (!made) return err;
    id = made->handle;
    return 0;
}

int CmService::destroy_id(uint32_t owner, uint32_t id, uint64_t now_ns, uint32_t& events_reported) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    events_reported = p->events_reported;
    impl_->destroy_ib(*p, now_ns);
    return 0;
}

int CmService::migrate_id(uint32_t owner, uint32_t id, uint32_t channel, uint32_t& events_reported) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    Channel* to = impl_->find_channel(owner, channel);
    if (!to) return ENOENT;
    events_reported = p->events_reported;
    if (to->handle == p->channel) return 0;
    Channel& from = impl_->channels.at(p->channel);
    // Its queued events and those of the connection requests it still holds (their
    // CONNECT_REQUEST, and what came for them since) move along, in order: the requests move too.
    auto moves = [&](const abi::CmEvent& e) {
        return e.id == id || e.listen_id == id ||
               std::find(p->requests.begin(), p->requests.end(), e.id) != p->requests.end();
    };
    size_t moved = 0;
    for (auto it = from.events.begin(); it != from.events.end();) {
        if (moves(*it)) {
            to->events.push_back(*it);
            it = from.events.erase(it);
            ++moved;
        } else {
            ++it;
        }
    }
    --from.ids;
    ++to->ids;
    p->channel = to->handle;
    for (uint32_t r : p->requests) {
        if (const auto it = impl_->ids.find(r); it != impl_->ids.end()) {
            --from.ids;
            ++to->ids;
            it->second->channel = to->handle;
        }
    }
    if (impl_->hooks)
        for (size_t i = 0; i < moved; ++i) impl_->hooks->event_queued(to->handle);
    return 0;
}

void CmService::destroy_owner(uint32_t owner, uint64_t now_ns) {
    // Untaken connection requests go with their listener.
    std::vector<uint32_t> victims;
    for (const auto& [h, p] : impl_->ids)
        if (p->owner == owner && p->listener == 0 && !p->orphan) victims.push_back(h);
    for (uint32_t h : victims)
        if (const auto it = impl_->ids.find(h); it != impl_->ids.end()) impl_->destroy_ib(*it->second, now_ns);
    std::erase_if(impl_->channels, [&](const auto& kv) { return kv.second.owner == owner; });
}

int CmService::get_event(uint32_t owner, uint32_t channel, abi::CmEvent& out) {
    Channel* c = impl_->find_channel(owner, channel);
    if (!c) return ENOENT;
    if (c->events.empty()) return EAGAIN;
    out = c->events.front();
    c->events.pop_front();
    if (out.event == static_cast<uint32_t>(EventType::ConnectRequest)) {
        // The new id is the application's now; the listener has room for one more request.
        if (const auto it = impl_->ids.find(out.id); it != impl_->ids.end()) it->second->listener = 0;
        if (const auto it = impl_->ids.find(out.listen_id); it != impl_->ids.end()) {
            std::erase(it->second->requests, out.id);
            ++it->second->events_reported;
        }
    } else if (const auto it = impl_->ids.find(out.id); it != impl_->ids.end()) {
        ++it->second->events_reported;
    }
    return 0;
}

const CmCounters& CmService::counters() const noexcept {
    return impl_->counters;
}
size_t CmService::id_count() const noexcept {
    return impl_->ids.size();
}
size_t CmService::channel_count() const noexcept {
    return impl_->channels.size();
}

std::vector<IdInfo> CmService::ids() const {
    std::vector<IdInfo> out;
    out.reserve(impl_->ids.size());
    for (const auto& [h, p] : impl_->ids) {
        IdInfo i;
        i.id = h;
        i.owner = p->owner;
        i.channel = p->channel;
        i.port_space = p->port_space;
        i.qp_type = p->qp_type;
        i.state = p->state;
        i.ib_state = p->ib;
        i.src = p->src.to_abi();
        i.dst = p->dst.to_abi();
        i.local_comm_id = p->local_comm_id;
        i.remote_comm_id = p->remote_comm_id;
        i.qpn = p->qp_num;
        i.remote_qpn = p->remote_qpn;
        out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [](const IdInfo& a, const IdInfo& b) { return a.id < b.id; });
    return out;
}

int CmService::bind_addr(uint32_t owner, uint32_t id, const abi::CmAddress& addr) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    Endpoint e;
    if (addr.family == 0) return EAFNOSUPPORT;
    if (const int err = Endpoint::from_abi(addr, e)) return err;
    return impl_->bind(*p, e);
}

int CmService::query(uint32_t owner, uint32_t id, abi::CmQueryReply& out) const {
    const Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    out = {};
    out.src = p->src.to_abi();
    out.dst = p->dst.to_abi();
    if (p->src.family) std::memcpy(out.sgid, p->src.addr.raw.data(), 16);
    if (p->dst.family) std::memcpy(out.dgid, p->dst.addr.raw.data(), 16);
    if (p->have_dmac) std::memcpy(out.dmac, p->dmac.data(), 6);
    out.pkey = 0xFFFF;
    out.port_num = 1;
    out.sgid_index = p->sgid_index;
    out.path_count = p->path_valid ? 1 : 0;
    if (p->path_valid) {
        std::memcpy(out.sgid, p->path.sgid.raw.data(), 16);
        std::memcpy(out.dgid, p->path.dgid.raw.data(), 16);
        out.hop_limit = p->path.hop_limit;
        out.traffic_class = p->path.traffic_class;
        out.flow_label = p->path.flow_label;
        out.path_mtu = p->path.mtu;
        out.sl = p->path.sl;
        out.packet_life_time = p->path.packet_life_time;
        out.sgid_index = p->path.sgid_index;
    }
    out.state = static_cast<uint8_t>(p->state);
    return 0;
}

int CmService::init_qp_attr(uint32_t owner, uint32_t id, uint32_t qp_state, abi::CmInitQpAttrReply& out) {
    Id* p = impl_->find(owner, id);
    if (!p) return ENOENT;
    return impl_->init_qp_attr(*p, qp_state, out);
}

bool CmService::has_outbound() const noexcept {
    return !impl_->outbound.empty();
}
const OutboundMad& CmService::front_outbound() const {
    return impl_->outbound.front();
}
void CmService::pop_outbound() {
    impl_->outbound.pop_front();
}

std::optional<uint64_t> CmService::next_deadline() const {
    return impl_->timers.earliest();
}

}  // namespace rnic::cm
