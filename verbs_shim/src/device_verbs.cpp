// Devices are the rnicd instances answering in the run directory ($RNIC_RUN_DIR, else
// /run/rnic): one socket each, named by `rnicd --name`. Listing them says Hello to each (a
// stale socket from a crashed daemon is skipped); opening one connects for good.
#include <endian.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

namespace rnic::shim {

namespace {

std::mutex registry_lock;
// Devices are never freed: an ibv_device stays valid while contexts use it, and a daemon that
// restarts under the same name is the same device again.
std::deque<Device>& registry() {
    static auto* devices = new std::deque<Device>();
    return *devices;
}

void copy_name(char* dst, size_t size, const std::string& src) {
    std::snprintf(dst, size, "%s", src.c_str());
}

Device& find_or_add(const std::string& run_dir, const std::string& name) {
    auto& devices = registry();
    for (Device& d : devices)
        if (d.run_dir == run_dir && d.name == name) return d;
    Device& d = devices.emplace_back();
    d.run_dir = run_dir;
    d.name = name;
    d.index = static_cast<int>(devices.size() - 1);
    d.dev.node_type = IBV_NODE_CA;
    d.dev.transport_type = IBV_TRANSPORT_IB;  // RoCE is the IB transport over Ethernet
    copy_name(d.dev.name, sizeof d.dev.name, name);
    // The kernel's names: uverbsN for the verbs character device, the class directory for
    // ibdev_path. rnic-sysfs writes that tree (and /dev/infiniband/uverbsN) from these names for
    // programs run through rnic-run; without it, ibv_read_sysfs_file still answers the files
    // under ibdev_path (sysfs_files.cpp). dev_path stays the daemon's socket: our librdmacm
    // finds the run directory there.
    copy_name(d.dev.dev_name, sizeof d.dev.dev_name, "uverbs" + std::to_string(d.index));
    copy_name(d.dev.dev_path, sizeof d.dev.dev_path, run_dir + "/" + name + ".sock");
    copy_name(d.dev.ibdev_path, sizeof d.dev.ibdev_path, "/sys/class/infiniband/" + name);
    return d;
}

}  // namespace

bool tracing() {
    static const bool on = [] {
        const char* v = std::getenv("RNIC_VERBS_DEBUG");
        return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
    }();
    return on;
}

void trace_failure(const char* verb, int error) {
    if (tracing())
        std::fprintf(stderr, "rnic libibverbs: %s failed: %s (errno %d)\n", verb, std::strerror(error), error);
}

Device* find_device_by_path(const char* ibdev_path) {
    std::lock_guard lock(registry_lock);
    for (Device& d : registry())
        if (std::strcmp(d.dev.ibdev_path, ibdev_path) == 0) return &d;
    return nullptr;
}

ibv_context* open_context(Device& device) {
    auto conn = client::Connection::open(device.name, device.run_dir);
    if (!conn) {
        trace_failure("ibv_open_device", conn.error());
        return fail_null<ibv_context>(conn.error() == ENOENT || conn.error() == ECONNREFUSED ? ENODEV : conn.error());
    }
    auto* ctx = new (std::nothrow) Context();
    if (ctx == nullptr) return fail_null<ibv_context>(ENOMEM);
    ctx->device = &device;
    ctx->conn = conn->release();
    device.hello = ctx->conn->hello();
    verbs_context& v = ctx->vctx;
    v.sz = sizeof(verbs_context);
    install_extended_ops(v);
    ibv_context& c = v.context;
    c.device = &device.dev;
    install_context_ops(c.ops);
    c.cmd_fd = -1;  // no uverbs command fd: the slow path is the daemon's socket
    c.async_fd = ctx->conn->async_fd();
    c.num_comp_vectors = 1;
    pthread_mutex_init(&c.mutex, nullptr);
    c.abi_compat = __VERBS_ABI_IS_EXTENDED;
    return &c;
}

const abi::HelloReply& hello_of(ibv_context* c) {
    return context_of(c)->conn->hello();
}

}  // namespace rnic::shim

using namespace rnic::shim;

RNIC_EXPORT ibv_device** ibv_get_device_list(int* num_devices) try {
    const std::string run_dir = client::default_run_dir();
    auto names = client::list_devices(run_dir);
    std::vector<Device*> found;
    if (names) {
        for (const std::string& name : *names) {
            // Only daemons that answer: a socket left by a crashed rnicd is not a device.
            auto probe = client::Connection::open(name, run_dir);
            if (!probe) continue;
            std::lock_guard lock(registry_lock);
            Device& d = find_or_add(run_dir, name);
            d.hello = (*probe)->hello();
            found.push_back(&d);
        }
    }
    auto** list = static_cast<ibv_device**>(std::calloc(found.size() + 1, sizeof(ibv_device*)));
    if (list == nullptr) return fail_null<ibv_device*>(ENOMEM);
    for (size_t i = 0; i < found.size(); ++i) list[i] = &found[i]->dev;
    if (num_devices != nullptr) *num_devices = static_cast<int>(found.size());
    return list;
} catch (...) {
    return fail_null<ibv_device*>(ENOMEM);
}

RNIC_EXPORT void ibv_free_device_list(ibv_device** list) {
    std::free(list);
}

RNIC_EXPORT const char* ibv_get_device_name(ibv_device* device) {
    return device != nullptr ? device->name : nullptr;
}

RNIC_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
    if (device == nullptr) return 0;
    return htobe64(reinterpret_cast<Device*>(device)->hello.device.node_guid);
}

RNIC_EXPORT int ibv_get_device_index(ibv_device* device) {
    return device != nullptr ? reinterpret_cast<Device*>(device)->index : -1;
}

RNIC_EXPORT ibv_context* ibv_open_device(ibv_device* device) try {
    if (device == nullptr) return fail_null<ibv_context>(EINVAL);
    return open_context(*reinterpret_cast<Device*>(device));
} catch (...) {
    return fail_null<ibv_context>(ENOMEM);
}

RNIC_EXPORT int ibv_close_device(ibv_context* context) {
    if (context == nullptr) return EINVAL;
    Context* ctx = context_of(context);
    // The daemon reclaims whatever the application did not destroy when the socket closes.
    pthread_mutex_destroy(&context->mutex);
    delete ctx->conn;
    delete ctx;
    return 0;
}

// Importing another process's context needs the kernel's shared uverbs fd; a daemon socket
// cannot be shared that way.
RNIC_EXPORT ibv_context* ibv_import_device(int) {
    return fail_null<ibv_context>(EOPNOTSUPP);
}
