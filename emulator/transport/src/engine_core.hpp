// The engine's state and the services its units share. `Engine` (engine.hpp) is the public face;
// the requester, responder and completer work on this core through the members and helpers below
// instead of reaching into the facade. Objects live in slot tables indexed by handle, QPs with
// transmit work are on one ready list, timers in one heap, and CQs with new completions on one
// list, so no per-turn or per-packet step walks every object.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "completer.hpp"
#include "completion_queue.hpp"
#include "queue_pair.hpp"
#include "requester.hpp"
#include "responder.hpp"
#include "rnic/common/ring_buffer.hpp"
#include "rnic/memory/memory_table.hpp"
#include "rnic/transport/engine.hpp"
#include "rnic/wire/packet.hpp"
#include "slot_table.hpp"
#include "timer_queue.hpp"

namespace rnic::transport {

struct ProtectionDomain {
    uint32_t users = 0;  // QPs, SRQs, AHs and MRs created in it
};

struct SharedReceiveQueue {
    uint32_t pd = 0;
    SrqAttributes attr;
    RecvQueue wqes;
    bool limit_armed = false;
    uint32_t users = 0;  // QPs attached
};

struct AddressHandle {
    uint32_t pd = 0;
    AddressVector av;
};

class EngineCore {
public:
    explicit EngineCore(EngineConfig config);

    // ---- objects ----
    QueuePair* find_qp(uint32_t qpn) const noexcept { return qps.find(qpn); }
    void release_qp_references(const QueuePair& qp) noexcept;
    // RESET: the queues are emptied without completions, the context starts over (IBA 10.3.1).
    void reset_qp(QueuePair& qp);

    // ---- scheduling ----
    void mark_ready(QueuePair& qp);
    void arm(Timer& t, uint64_t deadline) { timers.arm(t, deadline); }
    void cancel(Timer& t) noexcept { timers.cancel(t); }
    void charge(uint64_t ns) noexcept;
    void touch_qpc(uint32_t qpn) noexcept;

    // ---- completions, events, errors ----
    void complete(QueuePair& qp, uint32_t cq, const WorkCompletion& wc);
    void raise_event(EventType type, uint32_t object);
    void move_to_error(QueuePair& qp, bool keep_responses = false);
    void move_to_send_queue_error(QueuePair& qp);
    void flush_queues(QueuePair& qp, bool keep_responses = false);
    void flush_send_queue(QueuePair& qp);

    // ---- receive WQEs ----
    // Claims the receive WQE the next message lands in (false: none posted, RNR).
    bool claim_recv(QueuePair& qp);
    RecvView claimed_recv(const QueuePair& qp) const noexcept;
    // The message is complete (or failed): the WQE is used up.
    void consume_recv(QueuePair& qp);
    // The message was dropped: the WQE serves the next one.
    void give_back_recv(QueuePair& qp);

    // ---- congestion control (congestion_path.cpp, docs/congestion.md) ----
    struct PendingCnp {
        uint32_t qpn = 0;       // ours, which received the CE-marked frame
        uint32_t dest_qpn = 0;  // the sender's QP, which the CNP slows down
        wire::MacAddr dmac{};
        wire::Gid dgid;
        uint8_t sgid_index = 0;
    };
    // A frame of `qp` arrived CE-marked: the notification point may queue a CNP to its sender.
    void on_ce_marked(QueuePair& qp, const wire::RoceFrame& frame);
    // A CNP arrived: the reaction point of the QP it names cuts that QP's rate.
    void on_cnp(const wire::RoceFrame& frame);
    size_t emit_cnps(FrameSink& sink, size_t max_frames);
    // True when a rate-limited QP may not send its next request yet (its pace timer is armed).
    bool hold_for_pacing(QueuePair& qp);
    void after_paced_send(QueuePair& qp, uint64_t frame_bytes);
    void on_congestion_timer(QueuePair& qp, TimerKind kind);
    // The knobs changed (rnicctl cc set): every QP's reaction point takes them, timers follow.
    void on_congestion_params_changed();
    void cancel_congestion_timers(QueuePair& qp) noexcept;
    void init_congestion_timers(QueuePair& qp) noexcept;
    RingBuffer<PendingCnp> pending_cnps;

    // ---- PFC / PAUSE received (pause_path.cpp, docs/congestion.md) ----
    // The priority a QP's next frames carry: its path's DSCP (UD: the next WR's address).
    uint8_t qp_priority(const QueuePair& qp) const noexcept;
    bool priority_paused(uint8_t priority) const noexcept { return paused_until[priority & 7] > now; }
    bool any_paused() const noexcept { return paused_mask_until > now; }
    // True when `qp` may not transmit now: it waits, off the ready list, for its priority.
    bool hold_for_pause(QueuePair& qp);
    // Puts the QPs whose priority resumed back on the ready list.
    void release_paused();
    bool cnps_paused() const noexcept;
    // When the earliest pause holding something ends (nullopt: nothing held).
    std::optional<uint64_t> pause_deadline() const noexcept;
    std::array<uint64_t, 8> paused_until{};
    uint64_t paused_mask_until = 0;  // the latest of paused_until: a cheap "none paused" test
    std::vector<uint32_t> pause_parked;  // QPNs waiting for their priority

    // ---- on-demand accesses that came back Pending (odp_wait.cpp) ----
    // An access of `side` is Pending: true while it is within the time bound (the caller parks
    // or NAKs and tries again), false once the bound has passed (the caller fails it).
    bool odp_wait(QueuePair& qp, OdpSide side);
    // The access of `side` went through: it no longer waits. One test of a byte when none waits.
    void odp_done(QueuePair& qp, OdpSide side) {
        if (qp.odp.waiting != 0 && qp.odp.waits(side)) odp_clear(qp, side);
    }
    void odp_clear(QueuePair& qp, OdpSide side);
    void odp_clear_all(QueuePair& qp) noexcept;
    // Off the ready list until the backend has news (Engine::odp_resume) or the bound's timer.
    void odp_park(QueuePair& qp);
    void odp_unpark(QueuePair& qp);
    void odp_arm_bound(QueuePair& qp);
    void on_odp_timer(QueuePair& qp);
    void odp_timed_out(QueuePair& qp, OdpSide side);
    std::vector<uint32_t> odp_parked;     // QPNs, each at most once (QueuePair::odp.parked)
    std::vector<uint32_t> odp_timed_out_qps;  // for Engine::take_odp_timeouts

    EngineConfig config;
    std::unique_ptr<mem::MemoryTable> memory;
    std::unique_ptr<mem::CacheModel> qpc_cache;

    SlotTable<ProtectionDomain> pds;
    SlotTable<CompletionQueue> cqs;
    SlotTable<SharedReceiveQueue> srqs;
    SlotTable<AddressHandle> ahs;
    SlotTable<QueuePair> qps;

    TimerQueue timers;
    RingBuffer<uint32_t> ready;  // QPNs with frames to send, round robin
    RingBuffer<AsyncEvent> events;
    std::vector<uint32_t> updated_cqs;
    uint64_t now = 0;
    uint64_t busy_until = 0;  // processing time charged (cache misses) delays transmission
    bool tx_full = false;     // the sink ran out of room during this transmit
    DeviceCounters counters;
    uint64_t room_seq = 0;  // Engine::room_seq()

    Requester requester{*this};
    Responder responder{*this};
    Completer completer{*this};

private:
    void after_srq_consume(uint32_t srq_handle, SharedReceiveQueue& srq);
};

}  // namespace rnic::transport
