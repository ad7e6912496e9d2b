// ns per frame for parse+verify (ICRC and IPv4 checksum) and build+ICRC, at 64 B and 4 KiB
// payloads, beside zlib's crc32 over the same bytes measured in the same run (the floor of
// any ICRC implementation built on it). Usage: wire_bench [ITERATIONS]
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rnic/wire/builder.hpp"
#include "rnic/wire/parser.hpp"
#include "rnic/wire/psn.hpp"

using namespace rnic::wire;
using Clock = std::chrono::steady_clock;

namespace {

FrameSpec write_spec(std::span<const uint8_t> payload) {
    FrameSpec s;
    s.src_gid = Gid::from_ipv4(0x0A000001);
    s.dst_gid = Gid::from_ipv4(0x0A000002);
    s.bth.opcode = op::kRcWriteOnly;
    s.bth.dest_qp = 0x12;
    s.bth.ack_req = true;
    s.ext.reth = Reth{0x7F0000001000ull, 0x1234, static_cast<uint32_t>(payload.size())};
    s.payload = payload;
    return s;
}

template <class F>
double ns_per_op(long iterations, F&& f) {
    for (long i = 0; i < iterations / 10 + 1; ++i) f(i);  // warm caches and branch predictors
    const auto t0 = Clock::now();
    for (long i = 0; i < iterations; ++i) f(i);
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(iterations);
}

}  // namespace

int main(int argc, char** argv) {
    const long iterations = argc > 1 ? std::atol(argv[1]) : 2'000'000;
    volatile uint64_t sink = 0;
    std::printf("%-10s %16s %16s %16s %12s\n", "payload", "build+ICRC ns", "parse+verify ns", "zlib crc32 ns",
                "Mframes/s(p)");
    for (size_t size : {size_t{64}, size_t{4096}}) {
        std::vector<uint8_t> payload(size, 0xA5);
        FrameSpec spec = write_spec(payload);
        std::vector<uint8_t> frame(*frame_size(spec));
        const long n = size > 1024 ? iterations / 8 : iterations;

        const double build_ns = ns_per_op(n, [&](long i) {
            spec.bth.psn = static_cast<uint32_t>(i) & kPsnMask;
            sink = sink + *build_frame(spec, frame);
        });
        const double parse_ns = ns_per_op(n, [&](long) {
            auto p = parse_frame(frame);
            sink = sink + (p ? p->bth.psn : 0);
        });
        const double crc_ns = ns_per_op(n, [&](long) {
            sink = sink + crc32(0, frame.data() + 14, static_cast<uInt>(frame.size() - 14 - 4));
        });
        std::printf("%-10zu %16.1f %16.1f %16.1f %12.2f\n", size, build_ns, parse_ns, crc_ns, 1e3 / parse_ns);
    }
    std::printf("(%ld iterations at 64 B, %ld at 4096 B; RC_RDMA_WRITE_ONLY over IPv4)\n", iterations,
                iterations / 8);
    return sink == 42 ? 1 : 0;
}
