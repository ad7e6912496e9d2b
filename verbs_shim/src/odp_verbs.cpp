// On-demand paging at the verbs level: ibv_advise_mr (verbs_context's advise_mr slot). The
// registration itself is ibv_reg_mr with IBV_ACCESS_ON_DEMAND (memory_verbs.cpp passes it on;
// the client library and rnicd do the rest, docs/host_interface.md "On-demand regions").
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge) {
    if (pd == nullptr) return EINVAL;
    // ibv_sge and the ABI's SGE share a layout (static_assert in shim_objects.hpp).
    return conn_of(pd->context)
        .advise_mr(pd_of(pd)->impl, static_cast<uint32_t>(advice), flags, reinterpret_cast<const abi::Sge*>(sg_list),
                   num_sge);
}

}  // namespace rnic::shim
