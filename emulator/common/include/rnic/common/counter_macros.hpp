// Counter structs declared from one X-macro list of names, so every counter has its name for
// Stats, rnicctl and logs without a second list to keep in step.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#define RNIC_DECLARE_COUNTER(name) uint64_t name = 0;
#define RNIC_LIST_COUNTER(name) out.emplace_back(#name, name);
// The members of a counter struct: one uint64_t per name in LIST, and list() of (name, value)
// pairs in that order.
#define RNIC_COUNTER_MEMBERS(LIST)                                    \
    LIST(RNIC_DECLARE_COUNTER)                                        \
    std::vector<std::pair<std::string_view, uint64_t>> list() const { \
        std::vector<std::pair<std::string_view, uint64_t>> out;       \
        LIST(RNIC_LIST_COUNTER)                                       \
        return out;                                                   \
    }
