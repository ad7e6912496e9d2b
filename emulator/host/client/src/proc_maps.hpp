// /proc/self/maps, parsed: the only place the client learns a mapping's protection, whether it
// is private or shared and which file backs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rnic::host::client::detail {

struct Vma {
    uintptr_t start;
    uintptr_t end;
    int prot;     // PROT_* bits
    bool shared;  // 's' in the fourth permission column
    uint64_t offset;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint64_t inode;
    std::string path;  // "" for anonymous memory, "[heap]", "[stack]", "/memfd:x (deleted)", ...
};

// Sorted by start, as the kernel prints them. Empty on failure (errno set).
std::vector<Vma> read_self_maps();

}  // namespace rnic::host::client::detail
