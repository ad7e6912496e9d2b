#include "peer_process.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace rnic::host::server {
namespace {

constexpr int kCapIpcLock = 14;

std::string proc_path(uint32_t pid, const char* file) {
    return "/proc/" + std::to_string(pid) + "/" + file;
}

// "Max locked memory  SOFT  HARD  bytes": the soft limit, "unlimited" as UINT64_MAX.
std::optional<uint64_t> memlock_soft_limit(uint32_t pid) {
    std::ifstream in(proc_path(pid, "limits"));
    for (std::string line; std::getline(in, line);) {
        constexpr std::string_view kName = "Max locked memory";
        if (line.compare(0, kName.size(), kName) != 0) continue;
        std::istringstream fields(line.substr(kName.size()));
        std::string soft;
        fields >> soft;
        if (soft == "unlimited") return UINT64_MAX;
        uint64_t v = 0;
        if (std::sscanf(soft.c_str(), "%lu", &v) != 1) return std::nullopt;
        return v;
    }
    return std::nullopt;
}

std::optional<uint64_t> effective_capabilities(uint32_t pid) {
    std::ifstream in(proc_path(pid, "status"));
    for (std::string line; std::getline(in, line);) {
        if (line.compare(0, 7, "CapEff:") != 0) continue;
        uint64_t caps = 0;
        if (std::sscanf(line.c_str() + 7, "%lx", &caps) != 1) return std::nullopt;
        return caps;
    }
    return std::nullopt;
}

// The same user namespace as the daemon's: the namespace links name the same inode. Reading
// another user's link needs ptrace rights; a daemon without them takes it as another namespace.
bool same_user_namespace(uint32_t pid) {
    struct stat mine {};
    struct stat theirs {};
    return stat("/proc/self/ns/user", &mine) == 0 && stat(proc_path(pid, "ns/user").c_str(), &theirs) == 0 &&
           mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
}

}  // namespace

std::optional<uint64_t> process_start_time(uint32_t pid) {
    std::ifstream in(proc_path(pid, "stat"));
    std::string stat;
    if (!std::getline(in, stat)) return std::nullopt;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int i = 3; i < 22; ++i) fields >> field;  // fields 3 (state) to 21
    uint64_t start = 0;
    if (!(fields >> start)) return std::nullopt;
    return start;
}

std::optional<LockLimit> process_lock_limit(const ProcessId& p) {
    const auto bytes = memlock_soft_limit(p.pid);
    const auto caps = effective_capabilities(p.pid);
    if (!bytes || !caps) return std::nullopt;
    LockLimit l{*bytes, ((*caps >> kCapIpcLock) & 1) != 0 && same_user_namespace(p.pid)};
    // Read before the identity check: if the pid still names the process we accepted, the files
    // were that process's (a pid is reused only after its process is gone).
    if (process_start_time(p.pid) != p.start_time) return std::nullopt;
    return l;
}

}  // namespace rnic::host::server
