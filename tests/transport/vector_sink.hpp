// The engine's frames collected into vectors, as the simulator's nodes hand them to their links
// (the two-engine fixture and the incast hosts).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rnic/transport/engine.hpp"

namespace rnic::test {

class VectorSink : public transport::FrameSink {
public:
    explicit VectorSink(std::vector<std::vector<uint8_t>>& out) : out_(out) {}
    std::span<uint8_t> allocate(size_t length) override {
        buf_.resize(length);
        return buf_;
    }
    void commit(size_t length) override { out_.emplace_back(buf_.begin(), buf_.begin() + static_cast<long>(length)); }

private:
    std::vector<std::vector<uint8_t>>& out_;
    std::vector<uint8_t> buf_;
};

}  // namespace rnic::test
