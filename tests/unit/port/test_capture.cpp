#include <catch2/catch.hpp>

#include <filesystem>

#include "pcap_file.hpp"
#include "rnic/port/capture.hpp"

using rnic::port::Capture;

namespace {
std::filesystem::path temp_dir() {
    auto d = std::filesystem::temp_directory_path() / ("rnic_capture_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}
}  // namespace

TEST_CASE("capture: frames and nanosecond timestamps survive the round trip", "[capture]") {
    const auto dir = temp_dir();
    const std::string path = dir / "c.pcap";
    {
        Capture cap(path, 0);
        std::vector<uint8_t> f(100, 7);
        CHECK(cap.write(1'700'000'000'123'456'789ull, f));
        f[0] = 8;
        CHECK(cap.write(1'700'000'000'123'456'790ull, f));
        cap.flush();
        CHECK(cap.frames() == 2);
    }
    const auto frames = rnic::tools::read_all_frames(path);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].timestamp_ns == 1'700'000'000'123'456'789ull);
    CHECK(frames[1].timestamp_ns == 1'700'000'000'123'456'790ull);
    CHECK(frames[1].bytes[0] == 8);
    std::filesystem::remove_all(dir);
}

TEST_CASE("capture: files rotate at the size limit and every frame lands in exactly one", "[capture]") {
    const auto dir = temp_dir();
    const std::string path = dir / "r.pcap";
    constexpr uint64_t kLimit = 4096;
    size_t written = 0;
    uint32_t files = 0;
    {
        Capture cap(path, kLimit);
        std::vector<uint8_t> f(1000);
        for (uint32_t i = 0; i < 10; ++i) {
            f[0] = static_cast<uint8_t>(i);
            REQUIRE(cap.write(i, f));
            ++written;
        }
        files = cap.files();
        CHECK(files == 3);  // 24 + 4 x 1016 = 4088 fits 4096, a fifth frame does not: 4 + 4 + 2
    }
    size_t seen = 0;
    for (uint32_t i = 0; i < files; ++i) {
        const auto p = Capture::rotated_path(path, i);
        CHECK(std::filesystem::file_size(p) <= kLimit);
        for (const auto& fr : rnic::tools::read_all_frames(p)) CHECK(fr.bytes[0] == seen++);
    }
    CHECK(seen == written);
    std::filesystem::remove_all(dir);
}

TEST_CASE("capture: an uncreatable file is a set-up error", "[capture]") {
    CHECK_THROWS_AS(Capture("/nonexistent-dir/x.pcap", 0), std::runtime_error);
}
