// The capture tap: RoCEv2 frames sent and received, with nanosecond timestamps, to pcap files
// rotated by size (FILE, FILE.1, FILE.2, ...), the way tcpdump -C does.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace rnic::tools {
class PcapWriter;
}

namespace rnic::port {

class Capture {
public:
    // max_bytes 0: never rotate. Throws std::runtime_error if the file cannot be created.
    Capture(std::string path, uint64_t max_bytes);
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;

    // False once capture has stopped (a rotated file could not be created: see error()).
    bool write(uint64_t realtime_ns, std::span<const uint8_t> frame);
    void flush();

    uint64_t frames() const noexcept { return frames_; }
    uint32_t files() const noexcept { return index_ + 1; }
    const std::string& current_path() const noexcept { return current_; }
    const std::string& error() const noexcept { return error_; }
    static std::string rotated_path(const std::string& base, uint32_t index);

private:
    bool open_next();

    std::string base_;
    std::string current_;
    std::string error_;
    uint64_t max_bytes_;
    uint64_t file_bytes_ = 0;
    uint64_t frames_ = 0;
    uint32_t index_ = 0;
    std::unique_ptr<tools::PcapWriter> writer_;
};

}  // namespace rnic::port
