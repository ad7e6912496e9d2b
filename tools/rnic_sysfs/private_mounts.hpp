// A private view of /sys/class and /dev for one program: the process moves into its own mount
// namespace (and, when it is not root, a user namespace that maps only its own uid and gid), puts
// a tmpfs over /sys/class with every existing class bound back in, and another over /dev with
// every entry bound back in. Nothing is changed outside the new namespace.
#pragma once

#include <string>

namespace rnic::sysfs {

// Enters the private namespaces. Returns "" on success, else why not (nothing was changed).
std::string enter_private_namespace();

// Puts a tmpfs over `dir` and binds every entry that was in it back in, except those named in
// `skip` (a comma-separated list). Returns "" or the error (the tmpfs is gone again then).
std::string overlay_directory(const std::string& dir, const std::string& skip);

// /dev/infiniband/uverbsN for every /sys/class/infiniband_verbs/uverbsN: a character device with
// the kernel's numbers where mknod is allowed (root), else /dev/null bound there. Both satisfy
// programs that only check the node (UCX stats it and checks access); nothing opens it, since our
// libibverbs talks to rnicd over its socket. Returns "" or the error.
std::string make_uverbs_nodes(const std::string& class_dir);

}  // namespace rnic::sysfs
