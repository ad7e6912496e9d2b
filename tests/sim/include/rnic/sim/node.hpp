// What the simulator needs from an endpoint. The transport engine's adapter implements it;
// so do the toy nodes of the simulator's own tests.
//
// Contract (the simulator relies on it for termination and determinism):
// - The simulator calls transmit() on every node after every batch of events, so a node
//   may hand out frames whenever it likes; it must not block or keep state in the wall clock.
// - next_deadline() is the earliest instant at which the node wants advance() called. A
//   deadline at or before now is fired at the current time. After advance(now) the node should
//   no longer report a deadline <= now; if it does, every call counts as an event, so a stuck
//   timer ends the run with RunOutcome::kEventLimit instead of hanging.
// - Time passed in never decreases.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rnic/sim/time.hpp"

namespace rnic::sim {

// A node's index in its Simulator, in the order the nodes were added.
using NodeId = uint32_t;

class Node {
public:
    virtual ~Node() = default;

    // A frame has arrived on the node's port.
    virtual void receive(std::span<const uint8_t> frame, TimeNs now) = 0;
    // Append every frame the node wants to send at `now` to `out`.
    virtual void transmit(std::vector<std::vector<uint8_t>>& out, TimeNs now) = 0;
    // Earliest timer, if any.
    virtual std::optional<TimeNs> next_deadline() const = 0;
    // Fire the timers due at or before `now`.
    virtual void advance(TimeNs now) = 0;
};

}  // namespace rnic::sim
