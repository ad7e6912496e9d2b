// Objects by handle, found by indexing rather than searching: the low bits of a handle are the
// object's slot, the bits above them a generation that changes each time the slot is reused (so a
// handle kept past destruction names nothing, as an MPT key's variant byte does), and a fixed tag
// on top tells the kinds apart (a CQ handle is never a valid PD handle). Slots are handed out in
// order first, then reused oldest-freed first. Lookups never throw and never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rnic/common/ring_buffer.hpp"

namespace rnic::transport {

using common::RingBuffer;

template <class T>
class SlotTable {
public:
    // `capacity` objects at most; slots below `first_slot` are never used (QPNs 0 and 1 are the
    // special QPs); handles fit in `handle_bits` bits below `tag`.
    SlotTable(uint32_t capacity, uint32_t first_slot, uint32_t handle_bits, uint32_t tag)
        : capacity_(capacity), first_slot_(first_slot), tag_(tag) {
        const uint32_t last = first_slot + (capacity ? capacity - 1 : 0);
        while (slot_bits_ < 31 && (1u << slot_bits_) <= last) ++slot_bits_;
        const uint32_t gen_bits = handle_bits > slot_bits_ ? handle_bits - slot_bits_ : 0;
        generation_mask_ = gen_bits >= 32 ? UINT32_MAX : (1u << gen_bits) - 1;
        free_.reserve(capacity);  // so remove() never allocates
    }

    size_t size() const noexcept { return live_; }
    uint32_t capacity() const noexcept { return capacity_; }
    uint32_t slot_of(uint32_t handle) const noexcept { return handle & slot_mask(); }

    T* find(uint32_t handle) const noexcept {
        const uint32_t slot = slot_of(handle);
        if (slot >= entries_.size() || entries_[slot].handle != handle) return nullptr;
        return entries_[slot].object.get();
    }

    // Takes ownership and returns the new handle, or 0 when the table is full. Throws only
    // std::bad_alloc (control path).
    uint32_t insert(std::unique_ptr<T> object) {
        if (live_ >= capacity_) return 0;
        uint32_t slot;
        uint32_t generation = 0;
        if (entries_.size() < size_t{first_slot_} + capacity_ && free_.empty()) {
            if (entries_.empty()) entries_.resize(first_slot_);
            slot = static_cast<uint32_t>(entries_.size());
            entries_.emplace_back();
        } else {
            slot = free_.front();
            free_.pop_front();
            generation = ((entries_[slot].last_handle & ~tag_) >> slot_bits_) + 1;
        }
        Entry& e = entries_[slot];
        e.handle = tag_ | ((generation & generation_mask_) << slot_bits_) | slot;
        e.last_handle = e.handle;
        e.object = std::move(object);
        ++live_;
        return e.handle;
    }

    // The object, handed back so the caller decides when it dies; null if no such handle.
    std::unique_ptr<T> remove(uint32_t handle) {
        const uint32_t slot = slot_of(handle);
        if (slot >= entries_.size() || entries_[slot].handle != handle) return nullptr;
        Entry& e = entries_[slot];
        e.handle = 0;
        --live_;
        free_.push_back(slot);  // reserved for `capacity` slots: never allocates
        return std::move(e.object);
    }

    // Every live object, in slot order. Control path and introspection only.
    template <class Fn>
    void for_each(Fn&& fn) const {
        for (const Entry& e : entries_)
            if (e.handle != 0) fn(e.handle, *e.object);
    }

private:
    struct Entry {
        uint32_t handle = 0;       // 0: free
        uint32_t last_handle = 0;  // the generation to move on from
        std::unique_ptr<T> object;
    };
    uint32_t slot_mask() const noexcept { return (1u << slot_bits_) - 1; }

    uint32_t capacity_;
    uint32_t first_slot_;
    uint32_t tag_;
    uint32_t slot_bits_ = 1;
    uint32_t generation_mask_ = 0;
    size_t live_ = 0;
    std::vector<Entry> entries_;
    RingBuffer<uint32_t> free_;
};

}  // namespace rnic::transport
