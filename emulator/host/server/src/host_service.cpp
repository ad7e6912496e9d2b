// HostService's glue: set-up (status page, kick eventfd, socket), the per-turn call, sleeping
// inside Asio without losing a doorbell, and shutdown.
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "service_impl.hpp"

namespace rnic::host::server {

std::string default_run_dir() {
    const char* env = std::getenv(abi::kRunDirEnv);
    return env && *env ? env : abi::kDefaultRunDir;
}

HostService::Impl::Impl(boost::asio::io_context& io_context, transport::Engine& e, ServerConfig c, Resolver r,
                        CounterSource extra)
    : io(io_context),
      engine(e),
      config(std::move(c)),
      resolver(std::move(r)),
      extra_counters(std::move(extra)),
      daemon_uid(static_cast<uint32_t>(getuid())),
      daemon_pid(static_cast<uint32_t>(getpid())),
      work_guard(io_context.get_executor()),
      nap_timer(io_context) {
    if (config.run_dir.empty()) config.run_dir = default_run_dir();
    path = config.run_dir + "/" + config.name + ".sock";
}

HostService::Impl::~Impl() {
    std::vector<std::shared_ptr<Session>> all;
    for (auto& [id, s] : sessions) all.push_back(s);
    for (auto& s : all) close_session(*s, "daemon stopping");
    if (listening) {
        boost::system::error_code ec;
        acceptor->close(ec);
        unlink(path.c_str());
    }
    kick.reset();  // closes kick_fd
}

void HostService::Impl::arm_kick() {
    if (kick_armed) return;
    kick_armed = true;
    kick->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        kick_armed = false;
        if (ec) return;
        woken = true;
        ++counters.kicks;
        uint64_t v;
        (void)!read(kick_fd, &v, sizeof v);
    });
}

void HostService::Impl::sleep(uint64_t max_ns) {
    // docs/host_interface.md: advertise the nap, fence, look at the doorbells once more. A client
    // either sees `sleeping` (and kicks) or its producer store is visible to this scan.
    status->sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (doorbells_pending()) {
        status->sleeping.store(0, std::memory_order_relaxed);
        return;
    }
    ++counters.naps;
    arm_kick();
    woken = false;
    nap_done = false;
    const uint64_t generation = ++nap_generation;
    nap_timer.expires_after(std::chrono::nanoseconds(max_ns));
    nap_timer.async_wait([this, generation](const boost::system::error_code& ec) {
        if (!ec && generation == nap_generation) nap_done = true;
    });
    // One handler at a time: a stale handler (an earlier nap's cancelled timer) must not end
    // this one, a control message or a kick must.
    while (!woken && !nap_done) io.run_one();
    if (!nap_done) nap_timer.cancel();
    status->sleeping.store(0, std::memory_order_relaxed);
    uint64_t v;
    (void)!read(kick_fd, &v, sizeof v);  // non-blocking: a kick that raced our waking
}

// ---------------------------------------------------------------------------------------------

HostService::HostService(boost::asio::io_context& io, transport::Engine& engine, ServerConfig config, Resolver resolver,
                         CounterSource counters)
    : impl_(std::make_unique<Impl>(io, engine, std::move(config), std::move(resolver), std::move(counters))) {}

HostService::~HostService() = default;

void HostService::start() {
    Impl& m = *impl_;
    if (int rc = m.status_memory.create("rnic-status", sizeof(abi::StatusPage)); rc)
        throw std::runtime_error(std::string("status page: ") + std::strerror(rc));
    m.status = new (m.status_memory.data()) abi::StatusPage{};
    m.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m.kick_fd < 0) throw std::runtime_error(std::string("kick eventfd: ") + std::strerror(errno));
    m.kick.emplace(m.io, m.kick_fd);
    m.listen();
    spdlog::info("control socket {}", m.path);
}

size_t HostService::poll(uint64_t now_ns) {
    Impl& m = *impl_;
    m.now_ns = now_ns;
    if (m.status) m.status->loop_turns.fetch_add(1, std::memory_order_relaxed);
    size_t work = m.scan_work_queues();
    work += m.deliver_completions();
    work += m.deliver_events();
    for (const auto& [id, s] : m.sessions)
        if (s->deferred) {
            work += m.run_deferred();
            break;
        }
    return work;
}

void HostService::poll_control() {
    impl_->io.poll();
}

void HostService::sleep(uint64_t max_ns) {
    impl_->sleep(max_ns);
}

void HostService::shutdown(uint64_t now_ns) {
    Impl& m = *impl_;
    m.now_ns = now_ns;
    if (m.status) m.status->shutting_down.store(1, std::memory_order_release);
    for (auto& [id, s] : m.sessions) m.push_async(*s, static_cast<uint32_t>(transport::EventType::DeviceFatal), 1);
    for (auto& [qpn, qp] : m.qps) m.qp_to_error(*qp);
    m.deliver_completions();  // the flush completions reach the rings before the sessions go
    std::vector<std::shared_ptr<Session>> all;
    for (auto& [id, s] : m.sessions) all.push_back(s);
    for (auto& s : all) m.close_session(*s, "daemon stopping");
    if (m.listening) {
        m.listening = false;
        boost::system::error_code ec;
        m.acceptor->close(ec);
        unlink(m.path.c_str());
    }
    m.io.poll();  // let aborted handlers run while everything they name is alive
}

std::string HostService::stats_json() const {
    return impl_->stats_json();
}
std::string HostService::socket_path() const {
    return impl_->path;
}
size_t HostService::session_count() const {
    return impl_->sessions.size();
}
const abi::StatusPage& HostService::status() const {
    return *impl_->status;
}

}  // namespace rnic::host::server
