// The sysfs files the kernel shows for an RDMA device (/sys/class/infiniband/<dev>/...,
// /sys/class/infiniband_verbs/uverbsN, the class abi_version files), written from what our
// libibverbs.so.1 answers for every rnicd device, so programs that read sysfs instead of asking
// libibverbs (UCX, libibumad's ibstat, ...) see the same device as ibv_devinfo.
#pragma once

#include <string>
#include <vector>

namespace rnic::sysfs {

struct WriteResult {
    int devices = 0;                 // devices written
    std::vector<std::string> notes;  // what could not be filled (a device that did not open, ...)
};

// Writes <class_dir>/infiniband, <class_dir>/infiniband_verbs and <class_dir>/infiniband_mad.
// `sys_class_net` is where the network interfaces are looked up by MAC address for the
// device/net link and gid_attrs/ndevs (normally /sys/class/net). Throws std::runtime_error
// on a file-system error.
WriteResult write_tree(const std::string& class_dir, const std::string& sys_class_net);

// The uverbs character-device numbers the kernel gives uverbsN (major 231, minors from 192).
constexpr unsigned kUverbsMajor = 231;
constexpr unsigned kUverbsFirstMinor = 192;

// The N of "uverbsN" (our libibverbs' ibv_device::dev_name), or -1.
int uverbs_index(const std::string& dev_name);

}  // namespace rnic::sysfs
