#include "rnic/port/capture.hpp"

#include "pcap_file.hpp"

namespace rnic::port {

namespace {
// pcap's per-file and per-record headers, to decide rotation without asking stdio.
constexpr uint64_t kFileHeader = 24;
constexpr uint64_t kRecordHeader = 16;
}  // namespace

Capture::Capture(std::string path, uint64_t max_bytes) : base_(std::move(path)), max_bytes_(max_bytes) {
    current_ = base_;
    writer_ = std::make_unique<tools::PcapWriter>(current_);
    file_bytes_ = kFileHeader;
}

Capture::~Capture() = default;

std::string Capture::rotated_path(const std::string& base, uint32_t index) {
    return index == 0 ? base : base + "." + std::to_string(index);
}

bool Capture::open_next() {
    writer_.reset();  // closes and flushes the full file first
    ++index_;
    current_ = rotated_path(base_, index_);
    try {
        writer_ = std::make_unique<tools::PcapWriter>(current_);
    } catch (const std::exception& e) {
        // The data path never throws: capture stops, the daemon goes on, the error is kept.
        error_ = e.what();
        return false;
    }
    file_bytes_ = kFileHeader;
    return true;
}

bool Capture::write(uint64_t realtime_ns, std::span<const uint8_t> frame) {
    if (!writer_) return false;
    const uint64_t record = kRecordHeader + frame.size();
    // A file always takes at least one frame, so an oversized frame cannot loop on rotation.
    if (max_bytes_ != 0 && file_bytes_ > kFileHeader && file_bytes_ + record > max_bytes_ && !open_next())
        return false;
    writer_->write(realtime_ns, frame);
    file_bytes_ += record;
    ++frames_;
    return true;
}

void Capture::flush() {
    if (writer_) writer_->flush();
}

}  // namespace rnic::port
