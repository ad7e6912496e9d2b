#include "loop_placement.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rnic::daemon {

namespace {

// The calling thread's affinity into `allowed`; the reason when it cannot be read.
std::string read_affinity(cpu_set_t& allowed) {
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return {};
    return std::string("cannot read the CPU affinity: ") + std::strerror(errno);
}

std::string unusable_in(int cpu, const cpu_set_t& allowed) {
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) return {};
    return "--home-cpu " + std::to_string(cpu) + ": not among the " + std::to_string(CPU_COUNT(&allowed)) +
           " CPUs rnicd may run on";
}

}  // namespace

std::string LoopPlacement::unusable(int cpu) {
    cpu_set_t allowed;
    if (std::string why = read_affinity(allowed); !why.empty()) return "--home-cpu: " + why;
    return unusable_in(cpu, allowed);
}

LoopPlacement::LoopPlacement(std::optional<int> home_cpu, uint64_t settle_ns) : settle_ns_(settle_ns) {
    if (std::string why = read_affinity(allowed_); !why.empty()) throw std::runtime_error(why);
    if (!home_cpu) return;
    if (std::string why = unusable_in(*home_cpu, allowed_); !why.empty()) throw std::runtime_error(why);
    CPU_ZERO(&home_);
    CPU_SET(*home_cpu, &home_);
    if (sched_setaffinity(0, sizeof home_, &home_) != 0)
        throw std::runtime_error("--home-cpu " + std::to_string(*home_cpu) + ": " + std::strerror(errno));
    has_home_ = true;
    where_ = Where::Home;
}

void LoopPlacement::leave_client_cpu(int cpu, uint64_t now_ns) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_) || CPU_COUNT(&allowed_) < 2) return;
    if (avoiding_ && (cpu == client_cpu_ || now_ns - avoid_since_ns_ < settle_ns_)) return;
    away_ = allowed_;
    CPU_CLR(cpu, &away_);
    avoiding_ = true;
    client_cpu_ = cpu;
    avoid_since_ns_ = now_ns;
    last_active_ns_ = now_ns;
    if (where_ == Where::AwayFromClient) where_ = Where::Wide;  // another CPU to leave: apply anew
}

LoopPlacement::Where LoopPlacement::wanted(bool streaming, uint64_t now_ns) {
    if (streaming) last_stream_ns_ = now_ns;
    // The client's stream is over once the loop has had no work for the settling time.
    if (avoiding_ && now_ns - last_active_ns_ >= settle_ns_) avoiding_ = false;
    if (avoiding_) return Where::AwayFromClient;
    if (!has_home_) return Where::Wide;
    if (streaming) return Where::Wide;
    if (where_ != Where::Home && now_ns - last_stream_ns_ < settle_ns_) return Where::Wide;
    return Where::Home;
}

bool LoopPlacement::follow(bool streaming, bool active, uint64_t now_ns) {
    if (active) last_active_ns_ = now_ns;
    const Where to = wanted(streaming, now_ns);
    if (to == where_) return false;
    const Where from = where_;
    // The state moves on even when the kernel refuses (apply counts it): a loop the kernel keeps
    // where it is must not retry every turn.
    where_ = to;
    const cpu_set_t& set = to == Where::Home ? home_ : to == Where::Wide ? allowed_ : away_;
    if (!apply(set)) return false;
    if (from == Where::Home || to == Where::Home) ++home_moves_;
    if (to == Where::AwayFromClient) ++client_moves_;
    return true;
}

// A refusal (a cpuset changed under us) costs placement, never correctness: it is counted.
bool LoopPlacement::apply(const cpu_set_t& set) {
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        ++refused_;
        return false;
    }
    return true;
}

}  // namespace rnic::daemon
