// Where outgoing frames are written: the daemon hands out mbuf space, tests a vector. The engine,
// ARP, neighbour discovery and ICMP all build their frames in place through this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rnic::common {

class FrameSink {
public:
    virtual ~FrameSink() = default;
    // Room for a frame of `length` bytes; an empty (or shorter) span: no room, stop. Space that is
    // allocated and never committed is reused by the next allocate.
    virtual std::span<uint8_t> allocate(size_t length) = 0;
    virtual void commit(size_t length) = 0;
};

}  // namespace rnic::common
