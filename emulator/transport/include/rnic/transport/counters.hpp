// Counters with names close to `rdma statistic` and the vendor counters, per QP and per device.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace rnic::transport {

#define RNIC_QP_COUNTERS(X)                                                                           \
    X(tx_packets) X(tx_bytes) X(rx_packets) X(rx_bytes) X(retransmits) X(retransmitted_packets)       \
    X(local_ack_timeout_err) X(rnr_nak_retry_err) X(packet_seq_err) X(seq_naks_sent)                  \
    X(seq_naks_received) X(rnr_naks_sent) X(rnr_naks_received) X(duplicate_requests)                  \
    X(out_of_sequence) X(out_of_buffer) X(remote_access_errors) X(remote_invalid_request_errors)     \
    X(remote_operational_errors) X(implied_nak_seq_err) X(acks_sent) X(acks_received)                  \
    X(read_responses_sent) X(atomics_executed) X(uc_dropped_messages) X(ud_qkey_violations)           \
    X(completions) X(error_completions)

#define RNIC_DEVICE_COUNTERS(X)                                                                      \
    X(rx_frames) X(rx_icrc_errors) X(rx_malformed) X(rx_not_rocev2) X(rx_not_for_us) X(rx_unknown_qp) \
    X(rx_bad_state) X(rx_bad_source) X(rx_bad_pkey) X(tx_frames) X(cq_overflows) X(async_events)     \
    X(qpc_cache_hits) X(qpc_cache_misses) X(qpc_cache_evictions) X(processing_ns)

#define RNIC_DECLARE_COUNTER(name) uint64_t name = 0;
#define RNIC_LIST_COUNTER(name) out.emplace_back(#name, name);
// The members of a counter struct: one uint64_t per name in LIST, and list() of (name, value)
// pairs in that order. The port's counter structs use it too.
#define RNIC_COUNTER_MEMBERS(LIST)                                    \
    LIST(RNIC_DECLARE_COUNTER)                                        \
    std::vector<std::pair<std::string_view, uint64_t>> list() const { \
        std::vector<std::pair<std::string_view, uint64_t>> out;       \
        LIST(RNIC_LIST_COUNTER)                                       \
        return out;                                                   \
    }

struct QpCounters {
    RNIC_COUNTER_MEMBERS(RNIC_QP_COUNTERS)
    void add(const QpCounters& o);
};

struct DeviceCounters {
    RNIC_COUNTER_MEMBERS(RNIC_DEVICE_COUNTERS)
};

}  // namespace rnic::transport
