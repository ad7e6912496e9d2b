// Helpers for tests that run against two real rnicd on the test bed (tools/testbed.sh), through
// the client library: reading the bed's env file, connected QP pairs, waiting for completions.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rnic/host/client/connection.hpp"

namespace rnic::itest {

using host::client::Connection;
using Cqe = host::abi::Cqe;

// tools/testbed.sh's env file ($RNIC_TESTBED_DIR/env): key=value words.
std::map<std::string, std::string> bed_env();

// A page-aligned heap buffer (as perftest allocates), registered by the caller.
struct Buffer {
    explicit Buffer(size_t bytes);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    uint8_t* data;
    size_t size;
};

// One side: a connection to one daemon with a PD, a CQ and a registered buffer.
struct Side {
    std::unique_ptr<Connection> conn;
    host::client::Pd* pd = nullptr;
    host::client::Cq* cq = nullptr;
    std::unique_ptr<Buffer> buf;
    host::client::Mr* mr = nullptr;
    host::abi::AddressVector self_av{};  // GID 0 as a peer would address us
    ~Side();
};

std::unique_ptr<Side> open_side(const std::string& socket_path, size_t buffer_bytes, uint32_t cq_depth = 1024);

struct QpPair {
    host::client::Qp* a = nullptr;  // on side A
    host::client::Qp* b = nullptr;
};

struct QpOptions {
    uint32_t type = IBV_QPT_RC;
    ibv_mtu mtu = IBV_MTU_1024;
    uint8_t timeout = 14;
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint32_t max_wr = 256;
    uint32_t qkey = 0x11111111;
    // The GID both ends use (as source and as the peer's destination): 0 is the IPv4-mapped one,
    // 1 link-local, 2 the first --ip6 address (RoCEv2 over IPv6).
    uint8_t gid_index = 0;
    // The GRH traffic class both ends put in their path: the IPv4 TOS byte or the IPv6 traffic
    // class of every frame the pair sends (DSCP << 2 | ECN).
    uint8_t traffic_class = 0;
};

// How a peer addresses `s` through its GID `gid_index`, sending from its own GID of that index
// (both daemons have the same GID layout).
host::abi::AddressVector peer_av(const Side& s, uint8_t gid_index);

// Two QPs, one per side, created and moved to RTS against each other.
QpPair connect_pair(Side& a, Side& b, const QpOptions& options);
host::client::Qp* create_qp(Side& s, const QpOptions& options);
void bring_up(Side& s, host::client::Qp* qp, uint32_t remote_qpn, const host::abi::AddressVector& remote,
              const QpOptions& options);

// Polls until `n` completions arrived or the deadline passes; returns what arrived.
std::vector<Cqe> wait_completions(Side& s, size_t n, std::chrono::milliseconds limit = std::chrono::seconds(20));

// Post helpers (signaled).
int post_send(Side& s, host::client::Qp* qp, uint8_t opcode, uint64_t wr_id, uint8_t* local, uint32_t length,
              uint64_t remote_addr = 0, uint32_t rkey = 0, uint32_t imm = 0, uint64_t compare_add = 0,
              uint64_t swap = 0);
int post_recv(Side& s, host::client::Qp* qp, uint64_t wr_id, uint8_t* local, uint32_t length);
// A signaled UD SEND of `length` bytes at `local` through `ah` to remote_qpn/qkey.
int post_ud_send(Side& s, host::client::Qp* qp, host::client::Ah* ah, uint32_t remote_qpn, uint32_t qkey,
                 uint64_t wr_id, uint8_t* local, uint32_t length);

// The daemon's Stats document, counters by name.
std::map<std::string, uint64_t> counters(Connection& conn);

// One entry of the Stats document's "sessions": the objects a client holds in that daemon.
struct SessionObjects {
    uint64_t id = 0, pid = 0, pds = 0, mrs = 0, cqs = 0, qps = 0, srqs = 0, ahs = 0, segments = 0;
    uint64_t segments_unsealed = 0;  // mapped segments the daemon could not seal against shrinking
};
std::vector<SessionObjects> sessions(Connection& conn);
// The device-wide counts Stats takes from the engine itself (its "objects"): an object a
// reclaimed session failed to destroy still shows there.
std::map<std::string, uint64_t> device_objects(Connection& conn);
// The "qps" list: (qpn, pid of the owning client).
std::vector<std::pair<uint32_t, uint64_t>> qp_owners(Connection& conn);

// Appends one JSON line to $RNIC_TESTBED_DIR/facts.jsonl: what a test did that the driver must
// find in the captures (which flows carry a traffic class, which frames were injected broken).
void record_fact(const std::string& json_line);

void fill_pattern(uint8_t* p, size_t n, uint32_t seed);

}  // namespace rnic::itest
