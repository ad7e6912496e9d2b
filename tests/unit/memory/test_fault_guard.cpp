// Registered memory whose file shrinks under the table: copies and atomics into the lost pages
// come back as AccessError::Fault instead of killing the process, and a SIGBUS outside a guarded
// access still does.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "rnic/memory/fault_guard.hpp"
#include "test_support.hpp"

using namespace rnic::mem;
using namespace rnic::mem::test;

namespace {

// `pages` of a memfd mapped MAP_SHARED, as rnicd maps a client's segment.
struct FileMapping {
    explicit FileMapping(std::size_t pages) : size(pages * kPageSize) {
        fd = memfd_create("fault-guard-test", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(ftruncate(fd, static_cast<off_t>(size)) == 0);
        void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(p != MAP_FAILED);
        data = static_cast<uint8_t*>(p);
    }
    ~FileMapping() {
        munmap(data, size);
        close(fd);
    }
    void shrink_to(std::size_t pages) const { REQUIRE(ftruncate(fd, static_cast<off_t>(pages * kPageSize)) == 0); }
    int fd = -1;
    std::size_t size = 0;
    uint8_t* data = nullptr;
};

uint64_t fault_count(const MemoryTable& t, bool remote) {
    const auto& c = t.raw_counters();
    return (remote ? c.remote_access_errors : c.local_access_errors)[static_cast<std::size_t>(AccessError::Fault)];
}

// How a SIGBUS ends a process when the guard passes it on: by the signal itself, unless a
// sanitizer's handler was there first (the guard chains to it), which reports and aborts
// (abort_on_error=1 in the tests' ASAN_OPTIONS).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kFatalSignal = SIGABRT;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kFatalSignal = SIGABRT;
#else
constexpr int kFatalSignal = SIGBUS;
#endif
#else
constexpr int kFatalSignal = SIGBUS;
#endif

// Runs `body` in a child process and returns its wait status.
template <class Body>
int in_child(Body body) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        body();
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return status;
}

}  // namespace

TEST_CASE("copies and atomics into pages a shrunk file lost are Fault, counted, and harmless", "[fault]") {
    MemoryTable table(small_config());
    FileMapping file(3);
    constexpr uint64_t kIova = 0x40000;
    const RegResult r = table.register_mr(kPd, file.data, file.size, kIova, kAllRights);
    REQUIRE(r.ok());
    std::vector<uint8_t> bytes(256, 0x5A);
    REQUIRE(table.copy_in(r.keys.rkey, kPd, kIova + 2 * kPageSize, bytes, true) == AccessError::None);

    file.shrink_to(1);
    const uint64_t recovered = recovered_faults();
    CHECK(table.copy_in(r.keys.rkey, kPd, kIova + 2 * kPageSize, bytes, true) == AccessError::Fault);
    CHECK(table.copy_out(r.keys.lkey, kPd, kIova + kPageSize + 8, bytes, false) == AccessError::Fault);
    CHECK(table.fetch_and_add(r.keys.rkey, kPd, kIova + 2 * kPageSize, 1).error == AccessError::Fault);
    CHECK(table.compare_and_swap(r.keys.rkey, kPd, kIova + kPageSize, 0, 1).error == AccessError::Fault);
    CHECK(fault_count(table, true) == 3);
    CHECK(fault_count(table, false) == 1);
    CHECK(recovered_faults() == recovered + 4);
    CHECK(last_fault_address() == file.data + kPageSize);

    // The page the file kept still works, and a copy running into the lost one faults after
    // writing what came before it.
    CHECK(table.copy_in(r.keys.rkey, kPd, kIova + 16, bytes, true) == AccessError::None);
    CHECK(table.fetch_and_add(r.keys.rkey, kPd, kIova + 8, 5).original == 0);
    CHECK(table.copy_in(r.keys.rkey, kPd, kIova + kPageSize - 100, bytes, true) == AccessError::Fault);
    CHECK(file.data[kPageSize - 1] == 0x5A);
    CHECK(table.copy_out(r.keys.lkey, kPd, kIova + 16, bytes, false) == AccessError::None);

    // Grown back, the pages read as zeros (the file's hole), not what was written before.
    REQUIRE(ftruncate(file.fd, static_cast<off_t>(file.size)) == 0);
    CHECK(table.copy_out(r.keys.lkey, kPd, kIova + 2 * kPageSize, bytes, false) == AccessError::None);
    CHECK(bytes[0] == 0);
}

TEST_CASE("guarded_memcpy: each thread recovers its own fault", "[fault]") {
    FileMapping file(2);
    file.shrink_to(1);
    REQUIRE(install_fault_guard());
    std::vector<std::thread> threads;
    std::atomic<int> recovered{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            uint8_t local[64] = {};
            for (int i = 0; i < 1000; ++i) {
                if (!guarded_memcpy(local, file.data + kPageSize + 64, sizeof local) &&
                    guarded_memcpy(local, file.data, sizeof local))
                    recovered.fetch_add(1);
            }
        });
    for (auto& t : threads) t.join();
    CHECK(recovered.load() == 4000);
}

TEST_CASE("a SIGBUS outside a guarded access, or one sent by kill, still ends the process", "[fault]") {
    FileMapping file(2);
    file.shrink_to(1);
    int status = in_child([&] {
        MemoryTable table(small_config());  // installs the handler
        volatile uint8_t* lost = file.data + kPageSize;
        *lost = 1;
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == kFatalSignal);

    status = in_child([&] {
        REQUIRE(install_fault_guard());
        auto send_bus = [] { raise(SIGBUS); };
        (void)guarded(send_bus);
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == kFatalSignal);

    // The guarded access itself survives in the child as it does here.
    status = in_child([&] {
        if (!install_fault_guard()) _exit(4);
        uint8_t b = 0;
        if (guarded_memcpy(&b, file.data + kPageSize, 1)) _exit(3);
    });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
