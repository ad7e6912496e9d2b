// rnic-gen-pcap OUT.pcap: writes the sample frames (every opcode, IPv4 and IPv6, VLAN, ECN)
// built by the wire library, with fixed timestamps so the file is reproducible byte for byte.
#include <cstdio>
#include <exception>

#include "pcap_file.hpp"
#include "sample_frames.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: rnic-gen-pcap OUT.pcap\n");
        return 2;
    }
    try {
        rnic::tools::PcapWriter out(argv[1]);
        constexpr uint64_t kStartNs = 1'790'000'000'000'000'000ull;  // a fixed instant in 2026
        uint64_t t = kStartNs;
        size_t n = 0;
        for (const auto& frame : rnic::tools::build_sample_frames()) {
            out.write(t, frame);
            t += 1'000;
            ++n;
        }
        out.flush();
        std::printf("wrote %zu frames to %s\n", n, argv[1]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rnic-gen-pcap: %s\n", e.what());
        return 1;
    }
    return 0;
}
