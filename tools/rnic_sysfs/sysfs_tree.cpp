// Every value here comes from our libibverbs.so.1 (ibv_query_device/port/gid/pkey, and
// ibv_read_sysfs_file for the text facts the library answers itself), formatted as the kernel's
// drivers/infiniband/core/sysfs.c shows it, so the tree and ibv_devinfo can never disagree.
#include "sysfs_tree.hpp"

#include <dirent.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>

// rdma-core's private helper (infiniband/driver.h); our libibverbs answers it for its devices.
extern "C" int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

namespace rnic::sysfs {

namespace {

void make_dir(const std::string& path) {
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
        throw std::runtime_error("mkdir " + path + ": " + std::strerror(errno));
}

void put(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text << '\n';
    if (!f) throw std::runtime_error("cannot write " + path);
}

std::string fmt(const char* format, auto... args) {
    char b[128];
    std::snprintf(b, sizeof b, format, args...);
    return b;
}

std::string guid_text(__be64 be) {
    const uint64_t g = be64toh(be);
    return fmt("%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff, unsigned(g >> 32) & 0xffff,
               unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
}

std::string gid_text(const ibv_gid& gid) {
    std::string s;
    for (int i = 0; i < 16; i += 2) s += fmt("%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
    return s;
}

const char* port_state_name(int state) {
    static const char* const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    return state >= 0 && state < 6 ? names[state] : "UNKNOWN";
}

const char* phys_state_name(unsigned state) {
    static const char* const names[] = {"<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
                                        "LinkUp", "LinkErrorRecovery", "Phy Test"};
    return state < 8 ? names[state] : "<unknown>";
}

int width_lanes(uint8_t width) {
    switch (width) {
        case 2: return 4;
        case 4: return 8;
        case 8: return 12;
        case 16: return 2;
        default: return 1;
    }
}

// "<Gb/s> Gb/sec (<lanes>X <speed>)", the kernel's rate file: tenths of Gb/s per lane.
std::string rate_text(const ibv_port_attr& p) {
    int tenths = 25;
    const char* name = "SDR";
    switch (p.active_speed) {
        case 2: tenths = 50, name = "DDR"; break;
        case 4: tenths = 100, name = "QDR"; break;
        case 8: tenths = 100, name = "FDR10"; break;
        case 16: tenths = 140, name = "FDR"; break;
        case 32: tenths = 250, name = "EDR"; break;
        case 64: tenths = 500, name = "HDR"; break;
        case 128: tenths = 1000, name = "NDR"; break;
        default: break;
    }
    const int lanes = width_lanes(p.active_width);
    const int rate = tenths * lanes;
    return fmt("%d%s Gb/sec (%dX %s)", rate / 10, rate % 10 ? ".5" : "", lanes, name);
}

// The MAC address inside a RoCE link-local GID (fe80::/64 with a modified EUI-64 interface id).
std::optional<std::string> mac_of_link_local(const ibv_gid& g) {
    static const uint8_t prefix[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
    if (std::memcmp(g.raw, prefix, 8) != 0 || g.raw[11] != 0xff || g.raw[12] != 0xfe) return std::nullopt;
    return fmt("%02x:%02x:%02x:%02x:%02x:%02x", g.raw[8] ^ 0x02, g.raw[9], g.raw[10], g.raw[13], g.raw[14], g.raw[15]);
}

// The network interface (seen from this process's network namespace) whose address is `mac`.
std::optional<std::string> netdev_with_mac(const std::string& class_net, const std::string& mac) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(class_net.c_str()), closedir);
    if (!dir) return std::nullopt;
    while (dirent* e = readdir(dir.get())) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(class_net + "/" + e->d_name + "/address");
        std::string address;
        if (f >> address && address == mac) return std::string(e->d_name);
    }
    return std::nullopt;
}

// local_cpus: every online CPU (an rnicd is not attached to a NUMA node), in the kernel's
// comma-separated 32-bit hexadecimal groups.
std::string all_cpus_mask() {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (n < 1) n = 1;
    std::string s;
    for (long hi = ((n - 1) / 32) * 32; hi >= 0; hi -= 32) {
        const long bits = std::min<long>(32, n - hi);
        const uint32_t word = bits == 32 ? 0xffffffffu : ((1u << bits) - 1);
        s += fmt(s.empty() ? "%x" : ",%08x", word);
    }
    return s;
}

// A text fact our libibverbs answers under ibdev_path (board_id, hca_type, hw_rev, ...).
std::optional<std::string> library_file(const ibv_device* dev, const char* file) {
    char buf[256];
    if (ibv_read_sysfs_file(dev->ibdev_path, file, buf, sizeof buf) < 0) return std::nullopt;
    return std::string(buf);
}

void write_device(const std::string& class_dir, const std::string& class_net, ibv_device* dev, ibv_context* ctx,
                  int uverbs, WriteResult& result) {
    ibv_device_attr attr{};
    if (int rc = ibv_query_device(ctx, &attr); rc != 0)
        throw std::runtime_error(std::string("ibv_query_device ") + dev->name + ": " + std::strerror(rc));
    const std::string root = class_dir + "/infiniband/" + dev->name;
    make_dir(root);
    put(root + "/node_type", "1: CA");
    put(root + "/node_guid", guid_text(attr.node_guid));
    put(root + "/sys_image_guid", guid_text(attr.sys_image_guid));
    put(root + "/fw_ver", attr.fw_ver);
    for (const char* file : {"hca_type", "hw_rev", "board_id", "node_desc"})
        if (auto text = library_file(dev, file)) put(root + "/" + file, *text);

    std::optional<std::string> netdev;
    make_dir(root + "/ports");
    for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr p{};
        if (int rc = ibv_query_port(ctx, port, &p); rc != 0)
            throw std::runtime_error(std::string("ibv_query_port ") + dev->name + ": " + std::strerror(rc));
        const std::string dir = root + "/ports/" + std::to_string(port);
        make_dir(dir);
        put(dir + "/state", fmt("%d: %s", int(p.state), port_state_name(p.state)));
        put(dir + "/phys_state", fmt("%u: %s", unsigned(p.phys_state), phys_state_name(p.phys_state)));
        put(dir + "/rate", rate_text(p));
        put(dir + "/lid", fmt("0x%x", unsigned(p.lid)));
        put(dir + "/sm_lid", fmt("0x%x", unsigned(p.sm_lid)));
        put(dir + "/sm_sl", fmt("%u", unsigned(p.sm_sl)));
        put(dir + "/lid_mask_count", fmt("%u", unsigned(p.lmc)));
        put(dir + "/cap_mask", fmt("0x%08x", p.port_cap_flags));
        put(dir + "/link_layer", p.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
        for (const char* sub : {"/gids", "/gid_attrs", "/gid_attrs/types", "/gid_attrs/ndevs", "/pkeys"})
            make_dir(dir + sub);
        // The first pass finds the port's interface from its link-local GID, so every GID's
        // ndevs entry can name it.
        std::vector<std::optional<ibv_gid_entry>> entries(p.gid_tbl_len > 0 ? p.gid_tbl_len : 0);
        for (int i = 0; i < p.gid_tbl_len; ++i) {
            ibv_gid_entry e{};
            if (ibv_query_gid_ex(ctx, port, i, &e, 0) == 0) entries[i] = e;
        }
        for (const auto& e : entries)
            if (e && !netdev)
                if (auto mac = mac_of_link_local(e->gid)) netdev = netdev_with_mac(class_net, *mac);
        for (int i = 0; i < p.gid_tbl_len; ++i) {
            const std::string n = std::to_string(i);
            // Unused entries read as the zero GID, as the kernel shows them; they have no type or ndev.
            put(dir + "/gids/" + n, entries[i] ? gid_text(entries[i]->gid) : gid_text(ibv_gid{}));
            if (!entries[i]) continue;
            put(dir + "/gid_attrs/types/" + n, entries[i]->gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
            if (netdev) put(dir + "/gid_attrs/ndevs/" + n, *netdev);
        }
        for (int i = 0; i < p.pkey_tbl_len; ++i) {
            __be16 pkey = 0;
            if (ibv_query_pkey(ctx, port, i, &pkey) != 0) pkey = 0;
            put(dir + "/pkeys/" + std::to_string(i), fmt("0x%04x", unsigned(be16toh(pkey))));
        }
    }
    // device/: the parent device, with the port's network interface under net/ as a PCI
    // function's would be (an rnicd has no bus device: no NUMA node, every CPU local).
    make_dir(root + "/device");
    make_dir(root + "/device/net");
    put(root + "/device/numa_node", "-1");
    put(root + "/device/local_cpus", all_cpus_mask());
    if (netdev) {
        const std::string link = root + "/device/net/" + *netdev;
        unlink(link.c_str());
        if (symlink((class_net + "/" + *netdev).c_str(), link.c_str()) != 0)
            throw std::runtime_error("symlink " + link + ": " + std::strerror(errno));
    } else {
        result.notes.push_back(std::string(dev->name) + ": no network interface with its MAC address here");
    }

    const std::string uv = class_dir + "/infiniband_verbs/uverbs" + std::to_string(uverbs);
    make_dir(uv);
    put(uv + "/ibdev", dev->name);
    put(uv + "/abi_version", "1");
    put(uv + "/dev", fmt("%u:%u", kUverbsMajor, kUverbsFirstMinor + unsigned(uverbs)));
    ++result.devices;
}

}  // namespace

int uverbs_index(const std::string& dev_name) {
    if (dev_name.rfind("uverbs", 0) != 0 || dev_name.size() == 6 || dev_name.size() > 10) return -1;
    const std::string digits = dev_name.substr(6);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(digits);
}

WriteResult write_tree(const std::string& class_dir, const std::string& class_net) {
    WriteResult result;
    make_dir(class_dir);
    for (const char* sub : {"/infiniband", "/infiniband_verbs", "/infiniband_mad"}) make_dir(class_dir + sub);
    // The kernel's ABI versions of the two character-device interfaces (uverbs 6, umad 5).
    put(class_dir + "/infiniband_verbs/abi_version", "6");
    put(class_dir + "/infiniband_mad/abi_version", "5");
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) {
        result.notes.push_back(std::string("ibv_get_device_list: ") + std::strerror(errno));
        return result;
    }
    std::unique_ptr<ibv_device*, void (*)(ibv_device**)> guard(list, ibv_free_device_list);
    for (int i = 0; i < count; ++i) {
        ibv_device* dev = list[i];
        const int uverbs = uverbs_index(dev->dev_name);
        if (uverbs < 0) {
            result.notes.push_back(std::string(dev->name) + ": dev_name " + dev->dev_name + " is not uverbsN");
            continue;
        }
        ibv_context* ctx = ibv_open_device(dev);
        if (ctx == nullptr) {
            result.notes.push_back(std::string(dev->name) + ": ibv_open_device: " + std::strerror(errno));
            continue;
        }
        try {
            write_device(class_dir, class_net, dev, ctx, uverbs, result);
        } catch (...) {
            ibv_close_device(ctx);
            throw;
        }
        ibv_close_device(ctx);
    }
    return result;
}

}  // namespace rnic::sysfs
