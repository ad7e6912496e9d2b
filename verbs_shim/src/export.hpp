// What the drop-in library exports. Everything is hidden by default (-fvisibility=hidden and the
// version script's `local: *`); a verb is public only when it carries RNIC_EXPORT *and* the
// version script names it under rdma-core's version node.
#pragma once

#define RNIC_EXPORT extern "C" __attribute__((visibility("default")))
