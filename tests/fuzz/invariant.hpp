// What the host-service fuzzer's parts share to say what they checked: a broken invariant aborts
// (libFuzzer keeps the input), and RNIC_FUZZ_TRACE=1 prints each action and what it got.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace rnic::host::fuzz {

inline bool g_trace = false;

[[noreturn]] inline void broken(const char* what, long a = 0, long b = 0) {
    std::fprintf(stderr, "fuzz_host_service: invariant broken: %s (%ld, %ld)\n", what, a, b);
    std::abort();
}
inline void check(bool ok, const char* what, long a = 0, long b = 0) {
    if (!ok) broken(what, a, b);
}

}  // namespace rnic::host::fuzz

#define TRACE(...)                                                          \
    do {                                                                    \
        if (::rnic::host::fuzz::g_trace) std::fprintf(stderr, __VA_ARGS__); \
    } while (0)
#define INVARIANT(cond) ::rnic::host::fuzz::check((cond), #cond)
#define INVARIANT_V(cond, a, b) ::rnic::host::fuzz::check((cond), #cond, static_cast<long>(a), static_cast<long>(b))
