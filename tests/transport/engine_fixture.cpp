#include "engine_fixture.hpp"

#include <sstream>

namespace rnic::test {

EngineConfig node_config(uint8_t host, EngineConfig base) {
    base.mac = {0x02, 0, 0, 0, 0, host};
    // rnicd's layout: the IPv4-mapped GID, then link-local, then a global (ULA) address.
    std::array<uint8_t, 16> link_local{0xfe, 0x80};
    link_local[15] = host;
    std::array<uint8_t, 16> global{0xfd, 0x77};
    global[15] = host;
    base.gids = {wire::Gid::from_ipv4(0x0A000000u | host), wire::Gid::from_ipv6(link_local),
                 wire::Gid::from_ipv6(global)};
    return base;
}

TwoNodes::TwoNodes(uint64_t seed, sim::LinkConfig link, EngineConfig base)
    : sim(seed),
      node_a(std::make_unique<EngineNode>(node_config(1, base))),
      node_b(std::make_unique<EngineNode>(node_config(2, base))) {
    id_a = sim.add_node(*node_a, node_a->engine.config().mac);
    id_b = sim.add_node(*node_b, node_b->engine.config().mac);
    sim.connect(id_a, id_b, link);
    a.node = node_a.get();
    b.node = node_b.get();
}

void TwoNodes::setup(size_t buffer_bytes, uint32_t access) {
    for (Endpoint* ep : {&a, &b}) {
        ep->pd = *ep->e().alloc_pd();
        ep->send_cq = *ep->e().create_cq(65536);
        ep->recv_cq = *ep->e().create_cq(65536);
        ep->buf.assign(buffer_bytes, 0);
        auto mr = ep->e().reg_mr(ep->pd, ep->buf.data(), ep->buf.size(), ep->addr(), access);
        REQUIRE(mr);
        ep->mr = *mr;
    }
}

void bring_up(Engine& e, uint32_t qpn, const QpOptions& o, uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn,
              const AddressVector& av) {
    QpAttributes attr;
    attr.qp_state = QpState::Init;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = o.access;
    attr.qkey = o.qkey;
    const uint32_t init_mask = QpAttr::State | QpAttr::PkeyIndex | QpAttr::Port |
                               (o.type == QpType::Ud ? QpAttr::Qkey : QpAttr::AccessFlags);
    REQUIRE(e.modify_qp(qpn, attr, init_mask) == 0);

    attr.qp_state = QpState::Rtr;
    attr.path_mtu = o.mtu;
    attr.dest_qp_num = dest_qpn;
    attr.rq_psn = rq_psn;
    attr.max_dest_rd_atomic = o.max_rd_atomic;
    attr.min_rnr_timer = o.min_rnr_timer;
    attr.ah_attr = av;
    uint32_t rtr_mask = QpAttr::State;
    if (o.type == QpType::Rc)
        rtr_mask |= QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn | QpAttr::MaxDestRdAtomic |
                    QpAttr::MinRnrTimer;
    if (o.type == QpType::Uc) rtr_mask |= QpAttr::Av | QpAttr::PathMtu | QpAttr::DestQpn | QpAttr::RqPsn;
    REQUIRE(e.modify_qp(qpn, attr, rtr_mask) == 0);

    attr.qp_state = QpState::Rts;
    attr.sq_psn = sq_psn;
    attr.timeout = o.timeout;
    attr.retry_cnt = o.retry_cnt;
    attr.rnr_retry = o.rnr_retry;
    attr.max_rd_atomic = o.max_rd_atomic;
    uint32_t rts_mask = QpAttr::State | QpAttr::SqPsn;
    if (o.type == QpType::Rc)
        rts_mask |= QpAttr::Timeout | QpAttr::RetryCnt | QpAttr::RnrRetry | QpAttr::MaxQpRdAtomic;
    REQUIRE(e.modify_qp(qpn, attr, rts_mask) == 0);
}

void TwoNodes::connect(const QpOptions& o) {
    auto make_qp = [&](Endpoint& ep, std::optional<uint32_t> srq) {
        QpInitAttr init;
        init.qp_type = o.type;
        init.pd = ep.pd;
        init.send_cq = ep.send_cq;
        init.recv_cq = ep.recv_cq;
        init.srq = srq;
        init.cap = {o.max_send_wr, srq ? 0 : o.max_recv_wr, 16, 16, 128};
        auto qp = ep.e().create_qp(init);
        REQUIRE(qp);
        ep.qpn = qp->qpn;
    };
    make_qp(a, o.srq_a);
    make_qp(b, o.srq_b);
    AddressVector to_b, to_a;
    to_b.dgid = b.e().config().gids.at(o.sgid_index);
    to_b.sgid_index = o.sgid_index;
    to_b.dmac = b.e().config().mac;
    to_a.dgid = a.e().config().gids.at(o.sgid_index);
    to_a.sgid_index = o.sgid_index;
    to_a.dmac = a.e().config().mac;
    // a sends with sq_psn into b's rq_psn and vice versa.
    bring_up(a.e(), a.qpn, o, b.qpn, o.rq_psn, o.sq_psn, to_b);
    bring_up(b.e(), b.qpn, o, a.qpn, o.sq_psn, o.rq_psn, to_a);
    if (o.type == QpType::Ud) {
        ah_a_to_b = *a.e().create_ah(a.pd, to_b);
        ah_b_to_a = *b.e().create_ah(b.pd, to_a);
    }
}

bool TwoNodes::run_until(const std::function<bool()>& done, uint64_t max_ns) {
    const auto r = sim.run_until(done, sim.now() + max_ns, 50'000'000);
    return r.done();
}

std::vector<WorkCompletion> TwoNodes::wait_cq(Endpoint& ep, uint32_t cq, size_t count, uint64_t max_ns) {
    std::vector<WorkCompletion> got;
    std::vector<WorkCompletion> batch(64);
    auto drain = [&] {
        int n;
        while ((n = ep.e().poll_cq(cq, batch)) > 0) got.insert(got.end(), batch.begin(), batch.begin() + n);
        return got.size() >= count;
    };
    run_until(drain, max_ns);
    drain();
    return got;
}

SendWr make_wr(WrOpcode op, uint64_t wr_id, std::vector<Sge> sges, uint32_t flags) {
    SendWr wr;
    wr.opcode = op;
    wr.wr_id = wr_id;
    wr.sg_list = std::move(sges);
    wr.send_flags = flags;
    return wr;
}

std::string describe(const WorkCompletion& wc) {
    std::ostringstream os;
    os << "wr_id=" << wc.wr_id << " status=" << wc_status_name(wc.status) << " opcode=" << wc_opcode_name(wc.opcode)
       << " len=" << wc.byte_len;
    return os.str();
}

void fill_pattern(std::vector<uint8_t>& v, uint32_t seed, size_t offset, size_t length) {
    const size_t end = length == SIZE_MAX ? v.size() : offset + length;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = offset; i < end; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = static_cast<uint8_t>(x);
    }
}

}  // namespace rnic::test
