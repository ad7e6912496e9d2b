// How the control path of one rnicd scales with the number of QPs: for each N on the command
// line, create N RC QPs on one device, bring each to RTS connected to its neighbour (QP 2i with
// 2i+1, both on the same device, so the frames loop back inside the daemon), check the data path
// with RDMA WRITEs on a few of them (the last created among them), destroy them all; time each
// phase and print QPs per second overall and for the first and the last 1,000 QPs, so a rate
// that falls as the count grows shows. tools/bench-scale.sh runs it; CTest runs a short one for
// correctness only.
//
//   qp_scale [--run-dir DIR] [--device NAME] [--max-wr N] [--check K] [--hold S] N...
//
// --hold S keeps the QPs in RTS for S seconds after the WRITEs (announced by a "holding" line),
// so a caller can measure what an idle daemon with N QPs costs.
//
// Exit status 0 when every phase and every WRITE worked, 1 otherwise (with the failing verb and
// its errno), 2 for usage.
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rnic/host/client/connection.hpp"

namespace {

namespace hc = rnic::host::client;
namespace abi = rnic::host::abi;
using Clock = std::chrono::steady_clock;

constexpr size_t kRate = 1000;         // the window of the first/last rates
constexpr uint32_t kCheckBytes = 256;  // one WRITE of the data check
constexpr uint32_t kSlot = 4096;       // buffer bytes per checked QP (source, then target)

[[noreturn]] void fail(const char* what, int err) {
    std::fprintf(stderr, "qp_scale: %s failed: %s (errno %d)\n", what, std::strerror(err), err);
    std::exit(1);
}

double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Times of a phase: when it started and when each QP was done.
struct Phase {
    Clock::time_point start;
    std::vector<Clock::time_point> done;

    double total() const { return seconds(start, done.back()); }
    double rate() const { return static_cast<double>(done.size()) / total(); }
    double first_rate() const {
        const size_t k = std::min(kRate, done.size());
        return static_cast<double>(k) / seconds(start, done[k - 1]);
    }
    double last_rate() const {
        const size_t k = std::min(kRate, done.size());
        const Clock::time_point from = k == done.size() ? start : done[done.size() - k - 1];
        return static_cast<double>(k) / seconds(from, done.back());
    }
};

struct Device {
    std::unique_ptr<hc::Connection> conn;
    hc::Pd* pd = nullptr;
    hc::Cq* cq = nullptr;
    hc::Mr* mr = nullptr;
    uint8_t* buf = nullptr;
    size_t buf_bytes = 0;
    abi::AddressVector self{};  // GID 0: the device's own IPv4-mapped address
};

void bring_up(Device& d, hc::Qp* qp, uint32_t remote_qpn) {
    abi::QpAttr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int rc = d.conn->modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        fail("modify_qp(INIT)", rc);
    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = 0x100;
    attr.ah_attr = d.self;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    if (int rc = d.conn->modify_qp(qp, attr,
                                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        fail("modify_qp(RTR)", rc);
    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0x100;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    if (int rc = d.conn->modify_qp(qp, attr,
                                   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                       IBV_QP_MAX_QP_RD_ATOMIC))
        fail("modify_qp(RTS)", rc);
}

// One signaled WRITE per checked QP, each into its own slot of the buffer through its partner,
// all in flight together; then every completion and every target byte checked. Returns the
// number of WRITEs that landed intact.
size_t data_check(Device& d, const std::vector<hc::Qp*>& qps, const std::vector<size_t>& which) {
    for (size_t k = 0; k < which.size(); ++k) {
        uint8_t* src = d.buf + k * 2 * kSlot;
        for (uint32_t i = 0; i < kCheckBytes; ++i) src[i] = static_cast<uint8_t>(which[k] * 131 + i * 7 + 1);
        std::memset(src + kSlot, 0, kCheckBytes);
        abi::Sge sge{reinterpret_cast<uintptr_t>(src), kCheckBytes, d.mr->lkey};
        hc::SendWr wr{};
        wr.wr_id = which[k];
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.remote_addr = reinterpret_cast<uintptr_t>(src + kSlot);
        wr.rkey = d.mr->rkey;
        const hc::SendWr* bad = nullptr;
        if (int rc = d.conn->post_send(qps[which[k]], &wr, &bad)) fail("post_send(RDMA WRITE)", rc);
    }
    std::vector<abi::Cqe> got;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    abi::Cqe batch[16];
    while (got.size() < which.size() && Clock::now() < deadline) {
        const int n = d.conn->poll_cq(d.cq, 16, batch);
        if (n < 0) fail("poll_cq", -n);
        if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        got.insert(got.end(), batch, batch + n);
    }
    size_t good = 0;
    for (size_t k = 0; k < which.size(); ++k) {
        const auto c = std::find_if(got.begin(), got.end(), [&](const abi::Cqe& e) { return e.wr_id == which[k]; });
        const uint8_t* src = d.buf + k * 2 * kSlot;
        const bool landed = std::memcmp(src, src + kSlot, kCheckBytes) == 0;
        if (c == got.end())
            std::fprintf(stderr, "qp_scale: no completion for the WRITE on QP #%zu (QPN %#x)\n", which[k],
                         qps[which[k]]->qpn);
        else if (c->status != IBV_WC_SUCCESS)
            std::fprintf(stderr, "qp_scale: WRITE on QP #%zu (QPN %#x) completed with status %u\n", which[k],
                         qps[which[k]]->qpn, c->status);
        else if (!landed)
            std::fprintf(stderr, "qp_scale: WRITE on QP #%zu (QPN %#x) completed but the bytes differ\n", which[k],
                         qps[which[k]]->qpn);
        else
            ++good;
    }
    return good;
}

// The checked QPs: `k` of them spread evenly, the first and the last created always among them.
std::vector<size_t> checked(size_t n, size_t k) {
    std::vector<size_t> out;
    k = std::clamp<size_t>(k, 2, n);
    for (size_t i = 0; i < k; ++i) out.push_back(i * (n - 1) / (k - 1));
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool run(Device& d, size_t n, uint32_t max_wr, size_t check, double hold) {
    hc::QpInitAttr init{};
    init.qp_type = IBV_QPT_RC;
    init.send_cq = d.cq;
    init.recv_cq = d.cq;
    init.cap = {max_wr, max_wr, 1, 1, 0};
    std::vector<hc::Qp*> qps;
    qps.reserve(n);
    Phase create, rts, destroy;

    create.start = Clock::now();
    for (size_t i = 0; i < n; ++i) {
        auto qp = d.conn->create_qp(d.pd, init);
        if (!qp) {
            std::fprintf(stderr, "qp_scale: create_qp #%zu of %zu\n", i + 1, n);
            fail("create_qp", qp.error());
        }
        qps.push_back(*qp);
        create.done.push_back(Clock::now());
    }
    rts.start = Clock::now();
    for (size_t i = 0; i < n; ++i) {
        bring_up(d, qps[i], qps[i ^ 1]->qpn);
        rts.done.push_back(Clock::now());
    }
    const std::vector<size_t> which = checked(n, check);
    const size_t good = data_check(d, qps, which);
    if (hold > 0) {
        std::printf("qp_scale n=%zu: holding %zu QPs in RTS for %.1f s\n", n, n, hold);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(hold));
    }
    destroy.start = Clock::now();
    for (size_t i = 0; i < n; ++i) {
        if (int rc = d.conn->destroy_qp(qps[i])) fail("destroy_qp", rc);
        destroy.done.push_back(Clock::now());
    }

    std::printf(
        "qp_scale n=%zu: create %.2f s (%.0f QPs/s; first %zu %.0f/s, last %zu %.0f/s), "
        "to RTS %.2f s (%.0f QPs/s; first %zu %.0f/s, last %zu %.0f/s), destroy %.2f s (%.0f QPs/s), "
        "WRITEs %zu/%zu intact (QPs #%zu..#%zu)\n",
        n, create.total(), create.rate(), std::min(kRate, n), create.first_rate(), std::min(kRate, n),
        create.last_rate(), rts.total(), rts.rate(), std::min(kRate, n), rts.first_rate(), std::min(kRate, n),
        rts.last_rate(), destroy.total(), destroy.rate(), good, which.size(), which.front(), which.back());
    std::printf(
        "BENCH qp_scale n=%zu create_s=%.3f create_per_s=%.0f rts_s=%.3f rts_per_s=%.0f "
        "rts_first_per_s=%.0f rts_last_per_s=%.0f destroy_s=%.3f destroy_per_s=%.0f writes_ok=%zu/%zu\n",
        n, create.total(), create.rate(), rts.total(), rts.rate(), rts.first_rate(), rts.last_rate(), destroy.total(),
        destroy.rate(), good, which.size());
    std::fflush(stdout);
    return good == which.size();
}

int usage() {
    std::fprintf(stderr,
                 "usage: qp_scale [--run-dir DIR] [--device NAME] [--max-wr N] [--check K] [--hold S] N...\n"
                 "  N: even QP counts, each run in turn (create, to RTS, WRITEs, destroy)\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string run_dir = hc::default_run_dir(), device = "rnic0";
    uint32_t max_wr = 16;
    size_t check = 4;
    double hold = 0;
    std::vector<size_t> counts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--run-dir" && has_value)
            run_dir = argv[++i];
        else if (a == "--device" && has_value)
            device = argv[++i];
        else if (a == "--max-wr" && has_value)
            max_wr = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
        else if (a == "--check" && has_value)
            check = std::strtoul(argv[++i], nullptr, 10);
        else if (a == "--hold" && has_value)
            hold = std::strtod(argv[++i], nullptr);
        else if (!a.empty() && a.find_first_not_of("0123456789") == std::string::npos)
            counts.push_back(std::strtoul(a.c_str(), nullptr, 10));
        else
            return usage();
    }
    if (counts.empty() || max_wr == 0) return usage();
    for (size_t n : counts)
        if (n < 2 || n % 2) return usage();

    Device d;
    auto conn = hc::Connection::open(device, run_dir);
    if (!conn) fail(("connecting to " + run_dir + "/" + device + ".sock").c_str(), conn.error());
    d.conn = std::move(*conn);
    const auto& hello = d.conn->hello();
    if (hello.gid_count < 1) fail("Hello (no GID)", EPROTO);
    std::memcpy(d.self.dgid, hello.gids[0], 16);
    d.self.is_global = 1;
    d.self.hop_limit = 64;
    d.self.port_num = 1;
    const size_t max_n = *std::max_element(counts.begin(), counts.end());
    std::printf("qp_scale: %s (max_qp %u), RC QPs with %u send and %u receive WRs each, up to %zu QPs\n",
                hello.device_name, hello.device.max_qp, max_wr, max_wr, max_n);
    auto pd = d.conn->alloc_pd();
    if (!pd) fail("alloc_pd", pd.error());
    d.pd = *pd;
    auto cq = d.conn->create_cq(1024, nullptr, 0);
    if (!cq) fail("create_cq", cq.error());
    d.cq = *cq;
    d.buf_bytes = std::max<size_t>(check, 2) * 2 * kSlot;
    d.buf = static_cast<uint8_t*>(std::aligned_alloc(4096, d.buf_bytes));
    if (d.buf == nullptr) fail("aligned_alloc", ENOMEM);
    auto mr = d.conn->reg_mr(d.pd, d.buf, d.buf_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) fail("reg_mr", mr.error());
    d.mr = *mr;

    bool ok = true;
    for (size_t n : counts) ok = run(d, n, max_wr, check, hold) && ok;
    d.conn->dereg_mr(d.mr);
    d.conn.reset();
    std::free(d.buf);
    return ok ? 0 : 1;
}
