// Doorbell bits: how a session tells rnicd *which* of its work queues have new WQEs, so the
// daemon's turn looks at those queues only instead of at every queue of every session (a
// hardware doorbell carries the QP number the same way). Each QP and SRQ gets a slot in its
// session's bits (CreateQpReply/CreateSrqReply::doorbell); after publishing a producer index the
// client sets the slot's bit and the summary bits above it; the daemon takes the top word, then
// the summary words it names, then the bit words, each with an atomic exchange to 0.
//
// The bits live in the session's async memfd at HelloReply::doorbell_offset. They are a hint
// from a client that may lie: a bit set for nothing costs the daemon one look at that client's
// own queue, a bit not set leaves only that client's own WQEs waiting.
//
// Ordering (both halves here, like arming in ring.hpp): the client publishes the producer index,
// then a seq_cst fence, then sets each level that is not already set; the daemon exchanges the
// levels top-down, then a seq_cst fence, then reads the producer indices. A client that finds a
// bit already set and skips it is covered by the fences: the daemon's exchange comes after the
// client's look, so its producer load comes after the client's store.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "rnic/host/abi/ring.hpp"

namespace rnic::host::abi {

inline constexpr uint32_t kDoorbellSlots = 32768;  // QPs and SRQs of one session, at most
inline constexpr uint32_t kDoorbellWords = kDoorbellSlots / 64;
inline constexpr uint32_t kDoorbellSummaryWords = kDoorbellWords / 64;

struct DoorbellBits {
    alignas(kCacheLine) std::atomic<uint64_t> top;                             // bit i: summary[i] may have bits
    // Latency tracing only (StatusPage::latency_trace): the client's CLOCK_MONOTONIC time of its
    // last doorbell (stored before the bits) and of its last kick; the daemon takes each with an
    // exchange to 0. Always: the CPU the client last kicked from, stored before the kick, so the
    // daemon knows when the application feeding it shares its core (docs/daemon.md, polling
    // policy). A client may write anything here: the stamps only feed histograms (impossible
    // ones are dropped), the CPU only decides whether the daemon spins after its work.
    std::atomic<uint64_t> doorbell_ns;
    std::atomic<uint64_t> kick_ns;
    std::atomic<uint32_t> kick_cpu;
    alignas(kCacheLine) std::atomic<uint64_t> summary[kDoorbellSummaryWords];  // bit j of i: words[64 i + j]
    alignas(kCacheLine) std::atomic<uint64_t> words[kDoorbellWords];           // bit k of w: slot 64 w + k
};
static_assert(kDoorbellSummaryWords <= 64);
static_assert(offsetof(DoorbellBits, doorbell_ns) == 8);
static_assert(offsetof(DoorbellBits, kick_cpu) == 24);
static_assert(offsetof(DoorbellBits, summary) == kCacheLine);
static_assert(offsetof(DoorbellBits, words) == 2 * kCacheLine);
static_assert(sizeof(DoorbellBits) == 2 * kCacheLine + kDoorbellWords * 8);

namespace detail {
inline void set_bit(std::atomic<uint64_t>& word, uint64_t bit) noexcept {
    if ((word.load() & bit) == 0) word.fetch_or(bit);
}
}  // namespace detail

// Client half, after publishing a producer index of the queue in `slot` (< kDoorbellSlots).
inline void ring_doorbell_slot(DoorbellBits& bits, uint32_t slot) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t w = slot / 64;
    detail::set_bit(bits.words[w], uint64_t{1} << (slot % 64));
    detail::set_bit(bits.summary[w / 64], uint64_t{1} << (w % 64));
    detail::set_bit(bits.top, uint64_t{1} << (w / 64));
}

// Daemon half: `fn(slot)` for every slot below `slots` (the session's slots handed out so far)
// rung since the last take; true if any was. The caller reads the producer indices after this
// returns. Words past `slots` are never read: a client that sets every bit costs the daemon the
// words of its own queues, not all kDoorbellWords (45 us a turn, measured, before this bound).
// Their bits stay set, and a slot handed out there later gets at most one spurious look.
template <class Fn>
bool take_doorbells(DoorbellBits& bits, uint32_t slots, Fn&& fn) {
    if (bits.top.load(std::memory_order_relaxed) == 0) return false;
    uint64_t top = bits.top.exchange(0);
    const uint32_t words = (std::min(slots, kDoorbellSlots) + 63) / 64;
    bool any = false;
    while (top != 0) {
        const auto i = static_cast<uint32_t>(std::countr_zero(top));
        top &= top - 1;
        if (i * 64 >= words) continue;
        const uint32_t used = std::min<uint32_t>(words - i * 64, 64);
        uint64_t summary = bits.summary[i].exchange(0) & (used == 64 ? ~uint64_t{0} : (uint64_t{1} << used) - 1);
        while (summary != 0) {
            const uint32_t w = i * 64 + static_cast<uint32_t>(std::countr_zero(summary));
            summary &= summary - 1;
            uint64_t word = bits.words[w].exchange(0);
            while (word != 0) {
                const uint32_t slot = w * 64 + static_cast<uint32_t>(std::countr_zero(word));
                word &= word - 1;
                fn(slot);
                any = true;
            }
        }
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return any;
}

// Daemon, before sleeping (after its own fence): any bit waiting?
inline bool doorbells_waiting(const DoorbellBits& bits) noexcept {
    return bits.top.load(std::memory_order_relaxed) != 0;
}

}  // namespace rnic::host::abi
