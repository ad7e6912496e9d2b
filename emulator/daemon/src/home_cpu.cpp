#include "home_cpu.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rnic::daemon {

namespace {

// The calling thread's affinity into `allowed`; the reason when it cannot be read.
std::string read_affinity(cpu_set_t& allowed) {
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return {};
    return std::string("--home-cpu: cannot read the CPU affinity: ") + std::strerror(errno);
}

std::string unusable_in(int cpu, const cpu_set_t& allowed) {
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) return {};
    return "--home-cpu " + std::to_string(cpu) + ": not among the " + std::to_string(CPU_COUNT(&allowed)) +
           " CPUs rnicd may run on";
}

}  // namespace

std::string HomeCpu::unusable(int cpu) {
    cpu_set_t allowed;
    if (std::string why = read_affinity(allowed); !why.empty()) return why;
    return unusable_in(cpu, allowed);
}

HomeCpu::HomeCpu(int cpu, uint64_t settle_ns) : settle_ns_(settle_ns) {
    if (std::string why = read_affinity(allowed_); !why.empty()) throw std::runtime_error(why);
    if (std::string why = unusable_in(cpu, allowed_); !why.empty()) throw std::runtime_error(why);
    CPU_ZERO(&home_);
    CPU_SET(cpu, &home_);
    if (sched_setaffinity(0, sizeof home_, &home_) != 0)
        throw std::runtime_error("--home-cpu " + std::to_string(cpu) + ": " + std::strerror(errno));
}

bool HomeCpu::follow(bool streaming, uint64_t now_ns) {
    if (streaming) {
        last_stream_ns_ = now_ns;
        if (!at_home_) return false;
        at_home_ = false;
        return apply(allowed_);
    }
    if (at_home_ || now_ns - last_stream_ns_ < settle_ns_) return false;
    at_home_ = true;
    return apply(home_);
}

// A refusal (a cpuset changed under us) costs placement, never correctness: it is counted, and
// the state moves on anyway, so a loop the kernel keeps where it is does not retry every turn.
bool HomeCpu::apply(const cpu_set_t& set) {
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        ++refused_;
        return false;
    }
    ++moves_;
    return true;
}

}  // namespace rnic::daemon
