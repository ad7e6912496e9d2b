// The ibv_* objects our libibverbs hands to applications. Each embeds rdma-core's public struct
// first (so the pointer the application holds is ours) and points at the client-library object
// that does the work. Applications compiled against rdma-core's verbs.h read these structs and
// call through `context->ops` and `verbs_context` in inline code, so the layouts below are the
// ABI and are checked against verbs.h at compile time.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <string>
#include <vector>

#include "rnic/host/abi/control.hpp"
#include "rnic/host/client/connection.hpp"

namespace rnic::shim {

namespace client = host::client;
namespace abi = host::abi;

// One running rnicd: its socket and what its Hello said when the device list was read. Devices
// live as long as the process (rdma-core keeps them while any context uses them; never freeing
// is the simple way to get that right).
struct Device {
    ibv_device dev{};
    std::string run_dir;
    std::string name;
    abi::HelloReply hello{};
    int index = 0;
};

// Standard layout (a raw owning pointer, deleted by ibv_close_device), so the application's
// ibv_context* converts back with offsetof.
struct Context {
    verbs_context vctx{};  // the application holds &vctx.context
    Device* device = nullptr;
    client::Connection* conn = nullptr;
};

struct Pd {
    ibv_pd pd{};
    client::Pd* impl = nullptr;
};

struct Mr {
    ibv_mr mr{};
    client::Mr* impl = nullptr;
};

// ibv_mw.handle is the daemon's window handle; ibv_mw.rkey the key the application last bound
// (ibv_bind_mw updates it, as rdma-core's rxe provider does).
struct Mw {
    ibv_mw mw{};
};

struct CompChannel {
    ibv_comp_channel channel{};
    client::CompChannel* impl = nullptr;
};

// ibv_cq is the prefix of ibv_cq_ex, so one object serves ibv_create_cq and ibv_create_cq_ex.
struct Cq {
    ibv_cq_ex cq{};
    client::Cq* impl = nullptr;
    bool extended = false;
    uint64_t wc_flags = 0;  // ibv_create_cq_ex's: which read_* the application may call
    abi::Cqe current{};     // the completion the extended poll is on
};

struct Srq {
    ibv_srq srq{};
    client::Srq* impl = nullptr;
};

struct Ah {
    ibv_ah ah{};
    client::Ah* impl = nullptr;
};

// The work requests an extended QP collects between ibv_wr_start and ibv_wr_complete. Pointers
// into the vectors are fixed up at complete time (the vectors may grow meanwhile).
struct WrBatch {
    std::vector<client::SendWr> wrs;
    std::vector<uint32_t> sge_start;  // per WR: first entry in `sges`
    std::vector<abi::Sge> sges;
    std::vector<uint8_t> inline_bytes;   // inline payloads, copied when the application sets them
    std::vector<uint32_t> inline_start;  // per WR: offset in `inline_bytes`, or kNoInline
    int error = 0;                       // the first error of the batch, returned by complete
    static constexpr uint32_t kNoInline = UINT32_MAX;
};

// ibv_qp is the prefix of ibv_qp_ex; rdma-core keeps them at one address (a union in struct
// verbs_qp), so ibv_qp_to_qp_ex returns the same pointer.
struct Qp {
    ibv_qp_ex qpx{};
    client::Qp* impl = nullptr;
    bool extended = false;  // created through create_qp_ex with send_ops_flags
    uint64_t send_ops = 0;  // enum ibv_qp_create_send_ops_flags allowed in the batch API
    std::mutex batch_lock;  // held from ibv_wr_start to ibv_wr_complete/abort, as providers do
    WrBatch batch;
};

// ---- recovering our objects from the application's pointers ----

inline Context* context_of(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(Context, vctx) -
                                      offsetof(verbs_context, context));
}
inline client::Connection& conn_of(ibv_context* c) {
    return *context_of(c)->conn;
}
inline Pd* pd_of(ibv_pd* p) {
    return reinterpret_cast<Pd*>(p);
}
inline Mr* mr_of(ibv_mr* m) {
    return reinterpret_cast<Mr*>(m);
}
inline Mw* mw_of(ibv_mw* m) {
    return reinterpret_cast<Mw*>(m);
}
inline CompChannel* channel_of(ibv_comp_channel* c) {
    return reinterpret_cast<CompChannel*>(c);
}
inline Cq* cq_of(ibv_cq* c) {
    return reinterpret_cast<Cq*>(c);
}
inline Cq* cq_of(ibv_cq_ex* c) {
    return reinterpret_cast<Cq*>(c);
}
inline Srq* srq_of(ibv_srq* s) {
    return reinterpret_cast<Srq*>(s);
}
inline Ah* ah_of(ibv_ah* a) {
    return reinterpret_cast<Ah*>(a);
}
inline Qp* qp_of(ibv_qp* q) {
    return reinterpret_cast<Qp*>(q);
}
inline Qp* qp_of(ibv_qp_ex* q) {
    return reinterpret_cast<Qp*>(q);
}
inline ibv_qp* ibv_of(Qp* q) {
    return &q->qpx.qp_base;
}
inline ibv_cq* ibv_of(Cq* c) {
    return ibv_cq_ex_to_cq(&c->cq);
}

// The verbs returning a pointer report failure as NULL with errno set; this keeps that one line.
template <class T>
T* fail_null(int error) {
    errno = error;
    return nullptr;
}

// Verbs that report errors as -1 + errno (ibv_get_cq_event, ibv_query_gid ...).
inline int fail_minus_one(int error) {
    errno = error;
    return -1;
}

// Optional tracing of failed verbs to stderr ($RNIC_VERBS_DEBUG=1): an application usually
// prints only "Couldn't create QP", which says nothing about why.
void trace_failure(const char* verb, int error);
bool tracing();

// The device list is refreshed by ibv_get_device_list; ibv_open_device connects.
ibv_context* open_context(Device& device);

// The GID table of a context: the daemon's, as its Hello listed it.
const abi::HelloReply& hello_of(ibv_context* c);

// ---- layout checks against rdma-core's verbs.h (the ABI the applications were built with) ----

// Every wrapper starts with its rdma-core struct and has no base class or virtual function, so
// the application's pointer is the wrapper's address (the casts above). Context is checked
// formally; the others hold C++ members (mutexes, vectors) that make offsetof ill-formed.
static_assert(std::is_standard_layout_v<Context> && offsetof(Context, vctx) == 0);
static_assert(offsetof(ibv_qp_ex, qp_base) == 0);
static_assert(offsetof(ibv_cq_ex, cqe) == offsetof(ibv_cq, cqe) &&
              offsetof(ibv_cq_ex, comp_events_completed) == offsetof(ibv_cq, comp_events_completed) &&
              offsetof(ibv_cq_ex, async_events_completed) == offsetof(ibv_cq, async_events_completed));
static_assert(sizeof(ibv_sge) == sizeof(abi::Sge) && offsetof(ibv_sge, addr) == offsetof(abi::Sge, addr) &&
              offsetof(ibv_sge, length) == offsetof(abi::Sge, length) &&
              offsetof(ibv_sge, lkey) == offsetof(abi::Sge, lkey));
// The sizes docs/verbs_shim.md measured on rdma-core 44 (x86-64); a different verbs.h fails here.
static_assert(sizeof(verbs_context) == 648 && offsetof(verbs_context, sz) == 312 &&
              offsetof(verbs_context, context) == 320);
static_assert(sizeof(ibv_context) == 328 && offsetof(ibv_context, ops) == 8 && offsetof(ibv_context, cmd_fd) == 264 &&
              offsetof(ibv_context, async_fd) == 268 && offsetof(ibv_context, num_comp_vectors) == 272 &&
              offsetof(ibv_context, abi_compat) == 320);
static_assert(offsetof(ibv_context, ops) + offsetof(ibv_context_ops, poll_cq) == 8 + 88 &&
              offsetof(ibv_context_ops, req_notify_cq) == 96 && offsetof(ibv_context_ops, post_srq_recv) == 160 &&
              offsetof(ibv_context_ops, post_send) == 200 && offsetof(ibv_context_ops, post_recv) == 208);
static_assert(sizeof(ibv_qp_ex) == 352 && offsetof(ibv_qp_ex, wr_id) == 168 && offsetof(ibv_qp_ex, wr_flags) == 176 &&
              offsetof(ibv_qp_ex, wr_atomic_cmp_swp) == 184 && offsetof(ibv_qp_ex, wr_rdma_write) == 224 &&
              offsetof(ibv_qp_ex, wr_send) == 240 && offsetof(ibv_qp_ex, wr_set_ud_addr) == 272 &&
              offsetof(ibv_qp_ex, wr_set_inline_data) == 288 && offsetof(ibv_qp_ex, wr_set_sge) == 304 &&
              offsetof(ibv_qp_ex, wr_start) == 320 && offsetof(ibv_qp_ex, wr_complete) == 328 &&
              offsetof(ibv_qp_ex, wr_abort) == 336);
static_assert(sizeof(ibv_qp) == 160 && offsetof(ibv_qp, qp_num) == 52 && offsetof(ibv_qp, state) == 56 &&
              offsetof(ibv_qp, qp_type) == 60);
static_assert(sizeof(ibv_cq) == 128 && sizeof(ibv_srq) == 128 && sizeof(ibv_ah) == 24 && sizeof(ibv_pd) == 16 &&
              sizeof(ibv_mr) == 48 && sizeof(ibv_comp_channel) == 16);
static_assert(sizeof(ibv_device) == 664 && offsetof(ibv_device, node_type) == 16 && offsetof(ibv_device, name) == 24 &&
              offsetof(ibv_device, ibdev_path) == 408);
static_assert(sizeof(ibv_device_attr) == 232 && sizeof(ibv_device_attr_ex) == 400 && sizeof(ibv_port_attr) == 52 &&
              sizeof(ibv_qp_init_attr_ex) == 136 && sizeof(ibv_wc) == 48 && sizeof(ibv_send_wr) == 128 &&
              sizeof(ibv_recv_wr) == 32 && sizeof(ibv_gid_entry) == 32 && offsetof(ibv_gid_entry, gid_type) == 24);
static_assert(offsetof(ibv_port_attr, link_layer) == 46);

}  // namespace rnic::shim
