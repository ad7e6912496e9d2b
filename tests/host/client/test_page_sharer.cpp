// The PageSharer swaps pages under the test's feet: every case checks that the application sees
// the same address, bytes and protection afterwards and that the daemon's view is the same memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "rnic/host/client/page_sharer.hpp"

using namespace rnic::host::client;

namespace {

const size_t ps = page_size();

// The /proc/self/maps permission column of the mapping holding `addr`.
std::string perms_at(const void* addr) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    FILE* f = std::fopen("/proc/self/maps", "re");
    char line[4096];
    std::string out;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        unsigned long s = 0, e = 0;
        char p[8] = {};
        if (std::sscanf(line, "%lx-%lx %7s", &s, &e, p) == 3 && a >= s && a < e) out = p;
    }
    std::fclose(f);
    return out;
}

// What rnicd would see: the segments' files mapped elsewhere, one view per run.
struct DaemonView {
    std::vector<std::pair<uint8_t*, size_t>> maps;
    explicit DaemonView(const SharedRange& r) {
        for (const auto& run : r.runs) {
            auto* base = static_cast<uint8_t*>(
                mmap(nullptr, run.segment->share_length(), PROT_READ | PROT_WRITE, MAP_SHARED, run.segment->fd, 0));
            REQUIRE(base != MAP_FAILED);
            maps.emplace_back(base, run.segment->share_length());
        }
    }
    uint8_t* at(const SharedRange& r, size_t run, size_t off) const {
        return maps[run].first + r.runs[run].offset + off;
    }
    ~DaemonView() {
        for (auto& [b, n] : maps) munmap(b, n);
    }
};

uint64_t total(const SharedRange& r) {
    uint64_t t = 0;
    for (const auto& run : r.runs) t += run.length;
    return t;
}

void* map_anon(size_t pages, int prot = PROT_READ | PROT_WRITE) {
    void* p = mmap(nullptr, pages * ps, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    return p;
}

}  // namespace

TEST_CASE("a heap buffer keeps its address and bytes and becomes shared with the daemon") {
    const size_t len = 3 * ps + 123;
    auto* buf = static_cast<uint8_t*>(std::malloc(len));
    for (size_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(i * 7);
    auto r = PageSharer::instance().acquire(buf + 5, len - 5);
    REQUIRE(r.ok());
    for (size_t i = 0; i < len; ++i) REQUIRE(buf[i] == static_cast<uint8_t>(i * 7));
    REQUIRE(total(*r) % ps == 0);
    REQUIRE(total(*r) >= len - 5);
    {
        DaemonView view(*r);
        const auto first_page = reinterpret_cast<uintptr_t>(buf + 5) & ~(ps - 1);
        const size_t off = reinterpret_cast<uintptr_t>(buf + 5) - first_page;
        REQUIRE(*view.at(*r, 0, off) == buf[5]);
        *view.at(*r, 0, off) = 0xAB;  // the daemon writes (an RDMA WRITE landing)
        REQUIRE(buf[5] == 0xAB);
        buf[6] = 0xCD;  // the application writes
        REQUIRE(*view.at(*r, 0, off + 1) == 0xCD);
    }
    // Sealable, so rnicd can forbid shrinking it (without MFD_ALLOW_SEALING a memfd reports
    // F_SEAL_SEAL), and the library itself seals nothing.
    for (const auto& run : r->runs) CHECK(fcntl(run.segment->fd, F_GET_SEALS) == 0);
    PageSharer::instance().release(*r);
    std::free(buf);
}

TEST_CASE("anonymous mmap: only the registered pages change, protection and contents stay") {
    auto* p = static_cast<uint8_t*>(map_anon(4));
    std::memset(p, 0x5A, 4 * ps);
    auto r = PageSharer::instance().acquire(p + ps, 2 * ps);
    REQUIRE(r.ok());
    REQUIRE(r->runs.size() == 1);
    REQUIRE(r->runs[0].length == 2 * ps);
    REQUIRE(perms_at(p) == "rw-p");
    REQUIRE(perms_at(p + ps) == "rw-s");
    REQUIRE(perms_at(p + 3 * ps) == "rw-p");
    for (size_t i = 0; i < 4 * ps; ++i) REQUIRE(p[i] == 0x5A);
    PageSharer::instance().release(*r);
    munmap(p, 4 * ps);
}

TEST_CASE("a buffer straddling a page boundary shares both pages") {
    auto* p = static_cast<uint8_t*>(map_anon(3));
    auto r = PageSharer::instance().acquire(p + ps - 16, 32);
    REQUIRE(r.ok());
    REQUIRE(total(*r) == 2 * ps);
    REQUIRE(perms_at(p) == "rw-s");
    REQUIRE(perms_at(p + ps) == "rw-s");
    REQUIRE(perms_at(p + 2 * ps) == "rw-p");
    PageSharer::instance().release(*r);
    munmap(p, 3 * ps);
}

TEST_CASE("overlapping registrations reuse the pages already shared") {
    auto* p = static_cast<uint8_t*>(map_anon(4));
    for (size_t i = 0; i < 4 * ps; ++i) p[i] = static_cast<uint8_t>(i);
    auto a = PageSharer::instance().acquire(p, 2 * ps);
    REQUIRE(a.ok());
    REQUIRE(a->segments.size() == 1);
    auto b = PageSharer::instance().acquire(p + ps, 2 * ps);  // one page old, one new
    REQUIRE(b.ok());
    REQUIRE(b->segments.size() == 2);
    REQUIRE(b->segments[0] == a->segments[0]);
    REQUIRE(b->runs[0].offset == ps);
    REQUIRE(b->runs[0].length == ps);
    REQUIRE(b->runs[1].offset == 0);
    REQUIRE(b->runs[1].length == ps);
    REQUIRE(a->segments[0]->refs == 2);
    {
        DaemonView view(*b);
        REQUIRE(std::memcmp(view.at(*b, 0, 0), p + ps, ps) == 0);
        REQUIRE(std::memcmp(view.at(*b, 1, 0), p + 2 * ps, ps) == 0);
    }
    for (size_t i = 0; i < 4 * ps; ++i) REQUIRE(p[i] == static_cast<uint8_t>(i));

    // Released and registered again: the idle segment is recognised, no new copy.
    const uint32_t id = a->segments[0]->id;
    PageSharer::instance().release(*a);
    PageSharer::instance().release(*b);
    auto c = PageSharer::instance().acquire(p, ps);
    REQUIRE(c.ok());
    REQUIRE(c->segments[0]->id == id);
    PageSharer::instance().release(*c);
    munmap(p, 4 * ps);
}

TEST_CASE("memory unmapped and mapped again at the same address is not mistaken for the old segment") {
    auto* p = static_cast<uint8_t*>(map_anon(2));
    auto a = PageSharer::instance().acquire(p, 2 * ps);
    REQUIRE(a.ok());
    const uint32_t id = a->segments[0]->id;
    PageSharer::instance().release(*a);
    munmap(p, 2 * ps);
    auto* q =
        static_cast<uint8_t*>(mmap(p, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    REQUIRE(q == p);
    q[0] = 42;
    auto b = PageSharer::instance().acquire(q, 2 * ps);
    REQUIRE(b.ok());
    REQUIRE(b->segments[0]->id != id);
    DaemonView view(*b);
    REQUIRE(*view.at(*b, 0, 0) == 42);
    PageSharer::instance().release(*b);
    munmap(q, 2 * ps);
}

TEST_CASE("read-only and write-protected pages keep their protection") {
    auto* p = static_cast<uint8_t*>(map_anon(2));
    std::memset(p, 0x11, 2 * ps);
    REQUIRE(mprotect(p, 2 * ps, PROT_READ) == 0);
    auto r = PageSharer::instance().acquire(p, 2 * ps);
    REQUIRE(r.ok());
    REQUIRE(perms_at(p) == "r--s");
    REQUIRE(p[ps + 5] == 0x11);
    DaemonView view(*r);
    *view.at(*r, 0, 7) = 0x22;  // the daemon may still write (a READ response, say)
    REQUIRE(p[7] == 0x22);
    PageSharer::instance().release(*r);
    munmap(p, 2 * ps);
}

TEST_CASE("a MAP_SHARED file mapping is shared through its own file at the right offset") {
    char path[] = "/tmp/rnic-client-test-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    unlink(path);
    REQUIRE(ftruncate(fd, static_cast<off_t>(4 * ps)) == 0);
    auto* p =
        static_cast<uint8_t*>(mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(ps)));
    REQUIRE(p != MAP_FAILED);
    std::memset(p, 0x33, 2 * ps);
    auto r = PageSharer::instance().acquire(p + ps, 100);
    REQUIRE(r.ok());
    REQUIRE(r->segments.size() == 1);
    REQUIRE(r->segments[0]->backing_file);
    REQUIRE(r->runs[0].offset == 2 * ps);  // file offset of p + ps
    REQUIRE(perms_at(p) == "rw-s");
    {
        DaemonView view(*r);
        *view.at(*r, 0, 0) = 0x44;
        REQUIRE(p[ps] == 0x44);
    }
    // The file itself sees the writes: the link to it was kept.
    uint8_t byte = 0;
    REQUIRE(pread(fd, &byte, 1, static_cast<off_t>(2 * ps)) == 1);
    REQUIRE(byte == 0x44);
    PageSharer::instance().release(*r);
    munmap(p, 2 * ps);
    close(fd);
}

TEST_CASE("PROT_NONE and unmapped memory are EFAULT, and nothing is changed") {
    auto* p = static_cast<uint8_t*>(map_anon(3));
    REQUIRE(mprotect(p + 2 * ps, ps, PROT_NONE) == 0);
    auto r = PageSharer::instance().acquire(p, 3 * ps);
    REQUIRE(r.error() == EFAULT);
    REQUIRE(perms_at(p) == "rw-p");  // planned before touching anything

    REQUIRE(munmap(p + 2 * ps, ps) == 0);
    auto u = PageSharer::instance().acquire(p + ps, 2 * ps);
    REQUIRE(u.error() == EFAULT);
    REQUIRE(PageSharer::instance().acquire(p, 0).error() == EINVAL);
    munmap(p, 2 * ps);
}

TEST_CASE("a buffer on a running thread's stack is refused, not swapped under the frames") {
    char local[64] = {};
    REQUIRE(PageSharer::instance().acquire(local, sizeof local).error() == EOPNOTSUPP);
    int in_thread = 0;
    std::thread t([&in_thread] {
        char other[64] = {};
        in_thread = PageSharer::instance().acquire(other, sizeof other).error();
    });
    t.join();
    REQUIRE(in_thread == EOPNOTSUPP);
}
