// rnic-sysfs: the kernel's sysfs view of the rnicd devices, for programs that read sysfs.
//
//   rnic-sysfs write DIR             write DIR/infiniband, DIR/infiniband_verbs, DIR/infiniband_mad
//   rnic-sysfs exec [--] PROG ARGS   run PROG with that tree at /sys/class and /dev/infiniband/uverbsN,
//                                    in a private mount namespace; where namespaces are not
//                                    available, one line says so and PROG runs without the tree
//                                    (RNIC_VERBS_DEBUG=1 also prints what the tree lacks)
//
// Run it through rnic-run (which does so by default): the devices are what our libibverbs.so.1
// lists for $RNIC_RUN_DIR.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "private_mounts.hpp"
#include "sysfs_tree.hpp"

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: rnic-sysfs write DIR\n"
                 "       rnic-sysfs exec [--] PROGRAM [ARGS...]\n");
    return 2;
}

void print_notes(const rnic::sysfs::WriteResult& r) {
    for (const std::string& n : r.notes) std::fprintf(stderr, "rnic-sysfs: %s\n", n.c_str());
}

// Sets up the private /sys/class and /dev; "" on success, else why the program runs without them.
std::string private_tree() {
    using namespace rnic::sysfs;
    if (std::string e = enter_private_namespace(); !e.empty()) return e;
    // The classes the tree replaces are not bound back (a host with kernel RDMA keeps its own
    // devices out of the view: the program sees the rnicd devices only).
    if (std::string e = overlay_directory("/sys/class", "infiniband,infiniband_verbs,infiniband_mad,infiniband_cm");
        !e.empty())
        return e;
    if (std::string e = overlay_directory("/dev", "infiniband"); !e.empty()) return e;
    const WriteResult r = write_tree("/sys/class", "/sys/class/net");
    // Quiet unless asked: the notes (a device whose interface is in another namespace) would
    // otherwise precede every program's own output.
    if (const char* v = std::getenv("RNIC_VERBS_DEBUG"); v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0)
        print_notes(r);
    return make_uverbs_nodes("/sys/class");
}

}  // namespace

int main(int argc, char** argv) try {
    if (argc < 2) return usage();
    const std::string cmd = argv[1];
    if (cmd == "write") {
        if (argc != 3) return usage();
        const auto r = rnic::sysfs::write_tree(argv[2], "/sys/class/net");
        print_notes(r);
        std::printf("rnic-sysfs: %d device(s) written under %s\n", r.devices, argv[2]);
        return 0;
    }
    if (cmd != "exec") return usage();
    int first = 2;
    if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
    if (first >= argc) return usage();
    std::string why;
    try {
        why = private_tree();
    } catch (const std::exception& e) {
        why = e.what();
    }
    if (!why.empty())
        std::fprintf(stderr, "rnic-sysfs: no sysfs tree for %s (%s): running it without\n", argv[first], why.c_str());
    execvp(argv[first], argv + first);
    std::fprintf(stderr, "rnic-sysfs: cannot run %s: %s\n", argv[first], std::strerror(errno));
    return 127;
} catch (const std::exception& e) {
    std::fprintf(stderr, "rnic-sysfs: %s\n", e.what());
    return 1;
}
