// ibv_query_device(_ex), ibv_query_port, the GID and P_Key tables. The device and GID table are
// what the daemon's Hello said (they do not change while it runs); the port is asked again each
// time, as its state and MTU can change.
#include <endian.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

#undef ibv_query_port

namespace rnic::shim {

namespace {

constexpr uint8_t kPort = 1;  // one port per rnicd
constexpr uint16_t kDefaultPkey = 0xffff;

bool gid_index_valid(ibv_context* c, uint32_t index) {
    return index < hello_of(c).gid_count;
}

}  // namespace

int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t attr_len) {
    if (context == nullptr || attr == nullptr) return EINVAL;
    if (port_num != kPort) return EINVAL;
    auto port = conn_of(context).query_port(port_num);
    if (!port) return port.error();
    ibv_port_attr full{};
    to_ibv(*port, full);
    // Callers built against older headers pass a shorter struct: write only what they have.
    std::memcpy(attr, &full, std::min(attr_len, sizeof full));
    return 0;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
    if (context == nullptr || attr == nullptr) return EINVAL;
    if (input != nullptr && input->comp_mask != 0) return EINVAL;
    if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
    ibv_device_attr_ex full{};
    to_ibv(conn_of(context).device_attr(), full.orig_attr);
    // IBTA 1.5 (the kernel's IB_UVERBS_DEVICE_* bits): FLUSH to global visibility and ATOMIC
    // WRITE. Not FLUSH_PERSISTENT (bit 39): no persistent memory behind any region.
    constexpr uint64_t kFlushGlobal = 1ull << 38, kAtomicWrite = 1ull << 40;
    full.device_cap_flags_ex = full.orig_attr.device_cap_flags | kFlushGlobal | kAtomicWrite;
    full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
    // Completion timestamps count rnicd's CLOCK_MONOTONIC nanoseconds: a 1 GHz clock that does
    // not wrap in practice. No TSO, RSS, packet pacing, tag matching or device memory: all
    // zero, which is how applications learn a capability is absent.
    // On-demand paging (docs/host_interface.md): explicit and implicit regions; SEND/RECV,
    // WRITE and READ reach them, atomics do not (refused on ODP regions).
    full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    full.odp_caps.per_transport_caps.rc_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
        IBV_ODP_SUPPORT_SRQ_RECV;
    full.odp_caps.per_transport_caps.uc_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
    full.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
    full.completion_timestamp_mask = ~uint64_t{0};
    full.hca_core_clock = kDeviceClockKhz;
    std::memcpy(attr, &full, std::min(attr_size, sizeof full));
    return 0;
}

// The device clock is the host's CLOCK_MONOTONIC, which rnicd reads on the same machine, so the
// application can sample it itself.
int query_rt_values(ibv_context* context, ibv_values_ex* values) {
    if (context == nullptr || values == nullptr) return EINVAL;
    // As providers do: fill what was asked and we know, and say in comp_mask what was filled.
    uint32_t filled = 0;
    if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
        clock_gettime(CLOCK_MONOTONIC, &values->raw_clock);
        filled |= IBV_VALUES_MASK_RAW_CLOCK;
    }
    values->comp_mask = filled;
    return 0;
}

}  // namespace rnic::shim

using namespace rnic::shim;

RNIC_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
    if (context == nullptr || device_attr == nullptr) return EINVAL;
    to_ibv(conn_of(context).device_attr(), *device_attr);
    return 0;
}

// The exported symbol is the old ABI: applications built with today's verbs.h reach query_port
// through verbs_context (the inline ___ibv_query_port), older ones land here with a struct that
// ends at `flags` (rdma-core's struct _compat_ibv_port_attr).
RNIC_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
    return query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                      offsetof(ibv_port_attr, flags) + sizeof(uint8_t));
}

RNIC_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
    if (context == nullptr || gid == nullptr || port_num != 1 || index < 0 ||
        !gid_index_valid(context, static_cast<uint32_t>(index)))
        return fail_minus_one(EINVAL);
    std::memcpy(gid->raw, hello_of(context).gids[index], sizeof gid->raw);
    return 0;
}

RNIC_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                                  uint32_t flags, size_t entry_size) {
    if (context == nullptr || entry == nullptr || flags != 0 || port_num != 1 || entry_size < sizeof(ibv_gid_entry))
        return EINVAL;
    if (!gid_index_valid(context, gid_index)) return EINVAL;
    *entry = {};
    std::memcpy(entry->gid.raw, hello_of(context).gids[gid_index], sizeof entry->gid.raw);
    entry->gid_index = gid_index;
    entry->port_num = port_num;
    entry->gid_type = hello_of(context).gid_types[gid_index];  // RoCE v2 (UDP 4791) for every GID of rnicd
    entry->ndev_ifindex = 0;                 // the port's netdev lives in rnicd's namespace, not ours
    return 0;
}

RNIC_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                                         uint32_t flags, size_t entry_size) {
    if (context == nullptr || entries == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
    const uint32_t count = hello_of(context).gid_count;
    if (max_entries < count) return -EINVAL;
    for (uint32_t i = 0; i < count; ++i) {
        auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * entry_size);
        if (const int rc = _ibv_query_gid_ex(context, 1, i, e, 0, entry_size); rc != 0) return -rc;
    }
    return count;
}

// rdma-core's private helper (IBVERBS_PRIVATE_34) that ibv_devinfo uses to print "RoCE v2".
// Its type is enum ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2.
RNIC_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
    if (context == nullptr || type == nullptr || port_num != 1 || !gid_index_valid(context, index))
        return fail_minus_one(EINVAL);
    *type = hello_of(context).gid_types[index] == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
    return 0;
}

RNIC_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
    // RoCE has one P_Key, the default full-membership 0xffff.
    if (context == nullptr || pkey == nullptr || port_num != 1 || index != 0) return fail_minus_one(EINVAL);
    *pkey = htobe16(kDefaultPkey);
    return 0;
}

RNIC_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
    if (context == nullptr || port_num != 1) return fail_minus_one(EINVAL);
    // Membership bit ignored, as rdma-core compares the low 15 bits.
    if ((be16toh(pkey) & 0x7fff) == (kDefaultPkey & 0x7fff)) return 0;
    return fail_minus_one(ENOENT);
}
