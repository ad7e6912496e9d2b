// ResizeCq against a hostile client (docs/host_interface.md, "Resizing a CQ"): a handle not the
// session's, sizes out of range and a ring whose consumer index the client wrote out of reach
// are refused with EINVAL and the session goes on; a valid resize returns a new ring holding the
// unpolled completions' count as its producer index.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "raw_client.hpp"
#include "rnic/host/abi/cm.hpp"
#include "rnic/host/abi/ring.hpp"

using namespace rnic;
using namespace rnic::host;
using namespace rnic::host::test;

TEST_CASE("ResizeCq: bad handles, sizes and a lying consumer index are EINVAL, a valid one maps a new ring") {
    Rig rig;
    RawClient c(rig.host->socket_path());
    REQUIRE(rig.hello(c).header.status == 0);
    const auto resize = static_cast<abi::Op>(abi::kOpResizeCq);

    const Reply made = rig.call(c, abi::Op::CreateCq, abi::CreateCqRequest{8, 0, 0, 0});
    REQUIRE(made.header.status == 0);
    REQUIRE(made.fds.size() == 1);
    const auto cq = made.as<abi::CreateCqReply>();
    void* ring = mmap(nullptr, cq.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, made.fds[0], 0);
    REQUIRE(ring != MAP_FAILED);
    close(made.fds[0]);
    auto* header = static_cast<abi::RingHeader*>(ring);

    // Another handle, a size of 0, one past the device's limit: refused, nothing sent back.
    for (const abi::ResizeCqRequest bad : {abi::ResizeCqRequest{cq.handle + 1000, 16}, abi::ResizeCqRequest{cq.handle, 0},
                                           abi::ResizeCqRequest{cq.handle, UINT32_MAX}}) {
        const Reply r = rig.call(c, resize, bad);
        CHECK(r.header.status == EINVAL);
        CHECK(r.fds.empty());
        CHECK_FALSE(r.eof);
    }
    // A consumer index no poll could give (far ahead of the producer): the ring is corrupt.
    header->consumer.store(0x80000000u, std::memory_order_release);
    Reply r = rig.call(c, resize, abi::ResizeCqRequest{cq.handle, 16});
    CHECK(r.header.status == EINVAL);
    CHECK(r.fds.empty());
    header->consumer.store(0, std::memory_order_release);

    // A valid resize: a new ring of 32 entries (a power of two >= 20), empty.
    r = rig.call(c, resize, abi::ResizeCqRequest{cq.handle, 20});
    REQUIRE(r.header.status == 0);
    REQUIRE(r.fds.size() == 1);
    const auto grown = r.as<abi::ResizeCqReply>();
    CHECK(grown.handle == cq.handle);
    CHECK(grown.cqe == 20);
    CHECK(grown.ring_size == 32);
    void* fresh = mmap(nullptr, grown.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0], 0);
    REQUIRE(fresh != MAP_FAILED);
    close(r.fds[0]);
    const auto* h = static_cast<const abi::RingHeader*>(fresh);
    CHECK(h->size == 32);
    CHECK(h->producer.load() == 0);
    CHECK(h->consumer.load() == 0);
    // The session goes on: the CQ can still be destroyed.
    CHECK(rig.call(c, abi::Op::DestroyCq, abi::HandleRequest{cq.handle, 0}).header.status == 0);
    munmap(fresh, grown.ring_bytes);
    munmap(ring, cq.ring_bytes);
}
