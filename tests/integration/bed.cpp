#include "bed.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace rnic::itest {

namespace hc = host::client;
namespace abi = host::abi;

std::map<std::string, std::string> bed_env() {
    const char* dir = std::getenv("RNIC_TESTBED_DIR");
    REQUIRE(dir != nullptr);
    std::ifstream in(std::string(dir) + "/env");
    REQUIRE(in.good());
    std::map<std::string, std::string> out;
    std::string word;
    while (in >> word)
        if (const auto eq = word.find('='); eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
    return out;
}

Buffer::Buffer(size_t bytes) : size(bytes) {
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    REQUIRE(data != nullptr);
    std::memset(data, 0, bytes);
}
Buffer::~Buffer() { std::free(data); }

Side::~Side() {
    // The connection's destructor tells the daemon, which reclaims the rest; deregister first so
    // the buffer is freed after its MR, as verbs require.
    if (conn && mr && !conn->dead()) conn->dereg_mr(mr);
    conn.reset();
}

std::unique_ptr<Side> open_side(const std::string& socket_path, size_t buffer_bytes, uint32_t cq_depth) {
    auto s = std::make_unique<Side>();
    const auto slash = socket_path.rfind('/');
    const std::string dir = socket_path.substr(0, slash);
    std::string name = socket_path.substr(slash + 1);
    name = name.substr(0, name.size() - 5);  // ".sock"
    auto conn = Connection::open(name, dir);
    INFO("open " << socket_path << ": errno " << conn.error());
    REQUIRE(conn.ok());
    s->conn = std::move(*conn);
    auto pd = s->conn->alloc_pd();
    REQUIRE(pd.ok());
    s->pd = *pd;
    auto cq = s->conn->create_cq(cq_depth, nullptr, 0);
    REQUIRE(cq.ok());
    s->cq = *cq;
    s->buf = std::make_unique<Buffer>(buffer_bytes);
    auto mr = s->conn->reg_mr(s->pd, s->buf->data, buffer_bytes,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC);
    INFO("reg_mr errno " << mr.error());
    REQUIRE(mr.ok());
    s->mr = *mr;
    const auto& hello = s->conn->hello();
    REQUIRE(hello.gid_count >= 1);
    std::memcpy(s->self_av.dgid, hello.gids[0], 16);
    s->self_av.is_global = 1;
    s->self_av.hop_limit = 64;
    s->self_av.port_num = 1;
    return s;
}

hc::Qp* create_qp(Side& s, const QpOptions& o) {
    hc::QpInitAttr init{};
    init.qp_type = o.type;
    init.send_cq = s.cq;
    init.recv_cq = s.cq;
    init.srq = nullptr;
    init.cap = {o.max_wr, o.max_wr, 2, 2, 64};
    init.sq_sig_all = false;
    auto qp = s.conn->create_qp(s.pd, init);
    INFO("create_qp errno " << qp.error());
    REQUIRE(qp.ok());
    return *qp;
}

void bring_up(Side& s, hc::Qp* qp, uint32_t remote_qpn, const abi::AddressVector& remote, const QpOptions& o) {
    abi::QpAttr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    uint32_t mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (o.type == IBV_QPT_UD) {
        attr.qkey = o.qkey;
        mask |= IBV_QP_QKEY;
    } else {
        attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               (o.type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_ATOMIC : 0);
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    REQUIRE(s.conn->modify_qp(qp, attr, mask) == 0);

    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    mask = IBV_QP_STATE;
    if (o.type != IBV_QPT_UD) {
        attr.path_mtu = o.mtu;
        attr.dest_qp_num = remote_qpn;
        attr.rq_psn = 0x100;
        attr.ah_attr = remote;
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (o.type == IBV_QPT_RC) {
            attr.max_dest_rd_atomic = 16;
            attr.min_rnr_timer = 12;
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
    }
    const int rtr = s.conn->modify_qp(qp, attr, mask);
    INFO("modify to RTR: errno " << rtr);
    REQUIRE(rtr == 0);

    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0x100;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (o.type == IBV_QPT_RC) {
        attr.timeout = o.timeout;
        attr.retry_cnt = o.retry_cnt;
        attr.rnr_retry = o.rnr_retry;
        attr.max_rd_atomic = 16;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    REQUIRE(s.conn->modify_qp(qp, attr, mask) == 0);
}

abi::AddressVector peer_av(const Side& s, uint8_t gid_index) {
    const auto& hello = s.conn->hello();
    REQUIRE(gid_index < hello.gid_count);
    abi::AddressVector av = s.self_av;
    std::memcpy(av.dgid, hello.gids[gid_index], 16);
    av.sgid_index = gid_index;
    return av;
}

QpPair connect_pair(Side& a, Side& b, const QpOptions& o) {
    QpPair p;
    p.a = create_qp(a, o);
    p.b = create_qp(b, o);
    abi::AddressVector to_b = peer_av(b, o.gid_index), to_a = peer_av(a, o.gid_index);
    to_b.traffic_class = to_a.traffic_class = o.traffic_class;
    bring_up(a, p.a, p.b->qpn, to_b, o);
    bring_up(b, p.b, p.a->qpn, to_a, o);
    return p;
}

std::vector<Cqe> wait_completions(Side& s, size_t n, std::chrono::milliseconds limit) {
    std::vector<Cqe> got;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    Cqe batch[16];
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
        const int k = s.conn->poll_cq(s.cq, 16, batch);
        REQUIRE(k >= 0);
        if (k == 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
            continue;
        }
        got.insert(got.end(), batch, batch + k);
    }
    return got;
}

int post_send(Side& s, hc::Qp* qp, uint8_t opcode, uint64_t wr_id, uint8_t* local, uint32_t length,
              uint64_t remote_addr, uint32_t rkey, uint32_t imm, uint64_t compare_add, uint64_t swap) {
    abi::Sge sge{reinterpret_cast<uintptr_t>(local), length, s.mr->lkey};
    hc::SendWr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = length || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? 1 : 0;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.remote_addr = remote_addr;
    wr.rkey = rkey;
    wr.compare_add = compare_add;
    wr.swap = swap;
    const hc::SendWr* bad = nullptr;
    return s.conn->post_send(qp, &wr, &bad);
}

int post_ud_send(Side& s, hc::Qp* qp, hc::Ah* ah, uint32_t remote_qpn, uint32_t qkey, uint64_t wr_id, uint8_t* local,
                 uint32_t length) {
    abi::Sge sge{reinterpret_cast<uintptr_t>(local), length, s.mr->lkey};
    hc::SendWr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.ah = ah;
    wr.remote_qpn = remote_qpn;
    wr.remote_qkey = qkey;
    const hc::SendWr* bad = nullptr;
    return s.conn->post_send(qp, &wr, &bad);
}

int post_recv(Side& s, hc::Qp* qp, uint64_t wr_id, uint8_t* local, uint32_t length) {
    abi::Sge sge{reinterpret_cast<uintptr_t>(local), length, s.mr->lkey};
    hc::RecvWr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = length ? 1 : 0;
    const hc::RecvWr* bad = nullptr;
    return s.conn->post_recv(qp, &wr, &bad);
}

std::map<std::string, uint64_t> counters(Connection& conn) {
    auto text = conn.stats();
    REQUIRE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    std::map<std::string, uint64_t> out;
    for (const auto& [k, v] : doc.at("counters").items()) out[k] = v.get<uint64_t>();
    out["sessions"] = doc.at("sessions").size();
    out["qps"] = doc.at("qps").size();
    return out;
}

std::vector<SessionObjects> sessions(Connection& conn) {
    auto text = conn.stats();
    REQUIRE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    std::vector<SessionObjects> out;
    for (const auto& s : doc.at("sessions")) {
        SessionObjects o;
        o.id = s.at("id").get<uint64_t>();
        o.pid = s.at("pid").get<uint64_t>();
        o.pds = s.at("pds").get<uint64_t>();
        o.mrs = s.at("mrs").get<uint64_t>();
        o.cqs = s.at("cqs").get<uint64_t>();
        o.qps = s.at("qps").get<uint64_t>();
        o.srqs = s.at("srqs").get<uint64_t>();
        o.ahs = s.at("ahs").get<uint64_t>();
        o.segments = s.at("segments").get<uint64_t>();
        o.segments_unsealed = s.at("segments_unsealed").get<uint64_t>();
        out.push_back(o);
    }
    return out;
}

std::map<std::string, uint64_t> device_objects(Connection& conn) {
    auto text = conn.stats();
    REQUIRE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    std::map<std::string, uint64_t> out;
    for (const auto& [k, v] : doc.at("objects").items()) out[k] = v.get<uint64_t>();
    return out;
}

std::vector<std::pair<uint32_t, uint64_t>> qp_owners(Connection& conn) {
    auto text = conn.stats();
    REQUIRE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    std::vector<std::pair<uint32_t, uint64_t>> out;
    for (const auto& q : doc.at("qps")) out.emplace_back(q.at("qpn").get<uint32_t>(), q.at("pid").get<uint64_t>());
    return out;
}

void record_fact(const std::string& json_line) {
    const char* dir = std::getenv("RNIC_TESTBED_DIR");
    REQUIRE(dir != nullptr);
    std::ofstream out(std::string(dir) + "/facts.jsonl", std::ios::app);
    out << json_line << "\n";
    out.flush();
    REQUIRE(out.good());
}

void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

}  // namespace rnic::itest
