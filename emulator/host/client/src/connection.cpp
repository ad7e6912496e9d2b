// Opening a device, the request/reply machinery, noticing a vanished daemon.
#include "rnic/host/client/connection.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "rnic/host/client/verbs_values.hpp"
#include "socket_io.hpp"

namespace rnic::host::client {

namespace {

size_t round_to_pages(size_t bytes) {
    return (bytes + page_size() - 1) & ~(page_size() - 1);
}

bool peer_gone(int e) {
    return e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ECONNABORTED;
}

}  // namespace

RingMapping::~RingMapping() {
    if (base != nullptr) munmap(base, bytes);
}

std::string default_run_dir() {
    const char* env = std::getenv(abi::kRunDirEnv);
    return env != nullptr && *env != '\0' ? env : abi::kDefaultRunDir;
}

Result<std::vector<std::string>> list_devices(const std::string& run_dir) try {
    DIR* d = opendir(run_dir.c_str());
    if (d == nullptr) return Error{errno};
    std::vector<std::string> names;
    while (const dirent* e = readdir(d)) {
        const std::string_view n = e->d_name;
        if (n.size() > 5 && n.ends_with(".sock")) names.emplace_back(n.substr(0, n.size() - 5));
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& device, const std::string& run_dir) try {
    const std::string path = (run_dir.empty() ? default_run_dir() : run_dir) + "/" + device + ".sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (device.empty() || path.size() >= sizeof addr.sun_path) return Error{EINVAL};
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error{errno};
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int e = errno;
        close(fd);
        return Error{e};
    }
    return adopt(fd);
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

Result<std::unique_ptr<Connection>> Connection::adopt(int socket_fd) try {
    std::unique_ptr<Connection> c(new Connection);
    c->socket_ = socket_fd;
    if (const char* env = std::getenv("RNIC_CONTROL_TIMEOUT_MS"); env != nullptr && std::atoi(env) > 0)
        c->reply_timeout_ms_ = std::atoi(env);
    if (const int rc = c->say_hello(); rc != 0) return Error{rc};
    if (const int rc = c->start_watchdog(); rc != 0) return Error{rc};
    return c;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::say_hello() {
    const abi::HelloRequest req{static_cast<uint32_t>(getpid()), 0};
    std::vector<uint8_t> reply;
    std::vector<int> fds;
    const int rc = call(abi::Op::Hello, {reinterpret_cast<const uint8_t*>(&req), sizeof req}, {}, &reply, &fds);
    if (rc != 0) return rc == EIO ? ECONNRESET : rc;
    struct FdCloser {
        std::vector<int>& fds;
        ~FdCloser() { detail::close_all(fds); }
    } closer{fds};
    if (reply.size() != sizeof hello_ || fds.size() != 5) return EPROTO;
    std::memcpy(&hello_, reply.data(), sizeof hello_);
    device_name_.assign(hello_.device_name, strnlen(hello_.device_name, sizeof hello_.device_name));
    if (hello_.gid_count > abi::kMaxGids) hello_.gid_count = abi::kMaxGids;

    struct stat st {};
    if (hello_.status_page_size < sizeof(abi::StatusPage) || fstat(fds[0], &st) != 0 ||
        static_cast<uint64_t>(st.st_size) < hello_.status_page_size)
        return EPROTO;
    void* status = mmap(nullptr, hello_.status_page_size, PROT_READ, MAP_SHARED, fds[0], 0);
    if (status == MAP_FAILED) return errno;
    status_ = static_cast<const abi::StatusPage*>(status);
    status_bytes_ = hello_.status_page_size;

    kick_fd_ = std::exchange(fds[1], -1);
    async_fd_ = std::exchange(fds[3], -1);
    async_wake_fd_ = std::exchange(fds[4], -1);

    if (!abi::is_power_of_two(hello_.async_ring_size)) return EPROTO;
    const size_t ring_bytes = abi::ring_bytes(hello_.async_ring_size, sizeof(abi::AsyncEventEntry));
    if (hello_.doorbell_offset < ring_bytes || hello_.doorbell_offset % alignof(abi::DoorbellBits) != 0) return EPROTO;
    const size_t bytes = round_to_pages(size_t{hello_.doorbell_offset} + sizeof(abi::DoorbellBits));
    if (fstat(fds[2], &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) return EPROTO;
    void* ring = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[2], 0);
    if (ring == MAP_FAILED) return errno;
    async_memory_.base = ring;
    async_memory_.bytes = bytes;
    async_ring_ = abi::RingView(ring, hello_.async_ring_size, sizeof(abi::AsyncEventEntry));
    doorbells_ = reinterpret_cast<abi::DoorbellBits*>(static_cast<uint8_t*>(ring) + hello_.doorbell_offset);
    async_consumed_ = async_ring_.header().consumer.load(std::memory_order_acquire);
    return 0;
}

namespace {

// Bumped in the child of every fork (pthread_atfork): a child has the parent's memory, the
// watchdog_watching_ flag included, but not its threads.
std::atomic<uint64_t> fork_generation{0};

void note_fork_generation() {
    static const bool registered = [] {
        return pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); }) == 0;
    }();
    (void)registered;
}

}  // namespace

bool Connection::needs_probe() const noexcept {
    return !watchdog_watching_.load(std::memory_order_relaxed) ||
           fork_generation.load(std::memory_order_relaxed) != watchdog_fork_generation_;
}

int Connection::start_watchdog() {
    watchdog_stop_ = eventfd(0, EFD_CLOEXEC);
    if (watchdog_stop_ < 0) return errno;
    owner_pid_ = getpid();
    note_fork_generation();
    watchdog_fork_generation_ = fork_generation.load(std::memory_order_relaxed);
    watchdog_watching_.store(true, std::memory_order_relaxed);
    // No POLLIN: replies and events on the socket are not the watchdog's business, only the
    // hang-up (POLLHUP/POLLRDHUP/POLLERR are reported whatever the mask).
    watchdog_ = std::thread([this] {
        pollfd p[2] = {{socket_, POLLRDHUP, 0}, {watchdog_stop_, POLLIN, 0}};
        for (;;) {
            if (poll(p, 2, -1) < 0) {
                if (errno == EINTR) continue;
                watchdog_watching_.store(false, std::memory_order_relaxed);  // the data path probes again
                return;
            }
            if (p[1].revents != 0) return;
            if ((p[0].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) {
                mark_dead();
                return;
            }
        }
    });
    return 0;
}

void Connection::stop_watchdog() noexcept {
    if (!watchdog_.joinable()) return;
    if (getpid() != owner_pid_) {
        watchdog_.detach();  // the thread exists only in the parent
        return;
    }
    const uint64_t one = 1;
    (void)!write(watchdog_stop_, &one, sizeof one);
    watchdog_.join();
}

Connection::~Connection() {
    stop_watchdog();
    if (watchdog_stop_ >= 0) close(watchdog_stop_);
    // The daemon reclaims everything of this session when the socket closes.
    if (socket_ >= 0) close(socket_);
    for (auto& [lkey, mr] : mrs_) PageSharer::instance().release(mr->shared);
    for (auto& [handle, ch] : channels_) {
        close(ch->fd);
        close(ch->wake_fd);
    }
    if (status_ != nullptr) munmap(const_cast<abi::StatusPage*>(status_), status_bytes_);
    for (int fd : {kick_fd_, async_fd_, async_wake_fd_})
        if (fd >= 0) close(fd);
}

int Connection::call(abi::Op op, std::span<const uint8_t> body, std::span<const int> fds_out,
                     std::vector<uint8_t>* reply, std::vector<int>* fds_in) try {
    if (dead()) return EIO;
    std::lock_guard lock(call_lock_);
    abi::MessageHeader h{};
    h.magic = abi::kMagic;
    h.version = abi::kAbiVersion;
    h.op = static_cast<uint16_t>(op);
    h.seq = ++seq_;
    h.length = static_cast<uint32_t>(sizeof h + body.size());
    std::vector<uint8_t> msg(sizeof h + body.size());
    std::memcpy(msg.data(), &h, sizeof h);
    if (!body.empty()) std::memcpy(msg.data() + sizeof h, body.data(), body.size());

    int rc = detail::send_message(socket_, msg, fds_out);
    if (rc != 0) {
        if (peer_gone(rc)) {
            mark_dead();
            return EIO;
        }
        return rc;
    }
    std::vector<int> fds;
    pollfd p{socket_, POLLIN, 0};
    do rc = poll(&p, 1, reply_timeout_ms_);
    while (rc < 0 && errno == EINTR);
    if (rc == 0) {
        mark_dead();  // a late reply would answer the wrong request: the session is over
        return ETIMEDOUT;
    }
    rc = detail::receive_message(socket_, msg, fds);
    if (rc != 0) {
        mark_dead();  // the stream of replies is lost either way
        return EIO;
    }
    abi::MessageHeader r{};
    if (msg.size() >= sizeof r) std::memcpy(&r, msg.data(), sizeof r);
    if (msg.size() < sizeof r || r.magic != abi::kMagic || r.version != abi::kAbiVersion || r.op != h.op ||
        r.seq != h.seq || r.length != msg.size() || r.status < 0) {
        detail::close_all(fds);
        mark_dead();
        return EIO;
    }
    if (r.status != 0) {
        detail::close_all(fds);
        return r.status;
    }
    if (reply != nullptr) reply->assign(msg.begin() + sizeof r, msg.end());
    if (fds_in != nullptr)
        *fds_in = std::move(fds);
    else
        detail::close_all(fds);
    return 0;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

void Connection::mark_dead() noexcept {
    if (dead_.exchange(true, std::memory_order_acq_rel)) return;
    {
        std::lock_guard lock(objects_lock_);
        // Wake every waiter: a sleeping application must come and poll its flush completions.
        for (auto& [handle, ch] : channels_) {
            for (Cq* cq : ch->cqs) cq->death_event_pending = true;
            if (!ch->cqs.empty()) detail::send_byte(ch->wake_fd);
        }
    }
    if (async_wake_fd_ >= 0) detail::send_byte(async_wake_fd_);
}

bool Connection::probe_dead() noexcept {
    if (dead()) return true;
    pollfd p{socket_, POLLRDHUP, 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) mark_dead();
    return dead();
}

Result<abi::PortAttr> Connection::query_port(uint8_t port_num) try {
    if (port_num != 1) return Error{EINVAL};
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::QueryPort, {}, {}, &reply, nullptr); rc != 0) return Error{rc};
    if (reply.size() != sizeof(abi::PortAttr)) return Error{EPROTO};
    abi::PortAttr attr;
    std::memcpy(&attr, reply.data(), sizeof attr);
    return attr;
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

Result<std::string> Connection::stats(uint32_t what, uint32_t first_qpn) try {
    const abi::StatsRequest req{what, first_qpn};
    std::vector<uint8_t> reply;
    if (const int rc = call(abi::Op::Stats, {reinterpret_cast<const uint8_t*>(&req), sizeof req}, {}, &reply, nullptr);
        rc != 0)
        return Error{rc};
    return std::string(reply.begin(), reply.end());
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return Error{ENOMEM};
}

int Connection::set_log_level(const std::string& level) try {
    abi::SetLogLevelRequest req{};
    if (level.empty() || level.size() >= sizeof req.level) return EINVAL;
    std::memcpy(req.level, level.data(), level.size());
    return call(abi::Op::SetLogLevel, {reinterpret_cast<const uint8_t*>(&req), sizeof req}, {}, nullptr, nullptr);
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

int Connection::set_congestion_params(const std::vector<std::pair<std::string, uint64_t>>& params) try {
    abi::SetCongestionParamRequest req{};
    if (params.empty() || params.size() > abi::kMaxCongestionParams) return EINVAL;
    req.count = static_cast<uint32_t>(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
        const auto& [name, value] = params[i];
        if (name.empty() || name.size() >= sizeof req.params[i].name) return EINVAL;
        std::memcpy(req.params[i].name, name.data(), name.size());
        req.params[i].value = value;
    }
    return call(abi::Op::SetCongestionParam, {reinterpret_cast<const uint8_t*>(&req), sizeof req}, {}, nullptr,
                nullptr);
} catch (...) {  // allocation failure: verbs report it as ENOMEM
    return ENOMEM;
}

}  // namespace rnic::host::client
