// Single-producer/single-consumer rings in memory shared between rnicd and one client. Each
// index has one owner: the producer writes `producer`, the consumer writes `consumer`; both
// are free-running 32-bit counters (masked by size - 1 when used) published with
// store-release and read with load-acquire. The producer index of a work queue is its doorbell
// record: writing it is ringing the doorbell. A side never trusts the other side's index: it
// checks that the ring does not claim more than `size` entries before touching any entry.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rnic::host::abi {

inline constexpr size_t kCacheLine = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared rings need lock-free 32-bit atomics");
static_assert(sizeof(std::atomic<uint32_t>) == 4, "shared rings need plain 32-bit atomics");

// The first 192 bytes of every ring. The entries follow at `entries_offset` (from the header).
struct RingHeader {
    alignas(kCacheLine) std::atomic<uint32_t> producer;
    // CQ rings only: the client arms the CQ (ibv_req_notify_cq) by storing kArmNext or
    // kArmSolicited; the daemon swaps it to 0 when it signals the completion channel.
    std::atomic<uint32_t> arm;
    // CQ rings only: completion events the daemon raised, counted, so ibv_get_cq_event can tell
    // which CQ of a channel fired without a message per event.
    std::atomic<uint32_t> events;
    alignas(kCacheLine) std::atomic<uint32_t> consumer;
    // Set by the daemon when the object is in error (CQ overflow, QP in ERR): sticky.
    std::atomic<uint32_t> error;
    alignas(kCacheLine) uint32_t size;        // entries, a power of two; written once by the daemon
    uint32_t entry_size;                      // bytes per entry (stride): 16n; the async ring's is 8
    uint32_t entries_offset;                  // from the start of this header
    uint32_t reserved;
};
static_assert(sizeof(RingHeader) == 3 * kCacheLine);
static_assert(offsetof(RingHeader, producer) == 0);
static_assert(offsetof(RingHeader, arm) == 4);
static_assert(offsetof(RingHeader, events) == 8);
static_assert(offsetof(RingHeader, consumer) == kCacheLine);
static_assert(offsetof(RingHeader, error) == kCacheLine + 4);
static_assert(offsetof(RingHeader, size) == 2 * kCacheLine);
static_assert(offsetof(RingHeader, entries_offset) == 2 * kCacheLine + 8);

inline constexpr uint32_t kArmNone = 0;
inline constexpr uint32_t kArmNext = 1;       // any next completion
inline constexpr uint32_t kArmSolicited = 2;  // next solicited or error completion

// Arming is a store-buffer (Dekker) handshake between two variables: the client stores `arm`
// then reads `producer`, the daemon stores `producer` then reads `arm`. Release/acquire does not
// order a store before a later load (x86 lets the load pass the store in its store buffer), so
// without a full fence on both sides each can miss the other: the client polls an empty CQ
// after arming, the daemon sees no arm after publishing, and an ibv_get_cq_event waits for
// ever. Both halves live here so the two sides cannot drift apart.

// Client half (ibv_req_notify_cq): after it, the caller's next look at `producer` either finds
// every CQE the daemon published before seeing the arm, or the daemon fires the event.
inline void arm_cq(RingHeader& header, uint32_t mode) noexcept {
    header.arm.store(mode, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Daemon half, right after publish(): true when this publication fires the armed event (the
// arm is consumed). `solicited`: the entries just published include a solicited or error one.
inline bool take_arm_after_publish(RingHeader& header, bool solicited) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t arm = header.arm.load(std::memory_order_relaxed);
    if (arm != kArmNext && !(arm == kArmSolicited && solicited)) return false;
    return header.arm.exchange(kArmNone, std::memory_order_acq_rel) != kArmNone;
}

// Bytes a ring with `entries` entries of `entry_size` bytes occupies, page-rounded by the caller.
constexpr size_t ring_bytes(uint32_t entries, uint32_t entry_size) {
    return sizeof(RingHeader) + size_t{entries} * entry_size;
}

constexpr bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

constexpr uint32_t round_up_power_of_two(uint32_t v) {
    uint32_t p = 1;
    while (p < v && p < (1u << 31)) p <<= 1;
    return p;
}

// A view over one ring in shared memory, for either side. `size` and `entry_size` come from the
// side's own copy (the control reply or its own creation), never re-read from shared memory.
class RingView {
public:
    RingView() = default;
    RingView(void* base, uint32_t size, uint32_t entry_size)
        : header_(static_cast<RingHeader*>(base)),
          entries_(static_cast<uint8_t*>(base) + sizeof(RingHeader)),
          mask_(size - 1),
          entry_size_(entry_size) {}

    bool valid() const noexcept { return header_ != nullptr; }
    RingHeader& header() const noexcept { return *header_; }
    uint32_t size() const noexcept { return mask_ + 1; }
    uint32_t entry_size() const noexcept { return entry_size_; }
    void* entry(uint32_t index) const noexcept { return entries_ + size_t{index & mask_} * entry_size_; }

    // Producer side. `produced` is the producer's private copy of its index.
    uint32_t free_slots(uint32_t produced) const noexcept {
        const uint32_t used = produced - header_->consumer.load(std::memory_order_acquire);
        return used > size() ? 0 : size() - used;  // a lying consumer makes the ring look full
    }
    void publish(uint32_t produced) const noexcept { header_->producer.store(produced, std::memory_order_release); }

    // Consumer side. `consumed` is the consumer's private copy of its index. Returns how many
    // entries are ready, or UINT32_MAX when the producer index is impossible (corrupt ring).
    static constexpr uint32_t kCorrupt = UINT32_MAX;
    uint32_t ready(uint32_t consumed) const noexcept {
        const uint32_t avail = header_->producer.load(std::memory_order_acquire) - consumed;
        return avail > size() ? kCorrupt : avail;
    }
    void release(uint32_t consumed) const noexcept { header_->consumer.store(consumed, std::memory_order_release); }

private:
    RingHeader* header_ = nullptr;
    uint8_t* entries_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t entry_size_ = 0;
};

}  // namespace rnic::host::abi
