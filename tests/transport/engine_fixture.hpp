// Two (or more) transport engines on a simulated link, driven in virtual time, plus helpers to
// bring up PDs, CQs, MRs and connected QPs the way an application would through verbs.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rnic/sim/simulator.hpp"
#include "rnic/transport/engine.hpp"
#include "vector_sink.hpp"

namespace rnic::test {

using namespace rnic::transport;

class EngineNode : public sim::Node {
public:
    explicit EngineNode(EngineConfig cfg) : engine(std::move(cfg)) {}
    void receive(std::span<const uint8_t> frame, sim::TimeNs now) override { engine.receive(frame, now); }
    void transmit(std::vector<std::vector<uint8_t>>& out, sim::TimeNs now) override {
        VectorSink sink(out);
        engine.transmit(sink, now, 256);
    }
    std::optional<sim::TimeNs> next_deadline() const override { return engine.next_deadline(); }
    void advance(sim::TimeNs now) override { engine.advance(now); }

    Engine engine;
};

// Application-side view of one endpoint: its PD, CQs and a buffer registered as one MR.
struct Endpoint {
    EngineNode* node = nullptr;
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    std::vector<uint8_t> buf;
    MrInfo mr;
    uint32_t qpn = 0;
    uint32_t gid_index = 0;

    Engine& e() { return node->engine; }
    uint64_t addr(size_t offset = 0) { return reinterpret_cast<uint64_t>(buf.data()) + offset; }
};

struct QpOptions {
    QpType type = QpType::Rc;
    Mtu mtu = Mtu::Mtu1024;
    uint32_t sq_psn = 1000;
    uint32_t rq_psn = 5000;  // the peer's sq_psn must match our rq_psn: set both sides alike
    uint8_t timeout = 10;    // 4.096 us << 10 = 4.2 ms
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 1;  // 10 us
    uint8_t max_rd_atomic = 16;
    uint32_t access = 0xF;      // local write, remote write/read/atomic
    uint32_t max_send_wr = 4096;
    uint32_t max_recv_wr = 4096;
    std::optional<uint32_t> srq_a;
    std::optional<uint32_t> srq_b;
    uint32_t qkey = 0x11111111;
    uint8_t sgid_index = 0;  // 0: IPv4-mapped; 1: fe80::host, 2: fd77::host (RoCEv2 over IPv6)
};

class TwoNodes {
public:
    explicit TwoNodes(uint64_t seed, sim::LinkConfig link = {}, EngineConfig base = {});

    // PDs, CQs and `buffer_bytes` of registered memory on both sides.
    void setup(size_t buffer_bytes, uint32_t access = 0xF);
    // A connected RC/UC pair (or two UD QPs) brought to RTS.
    void connect(const QpOptions& o = {});

    // Runs the simulation until `done` or the virtual-time budget is spent.
    bool run_until(const std::function<bool()>& done, uint64_t max_ns = 5'000'000'000ull);
    // Polls a CQ until `count` completions arrived (or time runs out).
    std::vector<WorkCompletion> wait_cq(Endpoint& ep, uint32_t cq, size_t count, uint64_t max_ns = 5'000'000'000ull);

    sim::Simulator sim;
    std::unique_ptr<EngineNode> node_a;
    std::unique_ptr<EngineNode> node_b;
    sim::NodeId id_a = 0;
    sim::NodeId id_b = 0;
    Endpoint a;
    Endpoint b;
    uint32_t ah_a_to_b = 0;  // UD address handles
    uint32_t ah_b_to_a = 0;
};

EngineConfig node_config(uint8_t host, EngineConfig base = {});
void bring_up(Engine& e, uint32_t qpn, const QpOptions& o, uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn,
              const AddressVector& av);

SendWr make_wr(WrOpcode op, uint64_t wr_id, std::vector<Sge> sges, uint32_t flags = SendFlag::Signaled);
std::string describe(const WorkCompletion& wc);
void fill_pattern(std::vector<uint8_t>& v, uint32_t seed, size_t offset = 0, size_t length = SIZE_MAX);

}  // namespace rnic::test
