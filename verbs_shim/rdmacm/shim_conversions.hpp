// The libibverbs shim's conversions between rdma-core's attribute structs and the host
// interface's (verbs_shim/src/attr_convert.cpp, compiled into this library too): CmInitQpAttr
// replies and event address vectors reach the application as ibv_qp_attr and ibv_ah_attr.
#pragma once

#include "shim_objects.hpp"
#include "verbs_ops.hpp"
