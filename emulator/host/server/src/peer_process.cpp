#include "peer_process.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace rnic::host::server {
namespace {

constexpr int kCapIpcLock = 14;

std::string proc_path(uint32_t pid, const char* file) {
    return "/proc/" + std::to_string(pid) + "/" + file;
}

// Reads a small /proc file whole with one read (no streams: this runs per registration and per
// queue created, on the daemon's loop). False when it cannot be read or does not fit.
bool read_proc_file(uint32_t pid, const char* file, char* buf, size_t size, size_t& length) {
    const int fd = open(proc_path(pid, file).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0 || static_cast<size_t>(n) == size - 1) return false;
    buf[n] = 0;
    length = static_cast<size_t>(n);
    return true;
}

// prlimit(2) first: one syscall where /proc/<pid>/limits formats sixteen lines. It needs
// CAP_SYS_RESOURCE over the target (a root rnicd has it); otherwise the file.
// "Max locked memory  SOFT  HARD  bytes": the soft limit, "unlimited" as UINT64_MAX.
std::optional<uint64_t> memlock_soft_limit(uint32_t pid) {
    rlimit limit{};
    if (prlimit(static_cast<pid_t>(pid), RLIMIT_MEMLOCK, nullptr, &limit) == 0)
        return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : uint64_t{limit.rlim_cur};
    char text[4096];
    size_t length = 0;
    if (!read_proc_file(pid, "limits", text, sizeof text, length)) return std::nullopt;
    const char* line = std::strstr(text, "Max locked memory");
    if (!line) return std::nullopt;
    line += std::strlen("Max locked memory");
    while (*line == ' ') ++line;
    if (std::strncmp(line, "unlimited", 9) == 0) return UINT64_MAX;
    uint64_t v = 0;
    if (std::sscanf(line, "%lu", &v) != 1) return std::nullopt;
    return v;
}

// capget(2) reads any process's sets without privilege.
std::optional<uint64_t> effective_capabilities(uint32_t pid) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, static_cast<int>(pid)};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &header, data) != 0) return std::nullopt;
    return uint64_t{data[0].effective} | uint64_t{data[1].effective} << 32;
}

// The same user namespace as the daemon's: the namespace links name the same inode. Reading
// another user's link needs ptrace rights; a daemon without them takes it as another namespace.
bool same_user_namespace(uint32_t pid) {
    static const std::optional<std::pair<dev_t, ino_t>> mine = []() -> std::optional<std::pair<dev_t, ino_t>> {
        struct stat st {};
        if (stat("/proc/self/ns/user", &st) != 0) return std::nullopt;
        return std::pair{st.st_dev, st.st_ino};
    }();
    struct stat theirs {};
    return mine && stat(proc_path(pid, "ns/user").c_str(), &theirs) == 0 && mine->second == theirs.st_ino &&
           mine->first == theirs.st_dev;
}

}  // namespace

std::optional<uint64_t> process_start_time(uint32_t pid) {
    char stat[1024];
    size_t length = 0;
    if (!read_proc_file(pid, "stat", stat, sizeof stat, length)) return std::nullopt;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    const char* field = std::strrchr(stat, ')');
    if (!field) return std::nullopt;
    for (int i = 2; i < 22; ++i) {  // to the start of field 22
        field = std::strchr(field + 1, ' ');
        if (!field) return std::nullopt;
    }
    uint64_t start = 0;
    if (std::sscanf(field + 1, "%lu", &start) != 1) return std::nullopt;
    return start;
}

std::optional<LockLimit> process_lock_limit(const ProcessId& p) {
    const auto bytes = memlock_soft_limit(p.pid);
    const auto caps = effective_capabilities(p.pid);
    if (!bytes || !caps) return std::nullopt;
    LockLimit l{*bytes, ((*caps >> kCapIpcLock) & 1) != 0 && same_user_namespace(p.pid)};
    // Read before the identity check: if the pid still names the process we accepted, what we
    // read was that process's (a pid is reused only after its process is gone).
    if (process_start_time(p.pid) != p.start_time) return std::nullopt;
    return l;
}

}  // namespace rnic::host::server
