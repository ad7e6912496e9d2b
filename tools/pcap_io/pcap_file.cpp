#include "pcap_file.hpp"

#include <pcap/pcap.h>

#include <stdexcept>

namespace rnic::tools {

PcapReader::PcapReader(const std::string& path) {
    char err[PCAP_ERRBUF_SIZE] = {};
    handle_ = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
    if (!handle_) throw std::runtime_error(path + ": " + err);
}

PcapReader::~PcapReader() {
    if (handle_) pcap_close(handle_);
}

int PcapReader::link_type() const { return pcap_datalink(handle_); }

bool PcapReader::next(CapturedFrame& frame) {
    pcap_pkthdr* hdr = nullptr;
    const u_char* data = nullptr;
    const int rc = pcap_next_ex(handle_, &hdr, &data);
    if (rc == PCAP_ERROR_BREAK) return false;
    if (rc != 1) throw std::runtime_error(std::string("reading capture: ") + pcap_geterr(handle_));
    frame.index = ++count_;
    frame.timestamp_ns = static_cast<uint64_t>(hdr->ts.tv_sec) * 1'000'000'000ull +
                         static_cast<uint64_t>(hdr->ts.tv_usec);  // ns with NANO precision
    frame.original_length = hdr->len;
    frame.bytes = {data, hdr->caplen};
    return true;
}

std::vector<OwnedFrame> read_all_frames(const std::string& path) {
    PcapReader reader(path);
    std::vector<OwnedFrame> frames;
    CapturedFrame f;
    while (reader.next(f)) frames.push_back({f.index, f.timestamp_ns, {f.bytes.begin(), f.bytes.end()}});
    return frames;
}

PcapWriter::PcapWriter(const std::string& path) {
    dead_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 65535, PCAP_TSTAMP_PRECISION_NANO);
    if (!dead_) throw std::runtime_error("pcap_open_dead failed");
    dumper_ = pcap_dump_open(dead_, path.c_str());
    if (!dumper_) {
        const std::string msg = path + ": " + pcap_geterr(dead_);
        pcap_close(dead_);
        throw std::runtime_error(msg);
    }
}

PcapWriter::~PcapWriter() {
    if (dumper_) pcap_dump_close(dumper_);
    if (dead_) pcap_close(dead_);
}

void PcapWriter::write(uint64_t timestamp_ns, std::span<const uint8_t> frame) {
    pcap_pkthdr hdr{};
    hdr.ts.tv_sec = static_cast<time_t>(timestamp_ns / 1'000'000'000ull);
    hdr.ts.tv_usec = static_cast<suseconds_t>(timestamp_ns % 1'000'000'000ull);
    hdr.caplen = static_cast<bpf_u_int32>(frame.size());
    hdr.len = hdr.caplen;
    pcap_dump(reinterpret_cast<u_char*>(dumper_), &hdr, frame.data());
}

void PcapWriter::flush() {
    if (pcap_dump_flush(dumper_) != 0) throw std::runtime_error("flushing capture failed");
}

}  // namespace rnic::tools
