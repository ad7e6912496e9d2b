// What a PSN time-sequence plot shows, taken from sound RoCEv2 frames: per flow (source and
// destination address, destination QP), each packet as an event at (time, PSN): a request or a
// retransmission of one (a request PSN the flow already sent), an ACK, a NAK (by code), an RNR
// NAK, a READ response or a repeated one, a CNP. Responses travel in the opposite direction to the
// requests they answer; panels() pairs each response flow with the request flow it answers.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rnic/wire/packet.hpp"

namespace rnic::tools {

enum class PsnEventKind : uint8_t {
    Request,
    Retransmission,      // a request PSN this flow sent before
    Ack,
    Nak,                 // nak_code: 0 PSN sequence error, 1 invalid request, 2 remote access, ...
    RnrNak,              // rnr_timer: the AETH's timer code
    ReadResponse,
    ReadResponseAgain,   // a READ response PSN this flow sent before
    Cnp,
};

struct FlowKey {
    std::string src;
    std::string dst;
    uint32_t dest_qp = 0;
    auto operator<=>(const FlowKey&) const = default;
    std::string label() const;  // "10.0.0.1 -> 10.0.0.2 QP 0x000011"
};

struct PsnEvent {
    uint64_t frame = 0;
    uint64_t time_ns = 0;
    uint32_t psn = 0;
    PsnEventKind kind = PsnEventKind::Request;
    uint8_t code = 0;  // NAK code or RNR timer code
    std::string_view opcode;
};

struct PsnFlow {
    FlowKey key;
    std::vector<PsnEvent> events;
    std::set<uint32_t> request_psns;
    std::set<uint32_t> read_response_psns;
    bool has_requests() const { return !request_psns.empty(); }
};

// One plot: a flow's requests with the responses of the reverse flow that answers them (either
// may be absent), PSNs drawn relative to `base_psn`.
struct PsnPanel {
    std::optional<FlowKey> requests;
    std::optional<FlowKey> responses;
    uint32_t base_psn = 0;
};

struct ThroughputSample {
    uint64_t time_ns;
    uint32_t bytes;  // the captured frame's length
};

class PsnTracker {
public:
    void add(uint64_t frame_index, uint64_t time_ns, const wire::RoceFrame& frame, uint32_t frame_bytes);

    const std::map<FlowKey, PsnFlow>& flows() const { return flows_; }
    // Direction "src -> dst" -> its frames, for the throughput graph.
    const std::map<std::pair<std::string, std::string>, std::vector<ThroughputSample>>& directions() const {
        return directions_;
    }
    std::vector<PsnPanel> panels() const;
    uint64_t first_ns() const { return first_ns_; }
    uint64_t last_ns() const { return last_ns_; }
    bool empty() const { return flows_.empty(); }

private:
    std::map<FlowKey, PsnFlow> flows_;
    std::map<std::pair<std::string, std::string>, std::vector<ThroughputSample>> directions_;
    uint64_t first_ns_ = 0;
    uint64_t last_ns_ = 0;
    bool any_ = false;
};

// PSN `psn` relative to `base` in 24-bit arithmetic, as a signed distance (-2^23 .. 2^23-1).
int32_t psn_offset(uint32_t psn, uint32_t base);

}  // namespace rnic::tools
