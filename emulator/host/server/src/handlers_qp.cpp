// The ops on QPs: CreateQp, ModifyQp (which may wait for ARP or ND), QueryQp, DestroyQp.
#include <algorithm>
#include <cerrno>
#include <memory>

#include "address_vector.hpp"
#include "control_request.hpp"

namespace rnic::host::server {
namespace {

using namespace rnic::host::abi;
namespace tp = rnic::transport;
// The address vector's conversions (address_vector.hpp) beside the QP attributes' below.
using server::to_abi;
using server::to_engine;

tp::QpAttributes to_engine(const QpAttr& a) {
    tp::QpAttributes q;
    q.qp_state = static_cast<tp::QpState>(a.qp_state);
    q.cur_qp_state = static_cast<tp::QpState>(a.cur_qp_state);
    q.path_mtu = static_cast<tp::Mtu>(a.path_mtu);
    q.qkey = a.qkey;
    q.rq_psn = a.rq_psn;
    q.sq_psn = a.sq_psn;
    q.dest_qp_num = a.dest_qp_num;
    q.qp_access_flags = a.qp_access_flags;
    q.cap = {a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge, a.cap.max_inline_data};
    q.ah_attr = to_engine(a.ah_attr);
    q.pkey_index = a.pkey_index;
    q.en_sqd_async_notify = a.en_sqd_async_notify;
    q.sq_draining = a.sq_draining;
    q.max_rd_atomic = a.max_rd_atomic;
    q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    q.min_rnr_timer = a.min_rnr_timer;
    q.port_num = a.port_num;
    q.timeout = a.timeout;
    q.retry_cnt = a.retry_cnt;
    q.rnr_retry = a.rnr_retry;
    return q;
}

QpCaps to_abi(const tp::QpCap& c) {
    return {c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}

QpAttr to_abi(const tp::QpAttributes& q) {
    QpAttr a{};
    a.qp_state = static_cast<uint32_t>(q.qp_state);
    a.cur_qp_state = static_cast<uint32_t>(q.cur_qp_state);
    a.path_mtu = static_cast<uint32_t>(q.path_mtu);
    a.qkey = q.qkey;
    a.rq_psn = q.rq_psn;
    a.sq_psn = q.sq_psn;
    a.dest_qp_num = q.dest_qp_num;
    a.qp_access_flags = q.qp_access_flags;
    a.cap = to_abi(q.cap);
    a.ah_attr = to_abi(q.ah_attr);
    a.pkey_index = q.pkey_index;
    a.en_sqd_async_notify = q.en_sqd_async_notify;
    a.sq_draining = q.sq_draining;
    a.max_rd_atomic = q.max_rd_atomic;
    a.max_dest_rd_atomic = q.max_dest_rd_atomic;
    a.min_rnr_timer = q.min_rnr_timer;
    a.port_num = q.port_num;
    a.timeout = q.timeout;
    a.retry_cnt = q.retry_cnt;
    a.rnr_retry = q.rnr_retry;
    return a;
}

}  // namespace

void HostService::Impl::on_create_qp(Request& rq, const CreateQpRequest& req) {
    Session& s = rq.s;
    if (!s.pds.count(req.pd) || !s.cqs.count(req.send_cq) || !s.cqs.count(req.recv_cq) ||
        (req.srq && !s.srqs.count(req.srq)))
        return rq.fail(EINVAL);
    tp::QpInitAttr init;
    init.qp_type = static_cast<tp::QpType>(req.qp_type);
    init.pd = req.pd;
    init.send_cq = req.send_cq;
    init.recv_cq = req.recv_cq;
    if (req.srq) init.srq = req.srq;
    init.cap = {req.cap.max_send_wr, req.cap.max_recv_wr, req.cap.max_send_sge, req.cap.max_recv_sge,
                req.cap.max_inline_data};
    // As rxe does, a send queue takes inline data as large as its scatter list (16 bytes an
    // entry) even when less was asked: rdma-core's rdma_xclient posts 16 inline bytes on a QP
    // created with max_inline_data 0. The grant comes back in the reply's caps.
    const uint64_t by_sges =
        std::min<uint64_t>(uint64_t{req.cap.max_send_sge} * 16, engine.query_device().limits.max_inline_data);
    init.cap.max_inline_data = std::max(init.cap.max_inline_data, static_cast<uint32_t>(by_sges));
    init.sq_sig_all = req.sq_sig_all != 0;
    if (int rc = charge(s, Resource::Qps); rc) return rq.fail(rc);
    const auto info = engine.create_qp(init);
    if (!info) {
        uncharge(s, Resource::Qps);
        return rq.fail(info.error());
    }
    const tp::QpCap& cap = info->cap;
    auto qp = std::make_unique<HostQp>();
    const uint32_t sq_size = round_up_power_of_two(std::max<uint32_t>(cap.max_send_wr, 1));
    const uint32_t sq_stride = send_stride(cap.max_send_sge, cap.max_inline_data);
    const uint32_t rq_size = req.srq ? 0 : round_up_power_of_two(std::max<uint32_t>(cap.max_recv_wr, 1));
    const uint32_t rq_stride = req.srq ? 0 : recv_stride(cap.max_recv_sge);
    const size_t rq_offset = page_round(ring_bytes(sq_size, sq_stride));
    const size_t total = rq_offset + (req.srq ? 0 : page_round(ring_bytes(rq_size, rq_stride)));
    if (int rc = qp->memory.create("rnic-qp", total); rc) {
        engine.destroy_qp(info->qpn);
        uncharge(s, Resource::Qps);
        return rq.fail(rc);
    }
    qp->sq.ring = init_ring(qp->memory.data(), sq_size, sq_stride);
    qp->sq.max_sge = cap.max_send_sge;
    qp->sq.max_inline = cap.max_inline_data;
    qp->sq.wr_ids.assign(sq_size, 0);
    if (!req.srq) {
        qp->rq.ring = init_ring(qp->memory.data() + rq_offset, rq_size, rq_stride);
        qp->rq.max_sge = cap.max_recv_sge;
        qp->rq.wr_ids.assign(rq_size, 0);
    }
    qp->qpn = info->qpn;
    if (int rc = charge_queue_memory(s, qp->memory.size() + engine.qp_storage_bytes(info->qpn), qp->pinned_pages); rc) {
        engine.destroy_qp(info->qpn);
        uncharge(s, Resource::Qps);
        return rq.fail(rc);
    }
    qp->doorbell = s.take_doorbell({info->qpn, false});
    if (qp->doorbell == UINT32_MAX) {
        pinned->release(s.process, qp->pinned_pages);
        engine.destroy_qp(info->qpn);
        uncharge(s, Resource::Qps);
        return rq.fail(ENOMEM);
    }
    qp->owner = &s;
    qp->type = init.qp_type;
    qp->pd = req.pd;
    qp->send_cq = req.send_cq;
    qp->recv_cq = req.recv_cq;
    qp->srq = req.srq;
    qp->sq_sig_all = init.sq_sig_all;
    qp->init_cap = to_abi(cap);
    CreateQpReply out{};
    out.qpn = info->qpn;
    out.cap = to_abi(cap);
    out.sq_size = sq_size;
    out.sq_stride = sq_stride;
    out.rq_size = rq_size;
    out.rq_stride = rq_stride;
    out.rq_offset = req.srq ? 0 : static_cast<uint32_t>(rq_offset);
    out.ring_bytes = static_cast<uint32_t>(qp->memory.size());
    out.doorbell = qp->doorbell;
    const int out_fd = qp->memory.take_fd();
    s.qps.insert(info->qpn);
    qps.emplace(info->qpn, std::move(qp));
    rq.ok_closing(out, out_fd);
}

void HostService::Impl::on_modify_qp(Request& rq, const ModifyQpRequest& req) {
    if (!rq.s.qps.count(req.qpn)) return rq.fail(EINVAL);  // QPNs are global, but owner-only
    if ((req.attr_mask & tp::QpAttr::State) && req.attr.qp_state > uint32_t(tp::QpState::Err)) return rq.fail(EINVAL);
    wire::MacAddr mac{};
    if (req.attr_mask & tp::QpAttr::Av) {
        wire::Gid dgid;
        if (int rc = av_target(engine, req.attr.ah_attr, dgid); rc) return rq.fail(rc);
        const Resolution r = resolver ? resolver(dgid, now_ns, mac) : Resolution::Unreachable;
        // Replied to from the poll loop once ARP or ND answers (or gives up).
        if (r != Resolution::Resolved) return defer(rq, dgid, r, mac);
    }
    on_modify_qp_resolved(rq, req, mac);
}

// With the destination's MAC, when the attributes name one (else zeros, unused).
void HostService::Impl::on_modify_qp_resolved(Request& rq, const ModifyQpRequest& req, const wire::MacAddr& mac) {
    tp::QpAttributes a = to_engine(req.attr);
    a.ah_attr.dmac = mac;
    const int rc = engine.modify_qp(req.qpn, a, req.attr_mask);
    if (rc == 0) after_modify(*qps.at(req.qpn));
    rq.fail(rc);
}

void HostService::Impl::on_query_qp(Request& rq, const QueryQpRequest& req) {
    Session& s = rq.s;
    if (!s.qps.count(req.qpn)) return rq.fail(EINVAL);
    tp::QpAttributes a{};
    if (int rc = engine.query_qp(req.qpn, a); rc) return rq.fail(rc);
    const HostQp& qp = *qps.at(req.qpn);
    QueryQpReply out{};
    out.attr = to_abi(a);
    out.init_cap = qp.init_cap;
    out.qp_type = static_cast<uint32_t>(qp.type);
    out.sq_sig_all = qp.sq_sig_all;
    out.send_cq = qp.send_cq;
    out.recv_cq = qp.recv_cq;
    out.srq = qp.srq;
    rq.ok(out);
}

void HostService::Impl::on_destroy_qp(Request& rq, const HandleRequest& req) {
    Session& s = rq.s;
    if (!s.qps.count(req.handle)) return rq.fail(EINVAL);
    const int rc = engine.destroy_qp(req.handle);
    if (rc == 0) {
        s.release_doorbell(qps.at(req.handle)->doorbell);
        pinned->release(s.process, qps.at(req.handle)->pinned_pages);
        s.qps.erase(req.handle);
        qps.erase(req.handle);
        uncharge(s, Resource::Qps);
    }
    rq.fail(rc);
}

}  // namespace rnic::host::server
