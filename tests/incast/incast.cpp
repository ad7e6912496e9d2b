#include "incast.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <memory>
#include <numeric>
#include <ostream>
#include <set>
#include <stdexcept>

#include "rnic/sim/simulator.hpp"
#include "rnic/transport/engine.hpp"
#include "vector_sink.hpp"

namespace rnic::incast {
namespace {

using namespace rnic::transport;

constexpr sim::MacAddr kSwitchMac{0x02, 0, 0, 0, 0, 0xfe};
constexpr uint8_t kReceiverHost = 0x80;
constexpr size_t kFrameBytes4096 = 14 + 20 + 8 + 12 + 4096 + 4;  // Eth, IPv4, UDP, BTH, payload, ICRC

class Host : public sim::Node {
public:
    explicit Host(EngineConfig cfg) : engine(std::move(cfg)) {}
    void receive(std::span<const uint8_t> frame, TimeNs now) override { engine.receive(frame, now); }
    void transmit(std::vector<std::vector<uint8_t>>& out, TimeNs now) override {
        test::VectorSink sink(out);
        engine.transmit(sink, now, 64);
    }
    std::optional<TimeNs> next_deadline() const override { return engine.next_deadline(); }
    void advance(TimeNs now) override { engine.advance(now); }

    Engine engine;
    uint32_t pd = 0;
    uint32_t cq = 0;
    std::vector<uint8_t> buf;
    MrInfo mr;
};

EngineConfig host_config(uint8_t host, const Scenario& s, bool sender) {
    EngineConfig c;
    c.mac = {0x02, 0, 0, 0, 0, host};
    c.gids = {wire::Gid::from_ipv4(0x0A000000u | host)};
    c.port_rate_mbps = static_cast<uint32_t>(s.rate_bps / 1'000'000);
    c.congestion = s.params;
    if (!s.dcqcn) c.congestion.rp_enable_prio_mask = 0;  // no ECT: nothing to mark, no CNPs
    if (sender) {
        // The sender's port: one full-size frame per serialization time at the line rate, so the
        // NIC does not pile frames up in front of its own cable.
        c.tuning.tx_burst = 1;
        c.tuning.per_packet_cost_ns = (kFrameBytes4096 * 8 * sim::kSecond + s.rate_bps - 1) / s.rate_bps;
    }
    return c;
}

void check(int rc, const char* what) {
    if (rc != 0) throw std::runtime_error(std::string("incast: ") + what + " failed: " + std::to_string(rc));
}

template <typename T>
T need(const transport::Result<T>& r, const char* what) {
    if (!r) throw std::runtime_error(std::string("incast: ") + what + " failed");
    return *r;
}

void setup_host(Host& h, size_t bytes) {
    h.pd = need(h.engine.alloc_pd(), "alloc_pd");
    h.cq = need(h.engine.create_cq(65536), "create_cq");
    h.buf.assign(bytes, 0);
    const auto addr = reinterpret_cast<uint64_t>(h.buf.data());
    h.mr = need(h.engine.reg_mr(h.pd, h.buf.data(), h.buf.size(), addr, 0xF), "reg_mr");
}

uint32_t make_qp(Host& h) {
    QpInitAttr init;
    init.qp_type = QpType::Rc;
    init.pd = h.pd;
    init.send_cq = h.cq;
    init.recv_cq = h.cq;
    init.cap = {1024, 16, 1, 1, 0};
    return need(h.engine.create_qp(init), "create_qp").qpn;
}

void to_rts(Engine& e, uint32_t qpn, uint32_t dest_qpn, uint32_t sq_psn, uint32_t rq_psn, const AddressVector& av) {
    QpAttributes a;
    a.qp_state = QpState::Init;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = 0xF;
    check(e.modify_qp(qpn, a, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags), "INIT");
    a.qp_state = QpState::Rtr;
    a.path_mtu = Mtu::Mtu4096;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.ah_attr = av;
    check(e.modify_qp(qpn, a,
                      QpAttr::State | QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn |
                          QpAttr::MaxDestRdAtomic | QpAttr::MinRnrTimer),
          "RTR");
    a.qp_state = QpState::Rts;
    a.sq_psn = sq_psn;
    a.timeout = 12;  // 16.8 ms: a queue of a few MB never looks like a loss
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    check(e.modify_qp(qpn, a,
                      QpAttr::State | QpAttr::SqPsn | QpAttr::Timeout | QpAttr::RetryCnt | QpAttr::RnrRetry |
                          QpAttr::MaxQpRdAtomic),
          "RTS");
}

void fill_pattern(std::vector<uint8_t>& v, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (uint8_t& b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x);
    }
}

double jain_index(const std::vector<double>& x) {
    double sum = 0, squares = 0;
    for (double v : x) {
        sum += v;
        squares += v * v;
    }
    return squares == 0 ? 0 : sum * sum / (static_cast<double>(x.size()) * squares);
}

struct FlowState {
    std::unique_ptr<Host> host;
    sim::NodeId node = 0;
    uint32_t qpn = 0;
    uint32_t peer_qpn = 0;
    uint64_t posted = 0;
    uint64_t completed = 0;
    bool failed = false;
};

// Phases: the stretches between consecutive starts and stops.
std::vector<Phase> make_phases(const Scenario& s) {
    std::set<TimeNs> cuts{0, s.duration_ns};
    for (const Flow& f : s.flows) {
        if (f.start_ns < s.duration_ns) cuts.insert(f.start_ns);
        if (f.stop_ns < s.duration_ns) cuts.insert(f.stop_ns);
    }
    std::vector<Phase> phases;
    for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
        Phase p;
        p.begin_ns = *it;
        p.end_ns = *std::next(it);
        for (unsigned i = 0; i < s.flows.size(); ++i)
            if (s.flows[i].start_ns <= p.begin_ns && p.begin_ns < s.flows[i].stop_ns) p.active.push_back(i);
        if (!p.active.empty()) p.fair_gbps = static_cast<double>(s.bottleneck.rate_bps) / 1e9 / static_cast<double>(p.active.size());
        phases.push_back(std::move(p));
    }
    return phases;
}

// From the phase's start until every active flow's windowed rate stays within tolerance of
// the fair share up to the phase's end; nullopt if that never happens.
std::optional<TimeNs> convergence(const Scenario& s, const std::vector<Sample>& samples, const Phase& p, double tolerance) {
    std::optional<size_t> last_bad, last_in_phase;
    for (size_t i = 0; i < samples.size(); ++i) {
        const TimeNs t = samples[i].time_ns;
        if (t <= p.begin_ns || t > p.end_ns) continue;
        last_in_phase = i;
        // A window reaching back before the phase mixes two phases: not yet judged.
        bool ok = t >= p.begin_ns + s.window_ns && !p.active.empty();
        for (unsigned f : p.active)
            if (std::abs(samples[i].gbps[f] - p.fair_gbps) > tolerance * p.fair_gbps) ok = false;
        if (!ok) last_bad = i;
    }
    if (!last_in_phase) return std::nullopt;
    if (!last_bad) return 0;
    if (*last_bad >= *last_in_phase) return std::nullopt;
    return samples[*last_bad + 1].time_ns - p.begin_ns;
}

void measure_phase(const Scenario& s, const std::vector<Sample>& samples, const std::vector<std::vector<uint64_t>>& bytes,
                   Phase& p) {
    // Samples i with time in (begin, end]; bytes[i][flow] are cumulative at samples[i].
    p.convergence_ns = convergence(s, samples, p, s.tolerance);
    p.convergence_loose_ns = convergence(s, samples, p, 2 * s.tolerance);
    const TimeNs mid = p.begin_ns + (p.end_ns - p.begin_ns) / 2;
    std::optional<size_t> steady_first, steady_last;
    for (size_t i = 0; i < samples.size(); ++i) {
        const TimeNs t = samples[i].time_ns;
        if (t < mid || t > p.end_ns) continue;
        if (!steady_first) steady_first = i;
        steady_last = i;
    }
    if (!steady_first || *steady_first == 0 || *steady_last <= *steady_first) return;
    // Steady state: from the sample before `mid` to the phase's last sample.
    const size_t a = *steady_first - 1, b = *steady_last;
    const double seconds = static_cast<double>(samples[b].time_ns - samples[a].time_ns) / 1e9;
    std::vector<double> means;
    uint64_t total = 0;
    for (size_t f = 0; f < s.flows.size(); ++f) {
        const uint64_t d = bytes[b][f] - bytes[a][f];
        total += d;
        if (std::find(p.active.begin(), p.active.end(), f) != p.active.end())
            means.push_back(static_cast<double>(d) * 8 / seconds / 1e9);
    }
    p.jain = jain_index(means);
    p.utilisation = static_cast<double>(total) * 8 / seconds / static_cast<double>(s.bottleneck.rate_bps);
    double q = 0;
    for (size_t i = a + 1; i <= b; ++i) {
        q += static_cast<double>(samples[i].queue_bytes);
        p.max_queue_bytes = std::max(p.max_queue_bytes, samples[i].queue_bytes);
    }
    p.mean_queue_bytes = q / static_cast<double>(b - a);
}

}  // namespace

const char* to_string(ParamSet set) noexcept {
    return set == ParamSet::kPaper ? "paper" : "nvidia";
}

cc::DcqcnParams dcqcn_params(ParamSet set) {
    cc::DcqcnParams p;
    if (set == ParamSet::kPaper) {
        p.rp_dce_tcp_rtt = 55;  // K
        p.rp_dce_tcp_g = 1020;  // g = 1/256
        p.rp_rate_reduce_monitor_period = 50;
        p.np_min_time_between_cnps = 50;  // N
        p.rp_time_reset = 55;             // T
        p.rp_byte_reset = 10'000'000;     // B
        p.rp_threshold = 5;               // F
        p.rp_ai_rate = 40;                // R_AI
        p.rp_clamp_tgt_rate = 1;          // R_T = R_C on every cut
    }
    return p;
}

Scenario incast_scenario(unsigned flows, ParamSet set) {
    Scenario s;
    s.name = std::to_string(flows) + "-flow incast (" + to_string(set) + ")";
    s.param_set = set;
    s.params = dcqcn_params(set);
    s.duration_ns = 40 * sim::kMillisecond;
    s.flows.assign(flows, Flow{0, s.duration_ns});
    // The paper's RED: Kmin 5 KB, Kmax 200 KB, Pmax 1%, at 40 Gb/s; a 12 MB port buffer (a Trident II's whole buffer: no PFC here, so it stands in for a lossless fabric).
    s.bottleneck.rate_bps = s.rate_bps;
    s.bottleneck.kmin_bytes = 5'000;
    s.bottleneck.kmax_bytes = 200'000;
    s.bottleneck.pmax = 0.01;
    s.bottleneck.buffer_bytes = 12'000'000;
    s.bottleneck.mark_point = sim::EcnMarkPoint::kDequeue;
    return s;
}

Scenario arrive_leave_scenario(ParamSet set) {
    Scenario s = incast_scenario(4, set);
    s.name = std::string("4 flows arriving and leaving (") + to_string(set) + ")";
    constexpr TimeNs kStep = 15 * sim::kMillisecond;
    s.duration_ns = 7 * kStep;
    for (unsigned i = 0; i < 4; ++i) s.flows[i] = Flow{i * kStep, (7 - i) * kStep};
    return s;
}

Result run(const Scenario& s) {
    if (s.flows.empty() || s.flows.size() > 64) throw std::invalid_argument("incast: 1 to 64 flows");
    if (s.sample_ns == 0 || s.window_ns < s.sample_ns || s.message_bytes == 0 || s.outstanding == 0)
        throw std::invalid_argument("incast: bad sampling or workload");
    const size_t n = s.flows.size();
    const size_t slice = size_t{s.message_bytes} * s.outstanding;

    sim::Simulator simulator(s.seed);
    sim::SwitchNode sw(s.seed ^ 0x5bd1e995u);
    const sim::NodeId switch_id = simulator.add_node(sw, kSwitchMac);
    Host receiver(host_config(kReceiverHost, s, false));
    const sim::NodeId receiver_id = simulator.add_node(receiver, receiver.engine.config().mac);
    std::vector<FlowState> flows(n);
    for (size_t i = 0; i < n; ++i) {
        flows[i].host = std::make_unique<Host>(host_config(static_cast<uint8_t>(i + 1), s, true));
        flows[i].node = simulator.add_node(*flows[i].host, flows[i].host->engine.config().mac);
    }
    // Cables: the rate is the host's own port; the switch's side adds only latency, its egress
    // ports serialize.
    sim::LinkConfig up, down;
    up.latency_ns = down.latency_ns = s.cable_latency_ns;
    up.bandwidth_bps = s.rate_bps;
    std::vector<sim::NodeId> hosts{receiver_id};
    for (const FlowState& f : flows) hosts.push_back(f.node);
    for (sim::NodeId h : hosts) {
        simulator.connect(h, switch_id, up, down);
        simulator.set_uplink(h, switch_id);
    }
    sw.add_port(receiver.engine.config().mac, s.bottleneck);
    sim::EgressPortConfig to_sender;  // the way back carries ACKs and CNPs: never congested
    to_sender.rate_bps = s.rate_bps;
    for (const FlowState& f : flows) sw.add_port(f.host->engine.config().mac, to_sender);

    setup_host(receiver, slice * n);
    for (size_t i = 0; i < n; ++i) {
        Host& h = *flows[i].host;
        setup_host(h, slice);
        fill_pattern(h.buf, static_cast<uint32_t>(i + 1));
        flows[i].qpn = make_qp(h);
        flows[i].peer_qpn = make_qp(receiver);
        AddressVector to_receiver, to_sender_av;
        to_receiver.dgid = receiver.engine.config().gids[0];
        to_receiver.dmac = receiver.engine.config().mac;
        to_sender_av.dgid = h.engine.config().gids[0];
        to_sender_av.dmac = h.engine.config().mac;
        to_rts(h.engine, flows[i].qpn, flows[i].peer_qpn, 100, 200, to_receiver);
        to_rts(receiver.engine, flows[i].peer_qpn, flows[i].qpn, 200, 100, to_sender_av);
    }

    // Keeps `outstanding` WRITEs in flight per active flow; slot k of the sender's buffer goes to
    // slot k of its slice of the receiver's, so every byte that arrives can be checked.
    std::vector<WorkCompletion> wcs(64);
    auto service = [&](TimeNs now) {
        for (size_t i = 0; i < n; ++i) {
            FlowState& f = flows[i];
            Host& h = *f.host;
            int got;
            while ((got = h.engine.poll_cq(h.cq, wcs)) > 0)
                for (int k = 0; k < got; ++k) {
                    ++f.completed;
                    if (wcs[static_cast<size_t>(k)].status != WcStatus::Success) f.failed = true;
                }
            if (f.failed || now < s.flows[i].start_ns || now >= s.flows[i].stop_ns) continue;
            while (f.posted - f.completed < s.outstanding) {
                const size_t offset = (f.posted % s.outstanding) * s.message_bytes;
                SendWr wr;
                wr.opcode = WrOpcode::RdmaWrite;
                wr.wr_id = f.posted;
                wr.sg_list = {{reinterpret_cast<uint64_t>(h.buf.data()) + offset, s.message_bytes, h.mr.lkey}};
                wr.send_flags = SendFlag::Signaled;
                wr.remote_addr = reinterpret_cast<uint64_t>(receiver.buf.data()) + i * slice + offset;
                wr.rkey = receiver.mr.rkey;
                if (h.engine.post_send(f.qpn, wr) != 0) {
                    f.failed = true;
                    break;
                }
                ++f.posted;
            }
        }
    };

    Result r;
    const sim::MacAddr receiver_mac = receiver.engine.config().mac;
    const size_t per_window = static_cast<size_t>(s.window_ns / s.sample_ns);
    std::vector<std::vector<uint64_t>> bytes;  // cumulative per flow at every sample
    bytes.push_back(std::vector<uint64_t>(n, 0));
    r.samples.push_back(Sample{0, 0, std::vector<double>(n, 0), std::vector<double>(n, 0)});
    service(0);
    while (simulator.now() < s.duration_ns) {
        // Posting between samples only: each flow has `outstanding` WRITEs queued, so a few
        // tens of microseconds of delay in reposting never starves it.
        if (!simulator.run_for(s.sample_ns, 50'000'000).done()) throw std::runtime_error("incast: event limit");
        service(simulator.now());
        Sample smp;
        smp.time_ns = simulator.now();
        smp.queue_bytes = sw.queue_bytes(receiver_mac);
        std::vector<uint64_t> cumulative(n, 0);
        const auto& by_source = sw.bytes_out_by_source(receiver_mac);
        for (size_t i = 0; i < n; ++i) {
            const auto it = by_source.find(flows[i].host->engine.config().mac);
            cumulative[i] = it == by_source.end() ? 0 : it->second;
        }
        const size_t back = bytes.size() >= per_window ? bytes.size() - per_window : 0;
        const double seconds = static_cast<double>(smp.time_ns - r.samples[back].time_ns) / 1e9;
        for (size_t i = 0; i < n; ++i) {
            smp.gbps.push_back(static_cast<double>(cumulative[i] - bytes[back][i]) * 8 / seconds / 1e9);
            const auto cc = flows[i].host->engine.qp_congestion(flows[i].qpn);
            smp.rate_gbps.push_back(cc && cc->limited ? static_cast<double>(cc->rate_kbps) / 1e6
                                                      : static_cast<double>(s.rate_bps) / 1e9);
        }
        bytes.push_back(std::move(cumulative));
        r.samples.push_back(std::move(smp));
    }

    // The WRITEs in flight at the end finish before the data is checked (bounded: a flow that
    // cannot finish in 500 ms of simulated time fails the check).
    auto all_done = [&] {
        service(simulator.now());
        return std::all_of(flows.begin(), flows.end(), [](const FlowState& f) { return f.failed || f.completed == f.posted; });
    };
    simulator.run_until(all_done, s.duration_ns + 500 * sim::kMillisecond, 200'000'000);
    r.drain_ns = simulator.now() - s.duration_ns;

    r.phases = make_phases(s);
    for (Phase& p : r.phases) measure_phase(s, r.samples, bytes, p);

    r.data_ok = true;
    for (size_t i = 0; i < n; ++i) {
        const FlowState& f = flows[i];
        r.writes_completed += f.completed;
        if (f.failed || f.completed != f.posted || f.completed < s.outstanding) r.data_ok = false;
        const uint8_t* got = receiver.buf.data() + i * slice;
        if (std::memcmp(got, f.host->buf.data(), slice) != 0) r.data_ok = false;
        const auto cc = f.host->engine.qp_congestion(f.qpn);
        if (cc) r.cuts += cc->cuts;
        r.cnps_handled += f.host->engine.device_counters().rp_cnp_handled;
        if (const auto* qc = f.host->engine.qp_counters(f.qpn)) r.retransmitted_packets += qc->retransmitted_packets;
    }
    const sim::EgressPortCounters& port = sw.counters(receiver_mac);
    r.peak_queue_bytes = port.peak_queue_bytes;
    r.drops = port.dropped;
    r.ce_marked = port.ce_marked;
    r.bytes_delivered = port.bytes_out;
    r.cnps_sent = receiver.engine.device_counters().np_cnp_sent;
    return r;
}

void write_csv(std::ostream& out, const Scenario& s, const Result& r) {
    out << "time_us,queue_bytes";
    for (size_t i = 0; i < s.flows.size(); ++i) out << ",gbps_" << i << ",rate_gbps_" << i;
    out << '\n' << std::fixed;
    for (const Sample& smp : r.samples) {
        out << std::setprecision(0) << static_cast<double>(smp.time_ns) / 1e3 << ',' << smp.queue_bytes
            << std::setprecision(4);
        for (size_t i = 0; i < s.flows.size(); ++i) out << ',' << smp.gbps[i] << ',' << smp.rate_gbps[i];
        out << '\n';
    }
}

void write_summary(std::ostream& out, const Scenario& s, const Result& r) {
    out << s.name << ": " << s.flows.size() << " flows, " << static_cast<double>(s.rate_bps) / 1e9
        << " Gb/s, DCQCN " << (s.dcqcn ? to_string(s.param_set) : "off") << ", RED " << s.bottleneck.kmin_bytes
        << "/" << s.bottleneck.kmax_bytes << " B pmax " << s.bottleneck.pmax << " on "
        << (s.bottleneck.mark_point == sim::EcnMarkPoint::kDequeue ? "dequeue" : "enqueue") << ", buffer "
        << s.bottleneck.buffer_bytes << " B\n";
    out << std::fixed << std::setprecision(3);
    for (const Phase& p : r.phases) {
        out << "  phase " << static_cast<double>(p.begin_ns) / 1e6 << "-" << static_cast<double>(p.end_ns) / 1e6
            << " ms, " << p.active.size() << " active, fair " << p.fair_gbps << " Gb/s: converged ";
        for (const auto& [c, tol] : {std::pair{p.convergence_ns, s.tolerance}, std::pair{p.convergence_loose_ns, 2 * s.tolerance}}) {
            out << "(+-" << static_cast<int>(tol * 100 + 0.5) << "%) ";
            if (c)
                out << "after " << static_cast<double>(*c) / 1e6 << " ms ";
            else
                out << "never ";
        }
        out << "| jain " << p.jain << ", utilisation " << p.utilisation << ", queue mean "
            << static_cast<uint64_t>(p.mean_queue_bytes) << " B max " << p.max_queue_bytes << " B\n";
    }
    out << "  peak queue " << r.peak_queue_bytes << " B, drops " << r.drops << ", CE marked " << r.ce_marked
        << ", CNPs sent " << r.cnps_sent << " handled " << r.cnps_handled << ", cuts " << r.cuts
        << ", retransmitted packets " << r.retransmitted_packets << ", WRITEs " << r.writes_completed << " (last "
        << static_cast<double>(r.drain_ns) / 1e6 << " ms after the end), data "
        << (r.data_ok ? "ok" : "BAD") << "\n";
}

}  // namespace rnic::incast
