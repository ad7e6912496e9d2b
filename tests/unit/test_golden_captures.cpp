// Every frame Linux rxe put on the wire in shared/pcaps-rxe must parse, its ICRC must
// recompute equal, and parse -> build must give back the identical bytes: the builder speaks
// exactly what rxe speaks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "pcap_file.hpp"
#include "rnic/wire/builder.hpp"
#include "rnic/wire/icrc.hpp"
#include "rnic/wire/parser.hpp"

namespace fs = std::filesystem;
using namespace rnic::wire;

namespace {

std::vector<fs::path> golden_files() {
    const char* env = std::getenv("RNIC_GOLDEN_DIR");
    const fs::path dir = env ? env : RNIC_GOLDEN_DIR;
    std::vector<fs::path> files;
    if (fs::is_directory(dir))
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".pcap") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

TEST_CASE("golden rxe captures: parse, ICRC and byte-exact rebuild", "[golden]") {
    const auto files = golden_files();
    INFO("golden directory: " << (std::getenv("RNIC_GOLDEN_DIR") ? std::getenv("RNIC_GOLDEN_DIR") : RNIC_GOLDEN_DIR));
    REQUIRE(files.size() >= 30);

    size_t total = 0;
    std::map<std::string_view, size_t> opcodes;
    size_t ipv6 = 0;
    for (const auto& path : files) {
        const auto frames = rnic::tools::read_all_frames(path.string());
        REQUIRE_FALSE(frames.empty());
        for (const auto& fr : frames) {
            INFO(path.filename().string() << " frame " << fr.index);
            auto parsed = parse_frame(fr.bytes);
            if (!parsed) FAIL("parse error " << parse_errc_name(parsed.error().code) << " at " << parsed.error().offset);
            const RoceFrame& p = *parsed;
            const size_t ip_header = p.l4_offset - p.l3_offset;
            REQUIRE(compute_icrc(fr.bytes.data() + p.l3_offset, ip_header, p.frame_length - kIcrcSize - p.l3_offset) ==
                    p.icrc);

            const FrameSpec spec = spec_from_frame(p);
            std::vector<uint8_t> rebuilt(fr.bytes.size() + 64);
            auto n = build_frame(spec, rebuilt);
            REQUIRE(n);
            rebuilt.resize(*n);
            REQUIRE(rebuilt == fr.bytes);

            ++opcodes[p.info->name];
            if (p.ip_version == 6) ++ipv6;
            ++total;
        }
    }
    // The set covers RC/UC/UD sends, writes, reads, atomics and their acknowledgements.
    for (std::string_view name : {"RC_SEND_ONLY", "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST",
                                  "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
                                  "RC_RDMA_WRITE_LAST", "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                  "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RC_RDMA_READ_REQUEST",
                                  "RC_RDMA_READ_RESPONSE_ONLY", "RC_RDMA_READ_RESPONSE_FIRST",
                                  "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST",
                                  "RC_ACKNOWLEDGE", "RC_ATOMIC_ACKNOWLEDGE", "RC_COMPARE_SWAP", "RC_FETCH_ADD",
                                  "UC_SEND_ONLY", "UC_SEND_FIRST", "UD_SEND_ONLY", "UD_SEND_ONLY_WITH_IMMEDIATE"}) {
        INFO(name);
        CHECK(opcodes[name] > 0);
    }
    CHECK(ipv6 > 0);
    CHECK(total > 9000);
}
