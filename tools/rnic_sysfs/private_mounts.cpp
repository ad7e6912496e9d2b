#include "private_mounts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "sysfs_tree.hpp"

namespace rnic::sysfs {

namespace {

std::string error(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

bool write_file(const char* path, const std::string& text) {
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    return ok;
}

struct Entry {
    std::string name;
    unsigned char type;  // DT_DIR, DT_LNK, ...
};

std::vector<Entry> list_dir(const std::string& dir) {
    std::vector<Entry> out;
    std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
    if (!d) return out;
    while (dirent* e = readdir(d.get())) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        unsigned char type = e->d_type;
        if (type == DT_UNKNOWN) {
            struct stat st {};
            if (lstat((dir + "/" + name).c_str(), &st) != 0) continue;
            type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
        }
        out.push_back({name, type});
    }
    return out;
}

// Puts back one entry of the directory now hidden under the tmpfs, reached through `old_fd`.
std::string restore_entry(int old_fd, const std::string& dir, const Entry& e) {
    const std::string target = dir + "/" + e.name;
    const std::string source = "/proc/self/fd/" + std::to_string(old_fd) + "/" + e.name;
    if (e.type == DT_LNK) {
        char buf[4096];
        const ssize_t n = readlinkat(old_fd, e.name.c_str(), buf, sizeof buf - 1);
        if (n < 0) return error("readlink " + target);
        buf[n] = '\0';
        if (symlink(buf, target.c_str()) != 0) return error("symlink " + target);
        return "";
    }
    if (e.type == DT_DIR) {
        if (mkdir(target.c_str(), 0755) != 0) return error("mkdir " + target);
    } else {
        const int fd = open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) return error("create " + target);
        close(fd);
    }
    // Recursive, so mounts below it (/dev/pts, /dev/shm, ...) come along.
    if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        return error("bind " + target);
    return "";
}

}  // namespace

std::string enter_private_namespace() {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWNS) != 0) {
        if (errno != EPERM) return error("unshare(CLONE_NEWNS)");
        // Not privileged: a user namespace gives the capabilities for mounts inside it, with the
        // real uid and gid mapped to themselves so files keep their owners.
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return error("unshare(CLONE_NEWUSER|CLONE_NEWNS)");
        if (!write_file("/proc/self/setgroups", "deny") ||
            !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") ||
            !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n"))
            return error("user namespace id maps");
    }
    // Nothing mounted from now on may propagate back to the host's namespace.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return error("make / private");
    return "";
}

std::string overlay_directory(const std::string& dir, const std::string& skip) {
    const std::vector<Entry> entries = list_dir(dir);
    const int old_fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (old_fd < 0) return error("open " + dir);
    struct stat st {};
    fstat(old_fd, &st);
    const std::string mode = "mode=" + [&] {
        std::ostringstream o;
        o << std::oct << (st.st_mode & 07777);
        return o.str();
    }();
    if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID, mode.c_str()) != 0) {
        const std::string e = error("mount tmpfs on " + dir);
        close(old_fd);
        return e;
    }
    const std::string skipped = "," + skip + ",";
    for (const Entry& e : entries) {
        if (skipped.find("," + e.name + ",") != std::string::npos) continue;
        if (std::string err = restore_entry(old_fd, dir, e); !err.empty()) {
            umount2(dir.c_str(), MNT_DETACH);
            close(old_fd);
            return err;
        }
    }
    close(old_fd);
    return "";
}

std::string make_uverbs_nodes(const std::string& class_dir) {
    const std::string dev_dir = "/dev/infiniband";
    if (mkdir(dev_dir.c_str(), 0755) != 0 && errno != EEXIST) return error("mkdir " + dev_dir);
    for (const Entry& e : list_dir(class_dir + "/infiniband_verbs")) {
        const int n = uverbs_index(e.name);
        if (n < 0) continue;
        const std::string node = dev_dir + "/" + e.name;
        if (mknod(node.c_str(), S_IFCHR | 0666, makedev(kUverbsMajor, kUverbsFirstMinor + n)) == 0) {
            chmod(node.c_str(), 0666);  // past the umask
            continue;
        }
        const int fd = open(node.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) return error("create " + node);
        close(fd);
        if (mount("/dev/null", node.c_str(), nullptr, MS_BIND, nullptr) != 0) return error("bind /dev/null on " + node);
    }
    return "";
}

}  // namespace rnic::sysfs
