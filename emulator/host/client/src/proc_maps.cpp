#include "proc_maps.hpp"

#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace rnic::host::client::detail {

std::vector<Vma> read_self_maps() {
    std::vector<Vma> out;
    FILE* f = std::fopen("/proc/self/maps", "re");
    if (f == nullptr) return out;
    char line[4096 + 256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
        uintptr_t start = 0;
        uintptr_t end = 0;
        char perms[8] = {};
        uint64_t offset = 0;
        unsigned major = 0;
        unsigned minor = 0;
        uint64_t inode = 0;
        int consumed = 0;
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start, &end, perms,
                        &offset, &major, &minor, &inode, &consumed) < 7)
            continue;
        Vma v{};
        v.start = start;
        v.end = end;
        v.prot =
            (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
        v.shared = perms[3] == 's';
        v.offset = offset;
        v.dev_major = major;
        v.dev_minor = minor;
        v.inode = inode;
        v.path = line + consumed;
        while (!v.path.empty() && (v.path.back() == '\n' || v.path.back() == ' ')) v.path.pop_back();
        out.push_back(std::move(v));
    }
    std::fclose(f);
    return out;
}

}  // namespace rnic::host::client::detail
