// ibv_read_sysfs_file: rdma-core's tools read device facts from sysfs (ibv_devinfo reads
// `board_id` under ibv_device::ibdev_path, /sys/class/infiniband/<dev>). The files a tool may
// read there are answered from the daemon's Hello, in the kernel's formats, so they work without
// a sysfs tree; any other path is read from the filesystem as rdma-core does (the tree rnic-sysfs
// writes, docs/verbs_shim.md "sysfs").
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "export.hpp"
#include "shim_objects.hpp"
#include "verbs_ops.hpp"

using namespace rnic::shim;

namespace {

std::string guid_text(uint64_t guid) {
    char b[24];
    std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(guid >> 48) & 0xffff, unsigned(guid >> 32) & 0xffff,
                  unsigned(guid >> 16) & 0xffff, unsigned(guid) & 0xffff);
    return b;
}

std::string gid_text(const uint8_t* g) {
    std::string s;
    char b[8];
    for (int i = 0; i < 16; i += 2) {
        std::snprintf(b, sizeof b, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
        s += b;
    }
    return s;
}

std::optional<std::string> device_file(const Device& d, const std::string& file) {
    const abi::HelloReply& h = d.hello;
    if (file == "board_id") return std::string("RNIC_SW_ROCEV2");
    if (file == "fw_ver") return std::string(h.device.fw_ver, strnlen(h.device.fw_ver, sizeof h.device.fw_ver));
    if (file == "hca_type") return std::string("rnicd");
    if (file == "hw_rev") return std::to_string(h.device.hw_ver);
    if (file == "node_type") return std::string("1: CA");
    if (file == "node_guid") return guid_text(h.device.node_guid);
    if (file == "sys_image_guid") return guid_text(h.device.sys_image_guid);
    if (file == "node_desc") return "rnicd " + d.name;
    if (file == "ports/1/link_layer") return std::string("Ethernet");
    if (file == "ports/1/state") return std::string(h.port.state == IBV_PORT_ACTIVE ? "4: ACTIVE" : "1: DOWN");
    if (file == "ports/1/pkeys/0") return std::string("0xffff");
    // ports/1/gids/N and ports/1/gid_attrs/types/N for each GID of the table.
    auto gid_index = [&](std::string_view prefix) -> std::optional<unsigned long> {
        if (file.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
        const std::string tail = file.substr(prefix.size());
        if (tail.empty() || tail.size() > 4 || tail.find_first_not_of("0123456789") != std::string::npos)
            return std::nullopt;
        const unsigned long index = std::stoul(tail);
        if (index >= h.gid_count) return std::nullopt;
        return index;
    };
    if (auto i = gid_index("ports/1/gids/")) return gid_text(h.gids[*i]);
    if (auto i = gid_index("ports/1/gid_attrs/types/"))
        return std::string(h.gid_types[*i] == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
    return std::nullopt;
}

int copy_out(const std::string& text, char* buf, size_t size) {
    if (size == 0) return 0;
    const size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
    return static_cast<int>(n);
}

}  // namespace

RNIC_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) try {
    if (dir == nullptr || file == nullptr || buf == nullptr) return fail_minus_one(EINVAL);
    // A file the daemon's Hello answers is answered from it, with or without rnic-sysfs's tree at
    // ibdev_path; any other file is read from the filesystem (the tree, under rnic-run).
    if (Device* d = find_device_by_path(dir))
        if (auto text = device_file(*d, file)) return copy_out(*text, buf, size);
    const std::string path = std::string(dir) + "/" + file;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const ssize_t len = read(fd, buf, size);
    const int saved = errno;
    close(fd);
    if (len < 0) return fail_minus_one(saved);
    size_t n = static_cast<size_t>(len);
    if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
    if (n < size) buf[n] = '\0';
    return static_cast<int>(n);
} catch (...) {
    return fail_minus_one(ENOMEM);
}

RNIC_EXPORT const char* ibv_get_sysfs_path(void) {
    return "/sys";
}
