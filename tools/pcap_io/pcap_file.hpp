// Reading and writing capture files through libpcap (pcap and pcapng in, pcap with nanosecond
// timestamps out), for tools and tests. Set-up failures throw; there is no data path here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

struct pcap;
struct pcap_dumper;

namespace rnic::tools {

struct CapturedFrame {
    uint64_t index = 0;         // 1-based frame number, as Wireshark counts
    uint64_t timestamp_ns = 0;  // since the epoch
    uint32_t original_length = 0;
    std::span<const uint8_t> bytes;  // valid until the next read
};

class PcapReader {
public:
    explicit PcapReader(const std::string& path);  // throws std::runtime_error
    ~PcapReader();
    PcapReader(const PcapReader&) = delete;
    PcapReader& operator=(const PcapReader&) = delete;

    // Next frame, or false at the end of the file. Throws on a damaged file.
    bool next(CapturedFrame& frame);
    int link_type() const;

private:
    pcap* handle_ = nullptr;
    uint64_t count_ = 0;
};

// Every frame of a file, copied, for tests.
struct OwnedFrame {
    uint64_t index = 0;
    uint64_t timestamp_ns = 0;
    std::vector<uint8_t> bytes;
};
std::vector<OwnedFrame> read_all_frames(const std::string& path);

class PcapWriter {
public:
    explicit PcapWriter(const std::string& path);  // Ethernet link type, ns timestamps
    ~PcapWriter();
    PcapWriter(const PcapWriter&) = delete;
    PcapWriter& operator=(const PcapWriter&) = delete;

    void write(uint64_t timestamp_ns, std::span<const uint8_t> frame);
    void flush();

private:
    pcap* dead_ = nullptr;
    pcap_dumper* dumper_ = nullptr;
};

}  // namespace rnic::tools
