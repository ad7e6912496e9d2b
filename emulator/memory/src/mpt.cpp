#include "rnic/memory/mpt.hpp"

namespace rnic::mem {

std::string_view mr_state_name(MrState state) noexcept {
    switch (state) {
        case MrState::Free:
            return "free";
        case MrState::Valid:
            return "valid";
        case MrState::Invalid:
            return "invalid";
    }
    return "unknown";
}

Mpt::Mpt(uint32_t max_entries, uint32_t first_index) : max_entries_(max_entries), first_(first_index), entries_(1) {}

std::optional<uint32_t> Mpt::allocate() {
    uint32_t index = 0;
    if (!free_.empty()) {
        index = free_.front();
        free_.pop_front();
    } else if (entries_.size() <= max_entries_) {
        index = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
    } else {
        return std::nullopt;
    }
    MptEntry& e = entries_[index];
    const uint8_t variant = static_cast<uint8_t>(e.variant + 1);
    e = MptEntry{};
    e.variant = variant;
    ++in_use_;
    return first_ + index - 1;
}

void Mpt::release(uint32_t index) {
    index = slot(index);
    MptEntry& e = entries_[index];
    const uint8_t variant = e.variant;  // kept, so the next allocation moves past it
    e = MptEntry{};
    e.variant = variant;
    free_.push_back(index);
    --in_use_;
}

const MptEntry* Mpt::find(uint32_t key) const noexcept {
    const uint32_t index = key_index(key);
    if (index < first_ || slot(index) >= entries_.size()) return nullptr;
    const MptEntry& e = entries_[slot(index)];
    if (e.state == MrState::Free || e.variant != key_variant(key)) return nullptr;
    return &e;
}

MptEntry* Mpt::find(uint32_t key) noexcept {
    return const_cast<MptEntry*>(static_cast<const Mpt&>(*this).find(key));
}

}  // namespace rnic::mem
