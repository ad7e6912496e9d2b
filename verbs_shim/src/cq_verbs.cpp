// Completion channels, CQs (plain and extended) and polling. Polling reads CQEs from the ring
// the daemon writes, without a syscall; completion events arrive on the channel's socket.
#include <algorithm>
#include <cstring>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

constexpr int kPollChunk = 16;  // CQEs converted per client call, from a stack buffer

// The wc_flags ibv_create_cq_ex can honour: every field of struct ibv_wc and the completion
// timestamp (rnicd's clock, see Cqe::completion_ts_ns). Wall-clock timestamps, CVLAN, flow tags
// and tag matching need hardware-side data rnicd does not produce.
constexpr uint64_t kSupportedWcFlags =
    uint64_t{IBV_WC_STANDARD_FLAGS} | uint64_t{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};

ibv_cq_ex* make_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector,
                   bool extended, uint64_t wc_flags) try {
    if (context == nullptr || cqe < 1) return fail_null<ibv_cq_ex>(EINVAL);
    if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) return fail_null<ibv_cq_ex>(EINVAL);
    if (channel != nullptr && channel->context != context) return fail_null<ibv_cq_ex>(EINVAL);
    auto* c = new (std::nothrow) Cq();
    if (c == nullptr) return fail_null<ibv_cq_ex>(ENOMEM);
    auto r = conn_of(context).create_cq(static_cast<uint32_t>(cqe), channel ? channel_of(channel)->impl : nullptr,
                                        static_cast<uint32_t>(comp_vector));
    if (!r) {
        delete c;
        trace_failure("ibv_create_cq", r.error());
        return fail_null<ibv_cq_ex>(r.error());
    }
    c->impl = *r;
    c->impl->user = c;
    c->extended = extended;
    c->wc_flags = wc_flags;
    ibv_cq_ex& x = c->cq;
    x.context = context;
    x.channel = channel;
    x.cq_context = cq_context;
    x.handle = c->impl->handle;
    x.cqe = static_cast<int>(c->impl->cqe);
    pthread_mutex_init(&x.mutex, nullptr);
    pthread_cond_init(&x.cond, nullptr);
    if (extended) install_cq_ex_ops(x);
    if (channel != nullptr) ++channel->refcnt;
    return &x;
} catch (...) {
    return fail_null<ibv_cq_ex>(ENOMEM);
}

// ---- the extended CQ's polling functions (ibv_start_poll / ibv_next_poll / ibv_wc_read_*) ----

int take_one(ibv_cq_ex* current) {
    Cq* c = cq_of(current);
    const int n = conn_of(current->context).poll_cq(c->impl, 1, &c->current);
    if (n < 0) return -n;
    if (n == 0) return ENOENT;
    current->status = static_cast<ibv_wc_status>(c->current.status);
    current->wr_id = c->current.wr_id;
    return 0;
}

int start_poll(ibv_cq_ex* current, ibv_poll_cq_attr* attr) {
    if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
    return take_one(current);
}
int next_poll(ibv_cq_ex* current) {
    return take_one(current);
}
void end_poll(ibv_cq_ex*) {}  // every take already released its ring slot

const abi::Cqe& cur(ibv_cq_ex* c) {
    return cq_of(c)->current;
}
ibv_wc_opcode read_opcode(ibv_cq_ex* c) {
    return static_cast<ibv_wc_opcode>(cur(c).opcode);
}
uint32_t read_vendor_err(ibv_cq_ex* c) {
    return cur(c).vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex* c) {
    return cur(c).byte_len;
}
__be32 read_imm_data(ibv_cq_ex* c) {
    return cur(c).imm_data;
}
uint32_t read_qp_num(ibv_cq_ex* c) {
    return cur(c).qp_num;
}
uint32_t read_src_qp(ibv_cq_ex* c) {
    return cur(c).src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex* c) {
    return cur(c).wc_flags;
}
uint32_t read_slid(ibv_cq_ex* c) {
    return cur(c).slid;
}
uint8_t read_sl(ibv_cq_ex* c) {
    return cur(c).sl;
}
uint8_t read_dlid_path_bits(ibv_cq_ex* c) {
    return cur(c).dlid_path_bits;
}
uint64_t read_completion_ts(ibv_cq_ex* c) {
    return cur(c).completion_ts_ns;
}

}  // namespace

void install_cq_ex_ops(ibv_cq_ex& x) {
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = read_opcode;
    x.read_vendor_err = read_vendor_err;
    x.read_byte_len = read_byte_len;
    x.read_imm_data = read_imm_data;
    x.read_qp_num = read_qp_num;
    x.read_src_qp = read_src_qp;
    x.read_wc_flags = read_wc_flags;
    x.read_slid = read_slid;
    x.read_sl = read_sl;
    x.read_dlid_path_bits = read_dlid_path_bits;
    x.read_completion_ts = read_completion_ts;
    // read_cvlan, read_flow_tag, read_tm_info and read_completion_wallclock_ns stay NULL:
    // create_cq_ex refuses the flags that would allow calling them.
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
    if (num_entries <= 0) return 0;
    Cq* c = cq_of(cq);
    client::Connection& conn = conn_of(cq->context);
    abi::Cqe buf[kPollChunk];
    int total = 0;
    while (total < num_entries) {
        const int want = std::min(kPollChunk, num_entries - total);
        const int n = conn.poll_cq(c->impl, want, buf);
        if (n < 0) return total > 0 ? total : n;
        for (int i = 0; i < n; ++i) to_ibv(buf[i], wc[total + i]);
        total += n;
        if (n < want) break;
    }
    return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
    return conn_of(cq->context).req_notify_cq(cq_of(cq)->impl, solicited_only != 0);
}

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
    if (attr == nullptr) return fail_null<ibv_cq_ex>(EINVAL);
    if (attr->comp_mask & ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
        return fail_null<ibv_cq_ex>(EINVAL);
    // A parent domain (thread domains) is not offered: alloc_parent_domain is absent.
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain != nullptr)
        return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    // SINGLE_THREADED and IGNORE_OVERRUN are hints; the CQ is correct without acting on them.
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
        (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))
        return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    if (attr->wc_flags & ~kSupportedWcFlags) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    return make_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                   static_cast<int>(attr->comp_vector), true, attr->wc_flags);
}

}  // namespace rnic::shim

using namespace rnic::shim;

RNIC_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    if (context == nullptr) return fail_null<ibv_comp_channel>(EINVAL);
    auto* ch = new (std::nothrow) CompChannel();
    if (ch == nullptr) return fail_null<ibv_comp_channel>(ENOMEM);
    auto r = conn_of(context).create_comp_channel();
    if (!r) {
        delete ch;
        trace_failure("ibv_create_comp_channel", r.error());
        return fail_null<ibv_comp_channel>(r.error());
    }
    ch->impl = *r;
    ch->channel.context = context;
    ch->channel.fd = (*r)->fd;
    ch->channel.refcnt = 0;
    return &ch->channel;
}

RNIC_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
    if (channel == nullptr) return EINVAL;
    if (channel->refcnt != 0) return EBUSY;  // CQs still use it (rdma-core's rule)
    if (const int rc = conn_of(channel->context).destroy_comp_channel(channel_of(channel)->impl); rc != 0) return rc;
    delete channel_of(channel);
    return 0;
}

RNIC_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                                  int comp_vector) {
    ibv_cq_ex* x = make_cq(context, cqe, cq_context, channel, comp_vector, false, IBV_WC_STANDARD_FLAGS);
    return x != nullptr ? ibv_cq_ex_to_cq(x) : nullptr;
}

RNIC_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
    if (cq == nullptr) return EINVAL;
    ibv_comp_channel* channel = cq->channel;
    // Waits until every completion event handed out was acknowledged, as rdma-core does.
    if (const int rc = conn_of(cq->context).destroy_cq(cq_of(cq)->impl); rc != 0) return rc;
    if (channel != nullptr) --channel->refcnt;
    pthread_cond_destroy(&cq->cond);
    pthread_mutex_destroy(&cq->mutex);
    delete cq_of(cq);
    return 0;
}

// A new ring from the daemon with the unpolled completions first (docs/host_interface.md,
// "Resizing a CQ"); EINVAL below the completions the CQ holds or past max_cqe, as rxe.
RNIC_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
    if (cq == nullptr || cqe < 1) return EINVAL;
    Cq* c = cq_of(cq);
    if (const int rc = conn_of(cq->context).resize_cq(c->impl, static_cast<uint32_t>(cqe)); rc != 0) {
        trace_failure("ibv_resize_cq", rc);
        return rc;
    }
    cq->cqe = static_cast<int>(c->impl->cqe);
    return 0;
}

RNIC_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    if (channel == nullptr || cq == nullptr || cq_context == nullptr) return fail_minus_one(EINVAL);
    auto r = conn_of(channel->context).get_cq_event(channel_of(channel)->impl);
    if (!r) return fail_minus_one(r.error());
    auto* c = static_cast<Cq*>((*r)->user);
    *cq = ibv_of(c);
    *cq_context = c->cq.cq_context;
    return 0;
}

RNIC_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    if (cq == nullptr || nevents == 0) return;
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_mutex_unlock(&cq->mutex);
    conn_of(cq->context).ack_cq_events(cq_of(cq)->impl, nevents);
}
