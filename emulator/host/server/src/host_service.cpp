// HostService's glue: set-up (status page, socket), the per-turn call, the sessions' kick
// eventfds, sleeping inside Asio without losing a doorbell, and shutdown.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "notify_socket.hpp"
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
    pinned = config.pinned_pages ? config.pinned_pages : std::make_shared<PinnedPages>();
    path = config.run_dir + "/" + config.name + ".sock";
    start_cm();
    start_odp();
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
    if (wake) (void)wake->release();  // the port's, not ours to close
}

// Each session kicks on its own eventfd, so no client can take another's kick (one shared
// eventfd, which any client could read, let one client make the daemon sleep through the
// others' doorbells until the nap cap). The wait is armed again by its handler: it stays armed
// across naps, so a kick written while the daemon is awake is taken by the next poll_control and
// costs no wake-up. The client shares the eventfd's file description and may have cleared
// O_NONBLOCK and taken the count between the readiness and our read: take_kick never waits.
void HostService::Impl::arm_kick(const std::shared_ptr<Session>& s) {
    if (s->closed || !s->kick || s->kick_armed) return;
    s->kick_armed = true;
    s->kick->async_wait(Session::Socket::wait_read, [this, s](const boost::system::error_code& ec) {
        s->kick_armed = false;
        if (ec || s->closed || !s->kick) return;
        const int rc = take_kick(s->kick->native_handle());
        if (rc > 0) {
            woken = true;
            kicked = true;
            if (s->doorbells) kick_cpu = s->doorbells->kick_cpu.load(std::memory_order_relaxed);
            ++counters.kicks;
        }
        if (rc < 0) {
            // Cannot happen after start()'s check; waiting again would spin on the readiness.
            spdlog::error("session {}: kick eventfd unreadable ({}); no more kicks from it", s->id, std::strerror(-rc));
            s->kick.reset();
            return;
        }
        arm_kick(s);
    });
}

// Asio's reactor registers descriptors edge-triggered, but starting a wait re-polls the
// descriptor (EPOLL_CTL_MOD), so a wait armed on an fd that is already readable completes at
// once: arming after the port's last look is safe. The handler does not read the fd: the port
// drains its own wake-ups when it arms them.
void HostService::Impl::arm_wake() {
    if (!wake || wake_armed) return;
    wake_armed = true;
    wake->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [this, generation = wake_generation](const boost::system::error_code& ec) {
                         if (generation != wake_generation) return;  // a descriptor set_wake_fd replaced
                         wake_armed = false;
                         if (!ec) wake_fired = true;
                     });
}

void HostService::Impl::set_wake_fd(int fd) {
    if (wake) {
        (void)wake->release();  // cancels the wait; the port owns the fd
        wake.reset();
    }
    ++wake_generation;
    wake_armed = false;
    if (fd >= 0) wake.emplace(io, fd);
}

bool HostService::Impl::begin_nap() {
    // docs/host_interface.md: advertise the nap, fence, look at the doorbells once more. A client
    // either sees `sleeping` (and kicks) or its producer store is visible to this scan.
    status->sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (doorbells_pending()) {
        status->sleeping.store(0, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void HostService::Impl::cancel_nap() {
    status->sleeping.store(0, std::memory_order_relaxed);
}

void HostService::Impl::arm_nap(bool wake_on_rx) {
    ++counters.naps;
    woken = kicked = wake_fired = false;
    kick_cpu = UINT32_MAX;
    if (wake_on_rx) arm_wake();
}

// The timer is reprogrammed only when this nap must end earlier than the armed expiry: a busy
// loop naps thousands of times a second, mostly ended by a frame or a kick, and setting and
// cancelling a timerfd around each nap would put two syscalls (VM exits here) on the path of
// every wake-up. An armed expiry earlier than needed ends the nap early: one idle turn.
void HostService::Impl::arm_nap_timer(uint64_t max_ns) {
    nap_done = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(max_ns);
    if (!nap_timer_armed || end < nap_timer.expiry()) {
        const uint64_t generation = ++nap_generation;
        nap_timer_armed = true;
        nap_timer.expires_at(end);
        nap_timer.async_wait([this, generation](const boost::system::error_code& ec) {
            if (ec || generation != nap_generation) return;  // replaced by an earlier expiry
            nap_timer_armed = false;
            nap_done = true;
        });
    }
}

NapEnd HostService::Impl::end_nap() {
    status->sleeping.store(0, std::memory_order_relaxed);
    // A kick that races our waking is not read here: the session's armed kick wait reads it (a
    // spurious wake at worst), which keeps a syscall off every wake-up.
    if (kicked) return NapEnd::Kick;
    if (wake_fired) return NapEnd::Wake;
    if (woken) return NapEnd::Control;
    return NapEnd::Timer;
}

namespace {

// One nap for the `count` services impl_at(0) ... impl_at(count - 1) (the first owns the timer):
// any of them woken ends it. An accessor rather than a container, so the poll loop's nap
// allocates nothing (and no <ranges>: clang 14 cannot compile libstdc++ 12's).
template <class ImplAt>
NapEnd nap_together(size_t count, ImplAt impl_at, uint64_t max_ns, bool wake_on_rx) {
    for (size_t i = 0; i < count; ++i) impl_at(i)->arm_nap(wake_on_rx);
    HostService::Impl& timer_owner = *impl_at(0);
    timer_owner.arm_nap_timer(max_ns);
    // One handler at a time: the timer firing between naps ends no nap (nap_done is reset above
    // and the timer armed again); a control message, a kick or a frame of any service ends this one.
    auto any_woken = [&] {
        for (size_t i = 0; i < count; ++i)
            if (impl_at(i)->woken || impl_at(i)->wake_fired) return true;
        return false;
    };
    while (!any_woken() && !timer_owner.nap_done) timer_owner.io.run_one();
    NapEnd why = NapEnd::Timer;
    for (size_t i = 0; i < count; ++i) {
        const NapEnd e = impl_at(i)->end_nap();
        if (e == NapEnd::Timer) continue;
        // The most telling reason: a kick, then a frame, then a control message.
        if (why == NapEnd::Timer || static_cast<int>(e) < static_cast<int>(why)) why = e;
    }
    return why;
}

}  // namespace

NapEnd HostService::Impl::nap(uint64_t max_ns, bool wake_on_rx) {
    return nap_together(
        1, [this](size_t) { return this; }, max_ns, wake_on_rx);
}

// ---------------------------------------------------------------------------------------------

HostService::HostService(boost::asio::io_context& io, transport::Engine& engine, ServerConfig config, Resolver resolver,
                         CounterSource counters)
    : impl_(std::make_unique<Impl>(io, engine, std::move(config), std::move(resolver), std::move(counters))) {}

HostService::~HostService() = default;

void HostService::start() {
    Impl& m = *impl_;
    // Read-only for clients: `sleeping` is the daemon's half of the doorbell protocol, and a
    // client clearing it would stop every other client's kicks.
    if (int rc = m.status_memory.create("rnic-status", sizeof(abi::StatusPage), SharedMemory::ClientAccess::ReadOnly);
        rc)
        throw std::runtime_error(std::string("status page: ") + std::strerror(rc));
    m.status = new (m.status_memory.data()) abi::StatusPage{};
    m.status->latency_trace.store(m.latency_trace ? 1 : 0, std::memory_order_relaxed);
    if (!kick_reads_never_wait())
        throw std::runtime_error("this kernel cannot read an eventfd without waiting (preadv2 RWF_NOWAIT)");
    m.listen();
    spdlog::info("control socket {} (mode {:04o}{})", m.path, m.config.socket_mode,
                 m.config.socket_gid ? ", group " + std::to_string(*m.config.socket_gid) : std::string());
}

size_t HostService::poll(uint64_t now_ns) {
    Impl& m = *impl_;
    m.now_ns = now_ns;
    if (m.status) m.status->loop_turns.fetch_add(1, std::memory_order_relaxed);
    size_t work = m.scan_work_queues();
    work += m.deliver_completions();
    work += m.deliver_events();
    work += m.run_deferred();
    work += m.poll_odp();
    return work;
}

// A bounded number of handlers per call. Each session's handler reads one message and waits
// again, and a wait on a socket with more queued completes on the reactor's next round, so the
// sessions are served in turn, one message each; but io_context::poll() would go on as long as
// any session keeps sending, and one client pipelining requests would hold the loop here while
// every doorbell and frame waited.
void HostService::poll_control() {
    for (size_t i = 0; i < kControlHandlersPerPoll && impl_->io.poll_one(); ++i) {
    }
}

uint32_t HostService::last_kick_cpu() const noexcept {
    return impl_->kicked ? impl_->kick_cpu : UINT32_MAX;
}

bool HostService::begin_nap() {
    return impl_->begin_nap();
}
void HostService::cancel_nap() {
    impl_->cancel_nap();
}
NapEnd HostService::nap(uint64_t max_ns, bool wake_on_rx) {
    return impl_->nap(max_ns, wake_on_rx);
}
NapEnd HostService::nap_all(std::span<HostService* const> services, uint64_t max_ns, bool wake_on_rx) {
    return nap_together(
        services.size(), [services](size_t i) { return services[i]->impl_.get(); }, max_ns, wake_on_rx);
}
NapEnd HostService::sleep(uint64_t max_ns) {
    return impl_->begin_nap() ? impl_->nap(max_ns, true) : NapEnd::Skipped;
}
void HostService::set_wake_fd(int fd) {
    impl_->set_wake_fd(fd);
}

void HostService::shutdown(uint64_t now_ns) {
    Impl& m = *impl_;
    m.now_ns = now_ns;
    if (m.status) m.status->shutting_down.store(1, std::memory_order_release);
    m.set_wake_fd(-1);  // the port may be closed before this service is destroyed
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

std::string HostService::stats_json(uint32_t what, uint32_t first_qpn) const {
    return impl_->stats_json(std::nullopt, what, first_qpn);
}
std::string HostService::socket_path() const {
    return impl_->path;
}
size_t HostService::session_count() const {
    return impl_->sessions.size();
}
cm::CmService& HostService::cm() noexcept {
    return *impl_->cm;
}

const abi::StatusPage& HostService::status() const {
    return *impl_->status;
}

}  // namespace rnic::host::server
