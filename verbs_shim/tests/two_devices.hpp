// What the two-rnicd verbs tests share besides the RC bring-up (rc_bring_up.hpp): the two devices
// (rnic0 and rnic1 of one run directory) with a PD each, anonymous pages of the test's own, a
// bounded wait for completions and the RoCE v2 GID of port 1.
#pragma once

#include <catch2/catch.hpp>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace rnic::test {

struct Device {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    explicit Device(int index) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        REQUIRE(list != nullptr);
        REQUIRE(n >= 2);
        ctx = ibv_open_device(list[index]);
        ibv_free_device_list(list);
        REQUIRE(ctx != nullptr);
        pd = ibv_alloc_pd(ctx);
        REQUIRE(pd != nullptr);
    }
    ~Device() {
        ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
    }
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
};

// Anonymous pages of the test's own, so a test can unmap or remap some under a live region.
struct Pages {
    uint8_t* p = nullptr;
    size_t size;
    explicit Pages(size_t bytes) : size(bytes) {
        p = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        REQUIRE(p != MAP_FAILED);
    }
    ~Pages() { munmap(p, size); }
    Pages(const Pages&) = delete;
    Pages& operator=(const Pages&) = delete;
    uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(p + off); }
};

// Polls `cq` until `want` completions came or `seconds` passed; what came.
inline std::vector<ibv_wc> wait_for(ibv_cq* cq, size_t want, int seconds = 10) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc[16];
        const int n = ibv_poll_cq(cq, 16, wc);
        REQUIRE(n >= 0);
        out.insert(out.end(), wc, wc + n);
        if (n == 0) usleep(50);
    }
    return out;
}

inline ibv_gid gid0(ibv_context* ctx) {
    ibv_gid g{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &g) == 0);
    return g;
}

}  // namespace rnic::test
