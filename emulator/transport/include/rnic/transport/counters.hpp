// Counters with names close to `rdma statistic` and the vendor counters, per QP and per device.
#pragma once

#include <cstdint>

#include "rnic/common/counter_macros.hpp"

namespace rnic::transport {

#define RNIC_QP_COUNTERS(X)                                                                                        \
    X(tx_packets)                                                                                                  \
    X(tx_bytes) X(rx_packets) X(rx_bytes) X(retransmits) X(retransmitted_packets) X(local_ack_timeout_err)         \
        X(rnr_nak_retry_err) X(packet_seq_err) X(seq_naks_sent) X(seq_naks_received) X(rnr_naks_sent)              \
            X(rnr_naks_received) X(duplicate_requests) X(out_of_sequence) X(out_of_buffer) X(remote_access_errors) \
                X(remote_invalid_request_errors) X(remote_operational_errors) X(implied_nak_seq_err) X(acks_sent)  \
                    X(acks_received) X(read_responses_sent) X(atomics_executed) X(atomic_writes_executed)        \
                        X(flushes_executed) X(uc_dropped_messages) X(ud_qkey_violations) X(completions)          \
                            X(error_completions) X(responses_dropped) X(cnps_sent) X(cnps_received)

#define RNIC_DEVICE_COUNTERS(X)                                                                          \
    X(rx_frames)                                                                                         \
    X(rx_icrc_errors) X(rx_malformed) X(rx_not_rocev2) X(rx_not_for_us) X(rx_unknown_qp) X(rx_bad_state) \
        X(rx_bad_source) X(rx_bad_pkey) X(tx_frames) X(cq_overflows) X(async_events) X(qpc_cache_hits)   \
            X(qpc_cache_misses) X(qpc_cache_evictions) X(processing_ns) X(internal_errors)          \
                X(np_ecn_marked_roce_packets) X(np_cnp_sent) X(rp_cnp_handled) X(rp_cnp_ignored)      \
                    X(pause_requests) X(tx_pause_holds) X(odp_waits) X(odp_rnr_naks) X(odp_timeouts)

struct QpCounters {
    RNIC_COUNTER_MEMBERS(RNIC_QP_COUNTERS)
    void add(const QpCounters& o);
};

struct DeviceCounters {
    RNIC_COUNTER_MEMBERS(RNIC_DEVICE_COUNTERS)
};

}  // namespace rnic::transport
