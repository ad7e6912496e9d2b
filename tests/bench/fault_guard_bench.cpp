// What the SIGBUS guard costs per copy: ns per 64 B and 4 KiB copy into a MAP_SHARED memfd page
// (memory as rnicd maps a client's segment), plain memcpy beside guarded_memcpy, then the same
// through MemoryTable::copy_in/copy_out (key check, MTT walk and guard, as the engine calls
// them). Usage: fault_guard_bench [ITERATIONS]
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rnic/memory/fault_guard.hpp"
#include "rnic/memory/memory_table.hpp"

using namespace rnic::mem;
using Clock = std::chrono::steady_clock;

namespace {

template <class F>
double ns_per_op(long iterations, F&& f) {
    for (long i = 0; i < iterations / 10 + 1; ++i) f(i);  // warm caches and branch predictors
    const auto t0 = Clock::now();
    for (long i = 0; i < iterations; ++i) f(i);
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(iterations);
}

// Keeps the compiler from dropping or merging copies whose result nobody reads.
inline void clobber(void* p) {
    asm volatile("" : : "r"(p) : "memory");
}

}  // namespace

int main(int argc, char** argv) {
    const long iterations = argc > 1 ? std::atol(argv[1]) : 5'000'000;
    constexpr size_t kPages = 4;
    const int fd = memfd_create("fault-guard-bench", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, kPages * kPageSize) != 0) return 1;
    void* mapped = mmap(nullptr, kPages * kPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) return 1;
    auto* region = static_cast<uint8_t*>(mapped);
    std::memset(region, 0x3C, kPages * kPageSize);
    if (!install_fault_guard()) return 1;

    MemoryTable table;
    const RegResult r = table.register_mr(1, region, kPages * kPageSize, 0x10000,
                                          kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
    if (!r.ok()) return 1;

    std::printf("%-8s %12s %12s %10s %14s %14s\n", "size", "memcpy ns", "guarded ns", "overhead", "copy_in ns",
                "copy_out ns");
    for (size_t size : {size_t{64}, size_t{4096}}) {
        std::vector<uint8_t> frame(size, 0xA5);
        // A size the compiler cannot see, so both copies call libc's memcpy as the engine's do.
        volatile size_t opaque = size;
        const size_t n = opaque;
        const long count = size > 1024 ? iterations / 8 : iterations;
        uint8_t* dst = region + kPageSize;  // page-aligned: one page per 4 KiB copy

        const double plain = ns_per_op(count, [&](long) {
            std::memcpy(dst, frame.data(), n);
            clobber(dst);
        });
        const double guarded = ns_per_op(count, [&](long) {
            if (!guarded_memcpy(dst, frame.data(), n)) std::abort();
            clobber(dst);
        });
        const double in = ns_per_op(count, [&](long) {
            if (table.copy_in(r.keys.rkey, 1, 0x10000 + kPageSize, {frame.data(), n}, true) != AccessError::None)
                std::abort();
        });
        const double out = ns_per_op(count, [&](long) {
            if (table.copy_out(r.keys.lkey, 1, 0x10000 + kPageSize, {frame.data(), n}, false) != AccessError::None)
                std::abort();
            clobber(frame.data());
        });
        std::printf("%-8zu %12.1f %12.1f %9.1f %14.1f %14.1f\n", size, plain, guarded, guarded - plain, in, out);
    }
    munmap(mapped, kPages * kPageSize);
    close(fd);
    return 0;
}
