// What one user may hold on one device, as the rdma cgroup limits a group of processes per device
// (rdma.max: hca_handle for verbs contexts, hca_object for the objects in them), here per uid and
// per object type. A fresh cgroup allows "max" of everything, leaving only the device's own
// limits; so does a uid nobody configured.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rnic::host::server {

// The kinds a user is counted in: sessions (a verbs context each, cgroup's hca_handle), the
// objects made in them (hca_object's kinds), and rdma_cm ids (the CM's, connection requests'
// too).
enum class Resource : uint8_t { Sessions, Pds, Mrs, Cqs, Qps, Srqs, Ahs, CmIds };
inline constexpr size_t kResourceCount = 8;
inline constexpr std::array<std::string_view, kResourceCount> kResourceNames = {"sessions", "pds",  "mrs", "cqs",
                                                                                "qps",      "srqs", "ahs", "cm_ids"};

inline constexpr uint32_t kUnlimited = UINT32_MAX;  // "max"

struct UserLimits {
    std::array<uint32_t, kResourceCount> max;
    UserLimits() { max.fill(kUnlimited); }
    uint32_t& operator[](Resource r) { return max[static_cast<size_t>(r)]; }
    uint32_t operator[](Resource r) const { return max[static_cast<size_t>(r)]; }
};

inline std::optional<Resource> resource_by_name(std::string_view name) {
    for (size_t i = 0; i < kResourceCount; ++i)
        if (kResourceNames[i] == name) return static_cast<Resource>(i);
    return std::nullopt;
}

}  // namespace rnic::host::server
