// rnicd's connection manager for one port: what Linux splits between rdma_ucm (ids and event
// channels per open file), rdma_cm (port spaces, addresses, routes, the rdma_cm IP header) and
// ib_cm (the IB CM state machine on QP 1, retransmissions, timewait), for RoCEv2. I/O-free, like
// the transport engine: MADs come in through receive() and go out through the outbound queue (the
// daemon builds their frames and resolves their MACs), time is the caller's, neighbours come from
// the injected Resolver. docs/rdma_cm.md has the state machines, the timers and where this
// differs from Linux.
//
// Every operation names the owner (the session) of the id or channel it acts on: a handle of
// another owner is ENOENT, as an id of another open file is to rdma_ucm. Operations return 0 or a
// positive errno, the one Linux's rdma_ucm returns for the same call; results that come later
// are events on the id's channel (abi::CmEvent, oldest first through get_event).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rnic/cm/cm_types.hpp"
#include "rnic/host/abi/cm.hpp"

namespace rnic::cm {

// One id as rnicctl lists it.
struct IdInfo {
    uint32_t id = 0;
    uint32_t owner = 0;
    uint32_t channel = 0;
    uint16_t port_space = 0;
    uint32_t qp_type = 0;
    RdmaState state = RdmaState::Idle;
    IbState ib_state = IbState::Idle;
    host::abi::CmAddress src{};
    host::abi::CmAddress dst{};
    uint32_t local_comm_id = 0;
    uint32_t remote_comm_id = 0;
    uint32_t qpn = 0;
    uint32_t remote_qpn = 0;
};

class CmService {
public:
    // `hooks` may be null (no wake-ups, no limits); it must outlive the service.
    CmService(CmConfig config, Resolver resolver, CmHooks* hooks = nullptr);
    ~CmService();
    CmService(const CmService&) = delete;
    CmService& operator=(const CmService&) = delete;

    // ---- channels and ids (rdma_ucm) ----
    int create_channel(uint32_t owner, uint32_t& channel);
    int destroy_channel(uint32_t owner, uint32_t channel);  // EBUSY while ids report to it
    int create_id(uint32_t owner, const host::abi::CmCreateIdRequest& req, uint32_t& id);
    // Sends what Linux sends for an id destroyed in its state (REJ, DREQ, DREP, SIDR_REP), drops
    // its queued events, and for a listener destroys the connection requests not yet taken.
    int destroy_id(uint32_t owner, uint32_t id, uint64_t now_ns, uint32_t& events_reported);
    int migrate_id(uint32_t owner, uint32_t id, uint32_t channel, uint32_t& events_reported);
    // Every id and channel of `owner` (its session ended), as rdma_ucm's close of the file.
    void destroy_owner(uint32_t owner, uint64_t now_ns);

    // ---- rdma_cm ----
    int bind_addr(uint32_t owner, uint32_t id, const host::abi::CmAddress& addr);
    int resolve_addr(uint32_t owner, const host::abi::CmResolveAddrRequest& req, uint64_t now_ns);
    int resolve_route(uint32_t owner, uint32_t id, uint32_t timeout_ms, uint64_t now_ns);
    int query(uint32_t owner, uint32_t id, host::abi::CmQueryReply& out) const;
    int listen(uint32_t owner, uint32_t id, uint32_t backlog);
    int connect(uint32_t owner, uint32_t id, const host::abi::CmConnParam& param, uint64_t now_ns);
    // The passive side's REP (or SIDR_REP); on the active side after CONNECT_RESPONSE, the RTU
    // (param ignored), as rdma_accept(id, NULL) does there.
    int accept(uint32_t owner, uint32_t id, const host::abi::CmConnParam& param, uint64_t now_ns);
    int establish(uint32_t owner, uint32_t id, uint64_t now_ns);  // rdma_establish: the RTU
    int reject(uint32_t owner, uint32_t id, uint32_t reason, std::span<const uint8_t> private_data, uint64_t now_ns);
    int disconnect(uint32_t owner, uint32_t id, uint64_t now_ns);
    int init_qp_attr(uint32_t owner, uint32_t id, uint32_t qp_state, host::abi::CmInitQpAttrReply& out);
    int notify(uint32_t owner, uint32_t id, uint32_t event, uint64_t now_ns);
    int set_option(uint32_t owner, const host::abi::CmSetOptionRequest& req);
    // The oldest event of `channel`; EAGAIN when none is queued.
    int get_event(uint32_t owner, uint32_t channel, host::abi::CmEvent& out);

    // ---- the wire ----
    // A MAD that came to QP 1; `from` is where it came from (remote_*: the sender; local_gid: our
    // address it was sent to). Anything is accepted: what cannot be used is counted and dropped.
    void receive(const MadRoute& from, std::span<const uint8_t> mad, uint64_t now_ns);
    // Runs due timers (retransmissions, timewait, address resolution) and pending neighbour
    // lookups.
    void advance(uint64_t now_ns);
    std::optional<uint64_t> next_deadline() const;
    // MADs for the port, oldest first.
    bool has_outbound() const noexcept;
    const OutboundMad& front_outbound() const;
    void pop_outbound();

    // ---- for rnicctl and Stats ----
    const CmCounters& counters() const noexcept;
    std::vector<IdInfo> ids() const;
    size_t id_count() const noexcept;
    size_t channel_count() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace rnic::cm
