// The device registry (devices.hpp) and rdma_get_devices / rdma_free_devices.
#include "devices.hpp"

#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>

#include "export.hpp"

namespace rnic::rdmacm {

namespace {

std::mutex registry_lock;

// Never freed: ids, events and applications keep pointers to devices and their contexts.
std::deque<CmDevice>& registry() {
    static auto* devices = new std::deque<CmDevice>();
    return *devices;
}

bool dead_locked(CmDevice& d) {
    return d.dead.load(std::memory_order_acquire) || (d.conn != nullptr && d.conn->dead());
}

// Our libibverbs names each device's socket <run_dir>/<name>.sock in dev_path.
std::string run_dir_of(const ibv_device* dev) {
    const std::string_view path = dev->dev_path;
    const std::string suffix = "/" + std::string(dev->name) + ".sock";
    if (path.size() > suffix.size() && path.ends_with(suffix))
        return std::string(path.substr(0, path.size() - suffix.size()));
    return client::default_run_dir();
}

// librdmacm's sync_devices_list: devices our libibverbs lists now, added once each; a device
// whose daemon died and came back is a new entry.
int sync_locked() {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) return ENODEV;
    for (int i = 0; i < count; ++i) {
        bool known = false;
        for (CmDevice& d : registry())
            if (d.ibdev == list[i] && !dead_locked(d)) known = true;
        if (known) continue;
        CmDevice& d = registry().emplace_back();
        d.ibdev = list[i];
        d.name = list[i]->name;
        d.run_dir = run_dir_of(list[i]);
    }
    ibv_free_device_list(list);
    return count > 0 ? 0 : ENODEV;
}

int open_locked(CmDevice& d) try {
    if (d.opened) return dead_locked(d) ? ENODEV : 0;
    if (dead_locked(d)) return ENODEV;
    ibv_context* verbs = ibv_open_device(d.ibdev);
    if (verbs == nullptr) {
        d.dead = true;
        return ENODEV;
    }
    ibv_device_attr attr{};
    auto conn = ibv_query_device(verbs, &attr) == 0
                    ? client::Connection::open(d.name, d.run_dir)
                    : client::Result<std::unique_ptr<client::Connection>>(client::Error{ENODEV});
    if (!conn) {
        ibv_close_device(verbs);
        d.dead = true;
        return ENODEV;
    }
    d.verbs = verbs;
    d.conn = std::move(*conn);
    d.port_count = attr.phys_port_cnt;
    d.max_qpsize = static_cast<uint32_t>(attr.max_qp_wr);
    d.max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
    d.max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
    // The prefix lengths travel only in the Stats document; without them each address stands
    // for itself and routing falls back to "first device of the family".
    std::vector<DeviceAddress> prefixes;
    if (auto stats = d.conn->stats(abi::kStatsDevice)) prefixes = parse_stats_prefixes(*stats);
    const abi::HelloReply& hello = d.conn->hello();
    d.addresses = device_addresses(std::span<const uint8_t[16]>(hello.gids, hello.gid_count), prefixes);
    d.opened = true;
    return 0;
} catch (...) {
    return ENOMEM;
}

std::vector<CmDevice*> open_all_locked() {
    std::vector<CmDevice*> out;
    (void)sync_locked();
    for (CmDevice& d : registry())
        if (open_locked(d) == 0) out.push_back(&d);
    return out;
}

// Whether this host's kernel has `a` on one of its interfaces (a UDP socket binds to it).
bool kernel_has(const abi::CmAddress& a) {
    sockaddr_storage ss;
    abi::CmAddress probe = a;
    probe.port = 0;
    to_sockaddr(probe, ss);
    const int fd = socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&ss), address_length(reinterpret_cast<sockaddr*>(&ss))) == 0;
    close(fd);
    return ok;
}

}  // namespace

int fail(int error) {
    errno = error;
    return -1;
}

int device_error(int error) {
    return error == EIO ? ENODEV : error;
}

Id* CmDevice::find_id(uint32_t handle) {
    std::lock_guard lock(ids_lock);
    const auto it = ids.find(handle);
    return it == ids.end() ? nullptr : it->second;
}

Id* CmDevice::claim_event(uint32_t handle) {
    std::lock_guard lock(ids_lock);
    const auto it = ids.find(handle);
    if (it == ids.end()) return nullptr;
    std::lock_guard id_lock(it->second->mut);
    ++it->second->events_handed;
    return it->second;
}

void complete_event(Id& id) {
    std::lock_guard lock(id.mut);
    ++id.events_completed;
    id.cond.notify_all();
}

int init_devices() {
    std::lock_guard lock(registry_lock);
    for (CmDevice& d : registry())
        if (!dead_locked(d)) return 0;
    return sync_locked();
}

std::vector<CmDevice*> open_devices() {
    std::lock_guard lock(registry_lock);
    return open_all_locked();
}

int open_device(CmDevice& dev) {
    std::lock_guard lock(registry_lock);
    return open_locked(dev);
}

int device_owning(const abi::CmAddress& addr, CmDevice** out) {
    std::vector<CmDevice*> devices = open_devices();
    std::vector<std::vector<DeviceAddress>> addresses;
    for (CmDevice* d : devices) addresses.push_back(d->addresses);
    if (auto i = owner_of(addresses, addr)) {
        *out = devices[*i];
        return 0;
    }
    return kernel_has(addr) ? ENODEV : EADDRNOTAVAIL;
}

int device_routing(const abi::CmAddress& dst, const std::vector<CmDevice*>& among, CmDevice** out) {
    if (among.empty()) return ENODEV;
    std::vector<std::vector<DeviceAddress>> addresses;
    for (CmDevice* d : among) addresses.push_back(d->addresses);
    if (auto i = route_to(addresses, dst)) {
        *out = among[*i];
        return 0;
    }
    return ENETUNREACH;
}

void mark_dead(CmDevice& dev) {
    dev.dead.store(true, std::memory_order_release);
}

bool is_dead(CmDevice& dev) {
    return dead_locked(dev);
}

ibv_pd* acquire_pd(CmDevice& dev) {
    std::lock_guard lock(registry_lock);
    if (dev.pd == nullptr) {
        dev.pd = ibv_alloc_pd(dev.verbs);
        if (dev.pd == nullptr) return nullptr;
    }
    ++dev.pd_users;
    return dev.pd;
}

void release_pd(CmDevice& dev) {
    std::lock_guard lock(registry_lock);
    if (--dev.pd_users > 0 || dev.pd == nullptr) return;
    // An application may still hold MRs on it (EBUSY): then it stays for the next id.
    if (ibv_dealloc_pd(dev.pd) == 0) dev.pd = nullptr;
}

std::vector<ibv_context*> list_contexts() {
    std::lock_guard lock(registry_lock);
    std::vector<ibv_context*> out;
    for (CmDevice* d : open_all_locked()) out.push_back(d->verbs);
    return out;
}

}  // namespace rnic::rdmacm

using namespace rnic::rdmacm;

RNIC_EXPORT ibv_context** rdma_get_devices(int* num_devices) try {
    if (num_devices != nullptr) *num_devices = 0;
    if (const int rc = init_devices(); rc != 0) {
        errno = rc;
        return nullptr;
    }
    const std::vector<ibv_context*> contexts = list_contexts();
    auto** list = static_cast<ibv_context**>(std::calloc(contexts.size() + 1, sizeof(ibv_context*)));
    if (list == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    std::memcpy(list, contexts.data(), contexts.size() * sizeof(ibv_context*));
    if (num_devices != nullptr) *num_devices = static_cast<int>(contexts.size());
    return list;
} catch (...) {
    errno = ENOMEM;
    return nullptr;
}

// The contexts stay open: ids and the application's objects may use them after the list is gone
// (librdmacm closes a device only once no id and no list refers to it and it was removed).
RNIC_EXPORT void rdma_free_devices(ibv_context** list) {
    std::free(list);
}
