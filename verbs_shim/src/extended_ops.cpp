// The verbs_context slots our devices fill. A slot left NULL makes rdma-core's inline wrapper
// answer EOPNOTSUPP by itself (verbs_get_ctx_op), which is the right answer for XRC domains,
// flow steering, counters, device memory, work queues, parent domains and the rest.
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

void install_extended_ops(verbs_context& v) {
    v.query_port = query_port;
    v.query_device_ex = query_device_ex;
    v.query_rt_values = query_rt_values;
    v.create_cq_ex = create_cq_ex;
    v.create_qp_ex = create_qp_ex;
    v.create_srq_ex = create_srq_ex;
    v.advise_mr = advise_mr;
}

}  // namespace rnic::shim
