// rnic-gen-pcap [--cm] OUT.pcap: writes the sample frames (every opcode, IPv4 and IPv6, VLAN, ECN)
// built by the wire library, or with --cm its sample CM exchanges (GSI frames to QP 1), with
// fixed timestamps so the file is reproducible byte for byte.
#include <cstdio>
#include <exception>
#include <string_view>

#include "pcap_file.hpp"
#include "sample_cm_frames.hpp"
#include "sample_frames.hpp"

int main(int argc, char** argv) {
    const bool cm = argc == 3 && std::string_view(argv[1]) == "--cm";
    if (argc != 2 && !cm) {
        std::fprintf(stderr, "usage: rnic-gen-pcap [--cm] OUT.pcap\n");
        return 2;
    }
    const char* path = argv[argc - 1];
    try {
        rnic::tools::PcapWriter out(path);
        constexpr uint64_t kStartNs = 1'790'000'000'000'000'000ull;  // a fixed instant in 2026
        uint64_t t = kStartNs;
        size_t n = 0;
        for (const auto& frame : cm ? rnic::tools::build_sample_cm_frames() : rnic::tools::build_sample_frames()) {
            out.write(t, frame);
            t += 1'000;
            ++n;
        }
        out.flush();
        std::printf("wrote %zu frames to %s\n", n, path);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rnic-gen-pcap: %s\n", e.what());
        return 1;
    }
    return 0;
}
