// Two transport engines back to back in one thread (one core): frames go from one engine's
// transmit straight into the other's receive, ICRC built and verified on every packet.
// Reports 64 B RDMA WRITE, SEND and READ operations per second, 64 KiB WRITE throughput, and the
// heap allocations per operation once warmed up (an operator new hook: the data path's post,
// frames and completions must allocate nothing).
// Usage: engine_bench [SECONDS_PER_CASE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "alloc_counter.hpp"
#include "rnic/transport/engine.hpp"

using namespace rnic::transport;
using Clock = std::chrono::steady_clock;

namespace {

// Frames land in one reusable arena; the peer consumes them before the next transmit.
class ArenaSink : public FrameSink {
public:
    std::span<uint8_t> allocate(size_t length) override {
        if (used_ + length > arena_.size()) return {};
        return {arena_.data() + used_, length};
    }
    void commit(size_t length) override {
        frames_.push_back({used_, length});
        used_ += length;
    }
    template <class F>
    void drain(F&& deliver) {
        for (auto [off, len] : frames_) deliver(std::span<const uint8_t>(arena_.data() + off, len));
        frames_.clear();
        used_ = 0;
    }

private:
    std::vector<uint8_t> arena_ = std::vector<uint8_t>(8u << 20);
    std::vector<std::pair<size_t, size_t>> frames_;
    size_t used_ = 0;
};

EngineConfig config(uint8_t host, CacheSetup caches = {}, uint64_t per_packet_ns = 0) {
    EngineConfig c;
    c.caches = caches;
    c.tuning.per_packet_cost_ns = per_packet_ns;
    c.mac = {0x02, 0, 0, 0, 0, host};
    c.gids = {rnic::wire::Gid::from_ipv4(0x0A000000u | host)};
    return c;
}

struct Side {
    Engine e;
    uint32_t pd = 0, cq = 0, qpn = 0;
    std::vector<uint8_t> buf;
    MrInfo mr;
    explicit Side(uint8_t host, size_t bytes, CacheSetup caches = {}, uint64_t per_packet_ns = 0)
        : e(config(host, caches, per_packet_ns)), buf(bytes) {
        pd = *e.alloc_pd();
        cq = *e.create_cq(1 << 20);
        mr = *e.reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), 0xF);
        qpn = add_qp();
    }
    uint32_t add_qp() {
        QpInitAttr init;
        init.pd = pd;
        init.send_cq = init.recv_cq = cq;
        init.cap = {4096, 4096, 1, 1, 64};
        return e.create_qp(init)->qpn;
    }
    void connect(Side& peer, Mtu mtu) { connect_qp(qpn, peer, peer.qpn, mtu); }
    void connect_qp(uint32_t local, Side& peer, uint32_t remote, Mtu mtu) {
        const uint32_t saved = qpn;
        qpn = local;
        const uint32_t peer_saved = peer.qpn;
        peer.qpn = remote;
        connect_one(peer, mtu);
        qpn = saved;
        peer.qpn = peer_saved;
    }
    void connect_one(Side& peer, Mtu mtu) {
        QpAttributes a;
        a.qp_state = QpState::Init;
        a.qp_access_flags = 0xF;
        e.modify_qp(qpn, a, QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port | QpAttr::AccessFlags);
        a.qp_state = QpState::Rtr;
        a.path_mtu = mtu;
        a.dest_qp_num = peer.qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 1;
        a.ah_attr.dgid = peer.e.config().gids[0];
        a.ah_attr.dmac = peer.e.config().mac;
        e.modify_qp(qpn, a,
                    QpAttr::State | QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn |
                        QpAttr::MaxDestRdAtomic | QpAttr::MinRnrTimer);
        a.qp_state = QpState::Rts;
        a.sq_psn = 0;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 16;
        e.modify_qp(qpn, a,
                    QpAttr::State | QpAttr::SqPsn | QpAttr::Timeout | QpAttr::RetryCnt | QpAttr::RnrRetry |
                        QpAttr::MaxQpRdAtomic);
    }
};

struct Rate {
    double ops_per_s;
    double gbit_per_s;
    double allocations_per_op;  // after the first 10% of the run
};

// Keeps `depth` operations in flight, one in `signal_every` signaled (as perftest does). The work
// requests are built once and reused, as a verbs provider's caller would: what allocates is then
// the engine's alone.
Rate run(WrOpcode op, uint32_t size, double seconds, Mtu mtu) {
    Side a(1, 1 << 20), b(2, 1 << 20);
    a.connect(b, mtu);
    b.connect(a, mtu);
    ArenaSink sink;
    const uint32_t depth = 512, signal_every = 64;
    uint64_t posted = 0, completed = 0;
    std::vector<WorkCompletion> wcs(64);
    SendWr wr;
    wr.opcode = op;
    wr.sg_list = {{reinterpret_cast<uint64_t>(a.buf.data()), size, a.mr.lkey}};
    wr.remote_addr = reinterpret_cast<uint64_t>(b.buf.data());
    wr.rkey = b.mr.rkey;
    RecvWr recv{0, {{wr.remote_addr, size, b.mr.lkey}}};
    auto post = [&] {
        wr.wr_id = posted;
        wr.send_flags = (posted % signal_every == signal_every - 1) ? uint32_t{SendFlag::Signaled} : 0u;
        recv.wr_id = posted;
        if (op == WrOpcode::Send) b.e.post_recv(b.qpn, recv);
        if (a.e.post_send(a.qpn, wr) == 0) ++posted;
    };
    uint64_t now = 0;
    const auto t0 = Clock::now();
    const auto warm = t0 + std::chrono::duration<double>(seconds / 10);
    const auto limit = t0 + std::chrono::duration<double>(seconds);
    uint64_t iterations = 0;
    bool counting = false;
    uint64_t allocations_at = 0, completed_at = 0;
    while (true) {
        while (posted - completed < depth) post();
        now += 100;
        a.e.transmit(sink, now, 256);
        sink.drain([&](std::span<const uint8_t> f) { b.e.receive(f, now); });
        b.e.transmit(sink, now, 256);
        sink.drain([&](std::span<const uint8_t> f) { a.e.receive(f, now); });
        int n;
        while ((n = a.e.poll_cq(a.cq, wcs)) > 0) {
            for (int i = 0; i < n; ++i) {
                if (wcs[i].status != WcStatus::Success) {
                    std::fprintf(stderr, "completion error %s\n", std::string(wc_status_name(wcs[i].status)).c_str());
                    std::exit(1);
                }
                if (!is_recv(wcs[i].opcode)) completed = wcs[i].wr_id + 1;
            }
        }
        while (b.e.poll_cq(b.cq, wcs) > 0) {
        }
        if ((++iterations & 63) == 0) {
            const auto t = Clock::now();
            if (!counting && t > warm) {
                counting = true;
                allocations_at = rnic::bench::allocations();
                completed_at = completed;
            }
            if (t > limit) break;
        }
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const double ops = static_cast<double>(completed) / elapsed;
    const double counted = static_cast<double>(std::max<uint64_t>(completed - completed_at, 1));
    return {ops, ops * size * 8 / 1e9, static_cast<double>(rnic::bench::allocations() - allocations_at) / counted};
}

// Closed loop: every QP has one 64 B WRITE in flight at a time, as many independent clients
// do. Throughput is in virtual time, which includes the processing time the cache misses
// charge; wall-clock speed of the host does not enter.
double qp_sweep_point(uint32_t qps, uint32_t ops, CacheSetup caches, uint64_t per_packet_ns) {
    Side a(1, 1 << 16, caches, per_packet_ns), b(2, 1 << 16, caches, per_packet_ns);
    std::vector<uint32_t> senders;
    for (uint32_t i = 0; i < qps; ++i) {
        const uint32_t qa = i == 0 ? a.qpn : a.add_qp();
        const uint32_t qb = i == 0 ? b.qpn : b.add_qp();
        a.connect_qp(qa, b, qb, Mtu::Mtu4096);
        b.connect_qp(qb, a, qa, Mtu::Mtu4096);
        senders.push_back(qa);
    }
    ArenaSink sink;
    std::vector<WorkCompletion> wcs(256);
    uint64_t now = 0, completed = 0, posted = 0;
    auto post = [&](uint32_t qpn) {
        SendWr wr;
        wr.opcode = WrOpcode::RdmaWrite;
        wr.wr_id = qpn;
        wr.sg_list = {{reinterpret_cast<uint64_t>(a.buf.data()), 64, a.mr.lkey}};
        wr.send_flags = SendFlag::Signaled;
        wr.remote_addr = reinterpret_cast<uint64_t>(b.buf.data());
        wr.rkey = b.mr.rkey;
        a.e.post_send(qpn, wr);
        ++posted;
    };
    for (uint32_t q : senders) post(q);
    while (completed < ops) {
        // Time moves to whichever engine is next able to act, as a real NIC's clock would.
        auto da = a.e.next_deadline(), db = b.e.next_deadline();
        uint64_t next = now + 100;
        if (da && *da > now) next = std::max(next, std::min(*da, db ? *db : *da));
        now = next;
        a.e.transmit(sink, now, 256);
        sink.drain([&](std::span<const uint8_t> f) { b.e.receive(f, now); });
        b.e.transmit(sink, now, 256);
        sink.drain([&](std::span<const uint8_t> f) { a.e.receive(f, now); });
        int n;
        while ((n = a.e.poll_cq(a.cq, wcs)) > 0) {
            for (int i = 0; i < n; ++i) {
                ++completed;
                if (posted < ops) post(static_cast<uint32_t>(wcs[i].wr_id));
            }
        }
    }
    return static_cast<double>(completed) / (static_cast<double>(now) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    std::printf("two engines back to back, one thread, ICRC on every packet, MTU 4096\n");
    const Rate w64 = run(WrOpcode::RdmaWrite, 64, seconds, Mtu::Mtu4096);
    std::printf("64 B RDMA WRITE   %10.0f ops/s  (target 2,000,000: %.2fx)  %.4f allocations/op\n", w64.ops_per_s,
                w64.ops_per_s / 2e6, w64.allocations_per_op);
    const Rate s64 = run(WrOpcode::Send, 64, seconds, Mtu::Mtu4096);
    std::printf("64 B SEND         %10.0f ops/s                            %.4f allocations/op\n", s64.ops_per_s,
                s64.allocations_per_op);
    const Rate r64 = run(WrOpcode::RdmaRead, 64, seconds, Mtu::Mtu4096);
    std::printf("64 B RDMA READ    %10.0f ops/s                            %.4f allocations/op\n", r64.ops_per_s,
                r64.allocations_per_op);
    const Rate w64k = run(WrOpcode::RdmaWrite, 65536, seconds, Mtu::Mtu4096);
    std::printf("64 KiB RDMA WRITE %10.0f ops/s  %6.2f Gbit/s  %6.2f GB/s  %.4f allocations/op\n", w64k.ops_per_s,
                w64k.gbit_per_s, w64k.gbit_per_s / 8, w64k.allocations_per_op);

    // The RNIC-cache effect (Kalia ATC'16, Husky NSDI'23): QPC cache of 64 lines, 4-way,
    // 500 ns per miss, 100 ns per packet; throughput in virtual time as QPs grow.
    CacheSetup caches;
    caches.qpc = {64, 4, 500};
    std::printf("\nQPC cache 64 entries, 500 ns/miss, 100 ns/packet, closed loop 64 B WRITEs (virtual time)\n");
    std::printf("%6s %14s %14s %8s\n", "QPs", "cache ops/s", "no-cache ops/s", "ratio");
    for (uint32_t qps : {8u, 32u, 64u, 128u, 256u, 1024u}) {
        const uint32_t ops = std::max<uint32_t>(20000, qps * 20);
        const double with = qp_sweep_point(qps, ops, caches, 100);
        const double without = qp_sweep_point(qps, ops, {}, 100);
        std::printf("%6u %14.0f %14.0f %8.2f\n", qps, with, without, with / without);
    }
    return 0;
}
