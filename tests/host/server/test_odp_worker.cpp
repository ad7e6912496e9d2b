// The ODP worker (process_memory.hpp) against a real child process: copies go through and cost
// microseconds; a copy into pages whose faults nobody serves (userfaultfd, as root) makes the
// access Pending after the short wait, the worker busy (later accesses Pending at once, no wait),
// the per-client budget bounds the waiting, the notifier tells the loop when the stuck copy ends
// (the child's exit takes its userfaultfd away) and the worker thread is gone afterwards; a
// worker started from a thread pinned to one CPU runs on every CPU the process had at start.
#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include "peer_process.hpp"
#include "process_memory.hpp"

using namespace rnic::host::server;
using rnic::mem::OdpResult;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kSize = 64 * 1024;

// A child holding a plain buffer and, if asked, a range behind a userfaultfd it never reads (or,
// with `serve_us`, serves each fault with a zero page that long after it came). It tells its
// addresses through a pipe and lives until that pipe's other end closes.
struct Child {
    pid_t pid = -1;
    uint64_t plain = 0, trap = 0;
    int control = -1;  // closing it ends the child
    explicit Child(bool with_trap, int serve_us = 0) {
        int up[2], down[2];
        REQUIRE(pipe(up) == 0);
        REQUIRE(pipe(down) == 0);
        pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(up[0]);
            close(down[1]);
            auto* p =
                static_cast<uint8_t*>(mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
            for (size_t i = 0; i < kSize; ++i) p[i] = static_cast<uint8_t>(i * 7);
            uint64_t addrs[2] = {reinterpret_cast<uint64_t>(p), 0};
            int uffd = -1;
            if (with_trap) {
                void* t = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
                uffdio_api api{};
                api.api = UFFD_API;
                uffdio_register reg{};
                reg.range.start = reinterpret_cast<uint64_t>(t);
                reg.range.len = kSize;
                reg.mode = UFFDIO_REGISTER_MODE_MISSING;
                if (uffd >= 0 && ioctl(uffd, UFFDIO_API, &api) == 0 && ioctl(uffd, UFFDIO_REGISTER, &reg) == 0)
                    addrs[1] = reinterpret_cast<uint64_t>(t);
            }
            (void)!write(up[1], addrs, sizeof addrs);
            for (;;) {  // until the parent closes its end
                pollfd fds[2] = {{down[0], POLLIN, 0}, {serve_us > 0 ? uffd : -1, POLLIN, 0}};
                if (poll(fds, 2, -1) < 0) continue;
                if (fds[0].revents) _exit(0);
                uffd_msg msg{};
                if (fds[1].revents && read(uffd, &msg, sizeof msg) == sizeof msg && msg.event == UFFD_EVENT_PAGEFAULT) {
                    usleep(static_cast<useconds_t>(serve_us));
                    uffdio_zeropage z{};
                    z.range.start = msg.arg.pagefault.address & ~uint64_t{4095};
                    z.range.len = 4096;
                    ioctl(uffd, UFFDIO_ZEROPAGE, &z);
                }
            }
        }
        close(up[1]);
        close(down[0]);
        control = down[1];
        uint64_t addrs[2] = {};
        REQUIRE(read(up[0], addrs, sizeof addrs) == sizeof addrs);
        close(up[0]);
        plain = addrs[0];
        trap = addrs[1];
    }
    void end() {
        if (control >= 0) close(control);
        control = -1;
        if (pid > 0) waitpid(pid, nullptr, 0);
        pid = -1;
    }
    ~Child() { end(); }
    ProcessId id() const { return {static_cast<uint32_t>(pid), *process_start_time(static_cast<uint32_t>(pid))}; }
};

bool eventually(const std::function<bool()>& f, int ms = 5000) {
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return f();
}

// An access asked again while Pending, once the worker is idle, as the engine does: on a loaded
// machine the worker may take longer than the wait to be scheduled.
OdpResult settled(ProcessMemory& m, const std::function<OdpResult()>& access) {
    OdpResult r;
    while ((r = access()) == OdpResult::Pending)
        if (!eventually([&] { return !m.busy(); })) break;
    return r;
}

}  // namespace

TEST_CASE("ODP worker: copies of a child's memory, and their cost") {
    // Workers of earlier tests (sessions of this binary) end by themselves: start from none.
    REQUIRE(eventually([] { return odp_worker_totals().workers_alive == 0; }));
    const uint64_t workers_before = 0;
    Child child(false);
    auto notifier = std::make_shared<OdpNotifier>();
    auto m = ProcessMemory::open(child.id(), notifier);
    REQUIRE(m);
    CHECK(eventually([&] { return odp_worker_totals().workers_alive == workers_before + 1; }));
    std::vector<uint8_t> buf(4096);
    REQUIRE(settled(*m, [&] { return m->read(child.plain + 100, buf); }) == OdpResult::Done);
    for (size_t i = 0; i < buf.size(); ++i) REQUIRE(buf[i] == static_cast<uint8_t>((100 + i) * 7));
    std::vector<uint8_t> data(4096, 0xA5);
    REQUIRE(settled(*m, [&] { return m->write(child.plain, data); }) == OdpResult::Done);
    REQUIRE(settled(*m, [&] { return m->read(child.plain, buf); }) == OdpResult::Done);
    CHECK(buf == data);
    CHECK(settled(*m, [&] { return m->read(0x1000, buf); }) == OdpResult::Fault);  // nothing mapped there
    CHECK_FALSE(m->busy());

    // The cost of a 4 KiB access through the worker, against the direct call it replaced (on
    // the poll thread before). Printed for docs/host_interface.md; loosely bounded.
    constexpr int kRounds = 2000;
    // A copy may outlast the 1 ms wait on a loaded machine (the worker not scheduled): Pending,
    // then asked again once the worker is idle, as the engine would.
    int pendings = 0;
    auto t0 = Clock::now();
    for (int i = 0; i < kRounds; ++i) {
        OdpResult r;
        while ((r = m->read(child.plain, buf)) == OdpResult::Pending) {
            ++pendings;
            REQUIRE(eventually([&] { return !m->busy(); }));
        }
        REQUIRE(r == OdpResult::Done);
    }
    const double via_worker = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kRounds;
    t0 = Clock::now();
    for (int i = 0; i < kRounds; ++i) {
        iovec local{buf.data(), buf.size()}, remote{reinterpret_cast<void*>(child.plain), buf.size()};
        REQUIRE(process_vm_readv(child.pid, &local, 1, &remote, 1, 0) == 4096);
    }
    const double direct = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kRounds;
    // Not asserted: on a loaded machine a wake-up of the worker can take a scheduling quantum.
    WARN("4 KiB ODP read: " << via_worker << " us through the worker (" << pendings << " Pending of " << kRounds
                            << "), " << direct << " us direct");

    m.reset();  // an idle worker ends at once
    CHECK(eventually([&] { return odp_worker_totals().workers_alive == workers_before; }));
    (void)notifier->take();
}

TEST_CASE("ODP worker: a fault nobody serves stalls only the worker") {
    if (geteuid() != 0) {
        WARN("skipped: a userfaultfd that catches another process's accesses needs root");
        return;
    }
    REQUIRE(eventually([] { return odp_worker_totals().workers_alive == 0; }));
    const OdpWorkerTotals before = odp_worker_totals();
    Child child(true);
    REQUIRE(child.trap != 0);
    auto notifier = std::make_shared<OdpNotifier>();
    OdpWaitLimits limits;
    limits.wait_ns = 2'000'000;    // 2 ms
    limits.budget_ns = 5'000'000;  // 5 ms at once
    limits.refill_per_mille = 10;  // 1% of the time
    auto m = ProcessMemory::open(child.id(), notifier, limits);
    REQUIRE(m);
    std::vector<uint8_t> buf(4096);

    auto t0 = Clock::now();
    CHECK(m->write(child.trap + 64, buf) == OdpResult::Pending);
    const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    CHECK(first_ms >= 1.5);
    CHECK(first_ms < 200.0);  // the wait is bounded (slack for a loaded machine)
    CHECK(m->busy());
    // Busy: every later access of this client is Pending at once, the plain pages too (none
    // overtakes the stuck copy).
    t0 = Clock::now();
    for (int i = 0; i < 1000; ++i) REQUIRE(m->read(child.plain, buf) == OdpResult::Pending);
    const double busy_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 1000;
    CHECK(busy_us < 500.0);  // no wait at all (slack for preemption on a loaded machine)
    CHECK(odp_worker_totals().busy_pending >= before.busy_pending + 1000);
    CHECK_FALSE(notifier->take());

    // The child goes: its userfaultfd with it, the stuck copy returns (a fault), the loop hears.
    child.end();
    CHECK(eventually([&] { return !m->busy(); }));
    CHECK(notifier->take());
    CHECK(settled(*m, [&] { return m->read(child.plain, buf); }) == OdpResult::Fault);  // the process is gone
    m.reset();
    CHECK(eventually([&] { return odp_worker_totals().workers_alive == before.workers_alive; }));
}

TEST_CASE("ODP worker: a stuck worker outlives its session and ends with the client") {
    if (geteuid() != 0) {
        WARN("skipped: needs root");
        return;
    }
    REQUIRE(eventually([] { return odp_worker_totals().workers_alive == 0; }));
    const OdpWorkerTotals before = odp_worker_totals();
    Child child(true);
    REQUIRE(child.trap != 0);
    auto notifier = std::make_shared<OdpNotifier>();
    OdpWaitLimits limits;
    limits.wait_ns = 1'000'000;
    auto m = ProcessMemory::open(child.id(), notifier, limits);
    REQUIRE(m);
    std::vector<uint8_t> buf(64);
    CHECK(m->read(child.trap, buf) == OdpResult::Pending);
    m.reset();  // the session ends while the copy is stuck: the destructor does not wait
    CHECK(odp_worker_totals().workers_stuck == before.workers_stuck + 1);
    CHECK(odp_worker_totals().workers_alive == before.workers_alive + 1);
    child.end();
    CHECK(eventually([&] { return odp_worker_totals().workers_alive == before.workers_alive; }));
    CHECK(odp_worker_totals().workers_stuck == before.workers_stuck);
}

TEST_CASE("ODP worker: the per-client budget bounds repeated waits") {
    if (geteuid() != 0) {
        WARN("skipped: needs root");
        return;
    }
    // A client that serves each fault after 5 ms, under the 10 ms wait: without the budget every
    // access would hold the loop 5 ms.
    Child child(true, 5000);
    REQUIRE(child.trap != 0);
    auto notifier = std::make_shared<OdpNotifier>();
    OdpWaitLimits limits;
    limits.wait_ns = 10'000'000;
    limits.free_ns = 0;
    limits.budget_ns = 12'000'000;
    limits.refill_per_mille = 0;
    auto m = ProcessMemory::open(child.id(), notifier, limits);
    REQUIRE(m);
    const uint64_t budget_before = odp_worker_totals().budget_pending;
    std::vector<uint8_t> buf(64);
    double held_ms = 0;
    int done = 0, pending = 0;
    for (int page = 0; page < 10; ++page) {
        REQUIRE(eventually([&] { return !m->busy(); }));
        const auto t0 = Clock::now();
        const OdpResult r = m->read(child.trap + page * 4096, buf);
        held_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        (r == OdpResult::Done ? done : pending) += 1;
        if (r == OdpResult::Pending) {
            // Asked again once the worker is done: the finished copy's result, at once.
            REQUIRE(eventually([&] { return !m->busy(); }));
            CHECK(m->read(child.trap + page * 4096, buf) == OdpResult::Done);
        }
    }
    // Two faults fit the 12 ms budget, a third is cut short by it, the rest wait not at all.
    CHECK(done <= 3);
    CHECK(pending >= 7);
    CHECK(held_ms < 12.0 + 30.0);  // the budget, and slack for a loaded machine
    CHECK(odp_worker_totals().budget_pending >= budget_before + 7);
    (void)notifier->take();
}

namespace {

std::set<pid_t> own_threads() {
    std::set<pid_t> tids;
    DIR* dir = opendir("/proc/self/task");
    REQUIRE(dir != nullptr);
    for (int i = 0; i < 4096; ++i) {  // bounded: a test process has a handful of threads
        const dirent* e = readdir(dir);
        if (!e) break;
        if (e->d_name[0] != '.') tids.insert(static_cast<pid_t>(std::atoi(e->d_name)));
    }
    closedir(dir);
    return tids;
}

}  // namespace

TEST_CASE("ODP worker: runs on every CPU the daemon had at start, not only where the poll thread is pinned") {
    cpu_set_t start;
    REQUIRE(sched_getaffinity(0, sizeof start, &start) == 0);  // the test's main thread: never pinned
    if (CPU_COUNT(&start) < 2) {
        WARN("one CPU: nothing to tell apart");
        return;
    }
    Child child(false);
    // The worker is started from a thread pinned to one CPU, as rnicd's poll thread is at home.
    std::thread opener([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &start)) {
                CPU_SET(c, &one);
                break;
            }
        REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
        const std::set<pid_t> before = own_threads();
        auto m = ProcessMemory::open(child.id());
        REQUIRE(m);
        std::set<pid_t> added;
        for (pid_t t : own_threads())
            if (!before.count(t)) added.insert(t);
        REQUIRE(added.size() == 1);
        cpu_set_t worker;
        REQUIRE(sched_getaffinity(*added.begin(), sizeof worker, &worker) == 0);
        CHECK(CPU_EQUAL(&worker, &start));
        CHECK(CPU_COUNT(&worker) == CPU_COUNT(&start));
        cpu_set_t mine;
        REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
        CHECK(CPU_EQUAL(&mine, &one));  // the opener keeps its own
    });
    opener.join();
}
