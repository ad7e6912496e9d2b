#include "journal_log.hpp"

#include <sys/stat.h>

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace rnic::daemon {

namespace {

// "<N>" with N the syslog priority of the line's level (sd-daemon(3)'s SD_ERR, SD_INFO, ...).
class SyslogPrefix final : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
        std::string_view p = "<6>";
        switch (msg.level) {
            case spdlog::level::trace:
            case spdlog::level::debug: p = "<7>"; break;
            case spdlog::level::info: p = "<6>"; break;
            case spdlog::level::warn: p = "<4>"; break;
            case spdlog::level::err: p = "<3>"; break;
            case spdlog::level::critical: p = "<2>"; break;
            default: break;
        }
        dest.append(p.data(), p.data() + p.size());
    }
    std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPrefix>(); }
};

}  // namespace

bool stderr_is_journal() {
    const char* stream = std::getenv("JOURNAL_STREAM");
    unsigned long long dev = 0, ino = 0;
    if (!stream || std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
    struct stat st {};
    return fstat(2, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void set_log_format() {
    if (!stderr_is_journal()) {
        spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ %v");
        return;
    }
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<SyslogPrefix>('*').set_pattern("%*%v");
    spdlog::set_formatter(std::move(formatter));
}

}  // namespace rnic::daemon
